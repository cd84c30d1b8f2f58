"""Small files a node keeps beside its store (its identity, the peers it knows)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["replace_durably"]


def replace_durably(path: Path, text: str) -> None:
    """Make ``path`` hold ``text``, whole or not at all, also across a power loss: the
    text goes to a temporary file beside it, synced, which then replaces it; the
    directory is synced so the replacement itself is kept."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
