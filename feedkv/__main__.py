"""``python -m feedkv``: the ``feedkv`` command (:mod:`feedkv.cli.main`), for an
environment whose scripts are not on the ``PATH``."""

import sys

from feedkv.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
