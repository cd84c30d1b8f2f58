"""The external I/O boundary: a node reads and writes files for users (``file://``
changefeed sinks) only below its external I/O directory (``--external-io-dir``, by
default ``<store>/extern``, as CockroachDB's), so a SQL user cannot make the node's OS
user create files anywhere it may.

A path is checked after resolving ``..`` and every symlink that exists (the parts that do
not exist yet cannot point anywhere), so neither climbs out.

``nodelocal://<node>/<path>`` names a path below node ``<node>``'s directory, as
CockroachDB names it (:func:`nodelocal_parts`). On that node it is the ``file://`` path
:func:`nodelocal_to_file` gives; a job that runs on another node writes there through
the node's blob service (:mod:`feedkv.changefeed.sinks.node_blobs`), so its files stay
on the node named whichever node runs it. ``self`` is the node that runs the job (its
files move with the job when another node adopts it).
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from feedkv.errors import InvalidArgumentError

__all__ = ["NODELOCAL", "confine", "nodelocal_parts", "nodelocal_to_file"]

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


def nodelocal_parts(uri: str) -> tuple[int | None, str]:
    """The node (``None``: ``self``) and the path below its external I/O directory that
    ``nodelocal://<node>/<path>?...`` names; InvalidArgumentError for a URI naming no
    node or no path."""
    parts = urlsplit(uri)
    node = parts.hostname or ""
    if node != "self" and not (node.isdigit() and node.isascii()):
        raise InvalidArgumentError(
            f"{uri!r}: a nodelocal:// URI names a node: nodelocal://self/path or "
            "nodelocal://<node id>/path"
        )
    relative = unquote(parts.path).lstrip("/")
    if not relative:
        raise InvalidArgumentError(f"{uri!r} needs a directory: nodelocal://self/path/to/dir")
    return (None if node == "self" else int(node)), relative


def nodelocal_to_file(uri: str, root: Path) -> str:
    """The ``file://`` URI of ``nodelocal://<node>/<path>?...`` below ``root``, the
    external I/O directory of the node it names, its query kept. InvalidArgumentError
    for a path that leaves ``root``, or none."""
    path = confine(nodelocal_parts(uri)[1], root)
    return urlunsplit(("file", "", quote(str(path)), urlsplit(uri).query, ""))
