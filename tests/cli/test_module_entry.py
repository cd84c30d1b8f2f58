"""``python -m feedkv`` runs the ``feedkv`` command."""

from __future__ import annotations

import subprocess
import sys


def test_python_dash_m_feedkv_runs_the_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "feedkv", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: feedkv ")
