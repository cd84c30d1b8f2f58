"""The external I/O boundary: a node reads and writes files for users (``file://``
changefeed sinks) only below its external I/O directory (``--external-io-dir``, by
default ``<store>/extern``, as CockroachDB's), so a SQL user cannot make the node's OS
user create files anywhere it may.

A path is checked after resolving ``..`` and every symlink that exists (the parts that do
not exist yet cannot point anywhere), so neither climbs out.
"""

from __future__ import annotations

import os
from pathlib import Path

from feedkv.errors import InvalidArgumentError

__all__ = ["confine"]


def confine(path: str | Path, root: Path) -> Path:
    """``path`` (absolute, or relative to ``root``) resolved, if it lies within ``root``;
    else InvalidArgumentError naming both. ``root`` is created if missing."""
    root.mkdir(parents=True, exist_ok=True)
    real_root = Path(os.path.realpath(root))
    text = str(path)
    if "\0" in text:
        raise InvalidArgumentError(f"the path {text!r} holds a NUL byte")
    candidate = Path(text)
    if not candidate.is_absolute():
        candidate = real_root / candidate
    real = Path(os.path.realpath(candidate))
    if real != real_root and not real.is_relative_to(real_root):
        raise InvalidArgumentError(
            f"the path {text!r} is outside the node's external I/O directory {str(real_root)!r} "
            f"(it resolves to {str(real)!r}); file:// sinks write only below it "
            "(feedkv start --external-io-dir)"
        )
    return real
