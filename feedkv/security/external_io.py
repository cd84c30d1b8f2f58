"""The external I/O boundary: a node reads and writes files for users (``file://``
changefeed sinks) only below its external I/O directory (``--external-io-dir``, by
default ``<store>/extern``, as CockroachDB's), so a SQL user cannot make the node's OS
user create files anywhere it may.

A path is checked after resolving ``..`` and every symlink that exists (the parts that do
not exist yet cannot point anywhere), so neither climbs out.

``nodelocal://<node>/<path>`` names a path below that directory, as CockroachDB names
it (:func:`nodelocal_to_file`). feedkv has no service that carries files to another
node, so a job writes its ``nodelocal`` files on the node that runs it: ``self``, or
the id of the node the statement runs on (a job that moves with its lease writes below
its new node's directory).
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from feedkv.errors import InvalidArgumentError

__all__ = ["NODELOCAL", "confine", "nodelocal_to_file"]

NODELOCAL = "nodelocal"


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
            f"(it resolves to {str(real)!r}); the node reads and writes files for users only "
            "below it (feedkv start --external-io-dir)"
        )
    return real


def nodelocal_to_file(uri: str, root: Path, node_id: int | None = None) -> str:
    """The ``file://`` URI of ``nodelocal://<node>/<path>?...`` below ``root`` (the
    node's external I/O directory), its query kept. ``node_id``: the node the statement
    runs on, whose id the URI may name instead of ``self`` (``None``: any id, as when a
    job starts on whichever node holds it). InvalidArgumentError for another node, a
    path that leaves ``root``, or no path."""
    parts = urlsplit(uri)
    node = parts.hostname or ""
    if node != "self" and not node.isdigit():
        raise InvalidArgumentError(
            f"{uri!r}: a nodelocal:// URI names a node: nodelocal://self/path or "
            "nodelocal://<node id>/path"
        )
    if node_id is not None and node.isdigit() and int(node) != node_id:
        raise InvalidArgumentError(
            f"{uri!r}: this statement runs on node {node_id}; feedkv writes nodelocal files "
            "on the node that runs the job, and carries none to another node: name "
            f"nodelocal://self/... or nodelocal://{node_id}/..."
        )
    relative = unquote(parts.path).lstrip("/")
    if not relative:
        raise InvalidArgumentError(f"{uri!r} needs a directory: nodelocal://self/path/to/dir")
    path = confine(relative, root)
    return urlunsplit(("file", "", quote(str(path)), parts.query, ""))
