"""``file:///dir``, ``s3://bucket/prefix``, ``gs://bucket/prefix`` and
``azure://container/prefix``: changefeed files in a directory tree.

Files are named so that reading them in lexicographic order is safe::

    <date>/<ts>-<session>-<node id>-<sink id>-<file id>-<topic>-<schema id>.ndjson[.gz|.zst]
    <date>/<ts>.RESOLVED

``<ts>`` is ``YYYYMMDDHHMMSS`` + 9 digits of nanoseconds + 10 of logical time. A data
file's ``<ts>`` is just above the sink's last resolved timestamp when the file was
written (the feed's start before any; on Spark, just above its window's start), so it
never decreases and a file written after a marker sorts after it, as in CockroachDB;
``<session>`` (when this sink started, in hex, and 4 random hex digits), ``<node id>``
(the node that writes), ``<sink id>`` (counting the process's sinks) and ``<file id>``
(counting from 0, ``%08x``) order files with the same ``<ts>``; ``<schema id>`` (the
table descriptor's version) is in hex. These are CockroachDB's fields, in its order, so
tools that parse its file names (:data:`FILE_NAME`) read these. A resolved file for
``T`` is written after every file holding a row at or below ``T``, and those files'
names all sort before it; files that sort after it hold only rows above ``T`` or rows
already seen. ``<date>`` is the directory chosen by ``partition_format``: ``daily``
(``2024-05-01``, the default), ``hourly`` (``2024-05-01/13``) or ``flat`` (none).

Each line of an ``.ndjson`` file is one message value; a deletion without a value
(envelopes ``bare``, ``row`` and ``key_only``) is written as its key. Under ``wrapped``
a JSON value carries the row's key (``key_in_value`` is on for files, as in
CockroachDB: :func:`~feedkv.changefeed.sink.message_options`), so a deletion says
which row it deleted. ``file_size``
(default 16 MiB) bounds a file before compression. ``format=csv`` and ``format=parquet``
write the rows themselves, one file per batch.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import gzip
import io
import itertools
import os
import re
import secrets
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol
from urllib.parse import unquote

from feedkv.changefeed.cockroach_parquet import CockroachParquet
from feedkv.changefeed.encoder import resolved_json
from feedkv.changefeed.node_buffers import NodeBuffers
from feedkv.changefeed.options import ChangefeedOptions, option_error
from feedkv.changefeed.sink import (
    BatchingSink,
    FlushConfig,
    Message,
    SinkError,
    SinkURI,
    TerminalSinkError,
)
from feedkv.errors import InvalidArgumentError, SQLError
from feedkv.util.hlc import Timestamp

__all__ = [
    "BlobStore",
    "FILE_NAME",
    "CloudStorageClient",
    "LocalBlobs",
    "NodeBlobsOf",
    "blob_store",
    "check",
    "file_sink",
    "file_topic",
    "make",
    "name_ts",
]

DEFAULT_FILE_SIZE = 16 << 20
PROBE_PREFIX = ".feedkv-probe-"  # a file written and removed when a changefeed is created
# What no retry can change: the path (or a directory on it) is not a directory, is not
# writable, or cannot hold files (``/proc/self``: ENOENT under a directory that exists).
_TERMINAL_ERRNOS = frozenset(
    {errno.ENOTDIR, errno.EISDIR, errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOENT}
)
# Another node's directory below its external I/O directory (node id, path), where a
# nodelocal:// sink naming that node writes.
NodeBlobsOf = Callable[[int, str], "BlobStore"]
_PARTITIONS = {"daily": "%Y-%m-%d", "hourly": "%Y-%m-%d/%H", "flat": ""}
# A data file's name, its fields by name (CockroachDB's layout, see the module)
FILE_NAME = re.compile(
    r"(?P<ts>\d{33})-(?P<session>[0-9a-f]+)-(?P<node_id>\d+)-(?P<sink_id>\d+)-"
    r"(?P<file_id>[0-9a-f]{8,})-(?P<topic>[^-/]+)-(?P<schema_id>[0-9a-f]+)\.(?P<ext>[a-z.]+)$"
)
_SINK_IDS = itertools.count(1)  # each sink of this process has its own


class BlobStore(Protocol):
    def put(self, name: str, data: bytes) -> None:
        """Write ``data`` as ``name`` (a relative path), durably and atomically: a
        reader sees the whole file or none of it. Raises SinkError."""
        ...

    def get(self, name: str) -> bytes | None:
        """The contents of ``name`` (``None``: there is no such file)."""
        ...

    def rename(self, name: str, new_name: str) -> None:
        """Move ``name`` to ``new_name`` durably (replacing it); a missing ``name``
        that is already at ``new_name`` is no error, so a retried rename succeeds."""
        ...

    def delete(self, name: str) -> None:
        """Remove ``name`` if it exists."""
        ...

    def list(self, prefix: str) -> list[str]:
        """The names of the files under the folder ``prefix`` (which ends with ``/``)."""
        ...

    def close(self) -> None: ...


class LocalBlobs:
    """A directory on the local disk; each file is written to a temporary name,
    fsynced and renamed into place. The temporary name is hidden (``.``-prefixed), as
    loaders that list a directory (Spark's, Hive's) skip such names while it is written."""

    def __init__(self, root: str) -> None:
        self.root = root
        try:
            os.makedirs(root, exist_ok=True)
        except OSError as exc:
            raise option_error(
                f"cannot use {root!r} for changefeed files: {exc.strerror}"
            ) from None

    def put(self, name: str, data: bytes) -> None:
        self.put_pieces(name, (data,))

    def put_pieces(self, name: str, pieces: Iterable[bytes]) -> None:
        """:meth:`put` of the file ``pieces`` make, written as they come (a node writing
        another node's file: :mod:`feedkv.server.blob_service`); an error raised by
        ``pieces`` leaves no file and no temporary one."""
        path = os.path.join(self.root, name)
        directory = os.path.dirname(path)
        tmp = os.path.join(directory, f".{os.path.basename(path)}.{secrets.token_hex(4)}.tmp")
        try:
            os.makedirs(directory, exist_ok=True)
            try:
                with open(tmp, "wb") as f:
                    for piece in pieces:
                        f.write(piece)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, path)
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    os.remove(tmp)
                raise
            _fsync_dir(directory)
        except OSError as exc:
            raise _os_error(f"cannot write changefeed file {path}", exc) from exc

    def get(self, name: str) -> bytes | None:
        try:
            with open(os.path.join(self.root, name), "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise SinkError(f"cannot read changefeed file {name}: {exc.strerror}") from exc

    def rename(self, name: str, new_name: str) -> None:
        src, dst = os.path.join(self.root, name), os.path.join(self.root, new_name)
        try:
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            os.replace(src, dst)
            _fsync_dir(os.path.dirname(dst))
        except FileNotFoundError:
            if not os.path.exists(dst):
                raise SinkError(f"cannot publish changefeed file {name}: it is gone") from None
        except OSError as exc:
            raise _os_error(f"cannot publish changefeed file {dst}", exc) from exc

    def delete(self, name: str) -> None:
        try:
            os.remove(os.path.join(self.root, name))
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise SinkError(f"cannot remove changefeed file {name}: {exc.strerror}") from exc

    def list(self, prefix: str) -> list[str]:
        top = os.path.join(self.root, prefix)
        return [
            os.path.relpath(os.path.join(directory, file), self.root)
            for directory, _dirs, files in os.walk(top)
            for file in files
        ]

    def close(self) -> None:
        pass


def _os_error(what: str, exc: OSError) -> SinkError:
    """``exc`` as a sink error: terminal when no retry can change it."""
    if exc.errno in _TERMINAL_ERRNOS:
        return TerminalSinkError(
            f"{what}: {exc.strerror}; the path must be a directory this node can write to"
        )
    return SinkError(f"{what}: {exc.strerror}")


def _fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def name_ts(ts: Timestamp) -> str:
    """``ts`` as file names carry it: sortable text."""
    seconds, nanos = divmod(ts.wall, 1_000_000_000)
    when = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    return f"{when:%Y%m%d%H%M%S}{nanos:09d}{ts.logical:010d}"


class CloudStorageClient:
    def __init__(
        self,
        blobs: BlobStore,
        options: ChangefeedOptions,
        *,
        start: Timestamp,
        partition_format: str = "daily",
        node_id: int = 1,
    ) -> None:
        self._blobs = blobs
        self._options = options
        self._file_ts = start
        self._partition = _PARTITIONS[partition_format]
        self._uniquer = f"{time.time_ns():016x}{secrets.token_hex(2)}-{node_id}-{next(_SINK_IDS)}"
        self._file_id = 0
        self._compression = options.compression
        self._extension = {"json": ".ndjson", "csv": ".csv", "parquet": ".parquet"}[options.format]
        if self._compression and options.format != "parquet":
            self._extension += ".gz" if self._compression == "gzip" else ".zst"

    def _dir(self, ts: Timestamp) -> str:
        if not self._partition:
            return ""
        when = datetime.datetime.fromtimestamp(ts.wall // 1_000_000_000, datetime.UTC)
        return when.strftime(self._partition) + "/"

    def send(self, topic: str, batch: list[Message]) -> None:
        """A file for each run of ``batch``'s messages of one schema version: the file
        is named after it, and its rows share their columns."""
        start = 0
        for end in range(1, len(batch) + 1):
            if end == len(batch) or batch[end].schema_id != batch[start].schema_id:
                self._send_file(topic, batch[start:end])
                start = end

    def _send_file(self, topic: str, batch: list[Message]) -> None:
        name = (
            f"{self._dir(self._file_ts)}{name_ts(self._file_ts)}-{self._uniquer}-"
            f"{self._file_id:08x}-{_safe(topic)}-{batch[0].schema_id:x}{self._extension}"
        )
        self._file_id += 1
        self._blobs.put(name, self._compress(self._body(batch)))

    def send_resolved(self, ts: Timestamp, topics: list[str]) -> None:
        # NB: CockroachDB's bytes: {"resolved":"<ts>"}, __crdb__ outside the wrapped envelope
        body = resolved_json(ts, self._options.envelope)
        self._blobs.put(f"{self._dir(ts)}{name_ts(ts)}.RESOLVED", body)
        # NB: every later row is above ts, and a file named ts would sort before the
        # marker (``-`` < ``.``): a reader past the marker would never see it
        self._file_ts = max(self._file_ts, ts.next())

    def close(self) -> None:
        self._blobs.close()

    def _body(self, batch: list[Message]) -> bytes:
        fmt = self._options.format
        if fmt == "json":
            return b"".join((m.key if m.value is None else m.value) + b"\n" for m in batch)
        from feedkv.changefeed import file_formats

        if fmt == "csv":
            return file_formats.csv_bytes(batch, self._options.csv_header)
        layout = CockroachParquet.files(self._options)
        return file_formats.parquet_bytes(batch, self._compression, layout)

    def _compress(self, data: bytes) -> bytes:
        if self._compression is None or self._options.format == "parquet":
            return data
        if self._compression == "gzip":
            buffer = io.BytesIO()
            with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as f:
                f.write(data)
            return buffer.getvalue()
        import zstandard

        return zstandard.ZstdCompressor().compress(data)


def file_topic(name: str) -> str:
    """The topic of the data file ``name`` (a path, or its last part), by :data:`FILE_NAME`;
    :class:`ValueError` when ``name`` is not a data file's."""
    matched = FILE_NAME.match(name.rpartition("/")[2])
    if matched is None:
        raise ValueError(f"{name!r} is not the name of a changefeed data file")
    return matched["topic"]


def _safe(topic: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "._" else "_" for ch in topic)


def make(
    uri: SinkURI,
    options: ChangefeedOptions,
    *,
    start: Timestamp,
    buffers: NodeBuffers | None = None,
    node_blobs: NodeBlobsOf | None = None,
    node_id: int = 1,
    **_: Any,
) -> BatchingSink:
    blobs = blob_store(uri, node_blobs)
    return file_sink(uri, blobs, options, start=start, buffers=buffers, node_id=node_id)


def file_sink(
    uri: SinkURI,
    blobs: BlobStore,
    options: ChangefeedOptions,
    *,
    start: Timestamp,
    buffers: NodeBuffers | None = None,
    node_id: int = 1,
) -> BatchingSink:
    """A sink writing changefeed files into ``blobs``, configured by ``uri``, buffering
    within the node's ``buffers`` when given; ``node_id``: the node that writes, named in
    each file's name."""
    partition = uri.param("partition_format", "daily") or "daily"
    if partition not in _PARTITIONS:
        raise option_error(f"partition_format={partition!r} is not one of {', '.join(_PARTITIONS)}")
    file_size = uri.size_param("file_size", DEFAULT_FILE_SIZE)
    client = CloudStorageClient(
        blobs, options, start=start, partition_format=partition, node_id=node_id
    )
    flush = FlushConfig(messages=1 << 62, bytes=file_size)
    return BatchingSink(client, flush=flush, buffers=buffers)


def check(
    uri: SinkURI, options: ChangefeedOptions, *, node_blobs: NodeBlobsOf | None = None, **_: Any
) -> None:
    """Write a file where the changefeed's files go and remove it (at CREATE CHANGEFEED,
    as CockroachDB checks cloud storage there): a path that is not a writable directory
    or a bucket that refuses the credentials is refused now (SQLSTATE 22023), not found
    failed later. A store that is only unreachable now raises 08000."""
    blobs = blob_store(uri, node_blobs)
    name = f"{PROBE_PREFIX}{secrets.token_hex(8)}"
    try:
        blobs.put(name, b"")
        blobs.delete(name)
    except TerminalSinkError as exc:
        raise option_error(f"the {uri.scheme}:// sink cannot be used: {exc}") from None
    except SinkError as exc:
        raise SQLError("08000", f"the {uri.scheme}:// sink cannot be reached: {exc}") from None
    finally:
        blobs.close()


def blob_store(uri: SinkURI, node_blobs: NodeBlobsOf | None = None) -> BlobStore:
    """The directory, bucket or container a ``file://``, ``s3://``, ``gs://`` or
    ``azure://`` URI names; a ``nodelocal://`` URI naming another node, its directory
    there through ``node_blobs`` (a node's, which reaches the others)."""
    if uri.scheme == "nodelocal":
        if node_blobs is None:
            raise option_error(
                f"sink URI {uri.uri!r}: a nodelocal:// sink is written by a node, below the "
                "external I/O directory of the node it names"
            )
        if not (uri.host.isdigit() and uri.host.isascii()):
            raise option_error(f"sink URI {uri.uri!r}: name the node by its id here")
        try:
            return node_blobs(int(uri.host), unquote(uri.path).strip("/") or ".")
        except InvalidArgumentError as exc:
            raise option_error(f"sink URI {uri.uri!r}: {exc}") from None
    if uri.scheme == "file":
        if uri.host not in ("", "localhost"):
            raise option_error(
                f"sink URI {uri.uri!r}: a file:// URI names a local path (file:///dir)"
            )
        if not uri.path or uri.path == "/":
            raise option_error(f"sink URI {uri.uri!r} needs a directory: file:///path/to/dir")
        return LocalBlobs(uri.path)
    if uri.scheme in ("azure", "azure-blob"):
        from feedkv.changefeed.sinks.azure import AzureBlobs

        return AzureBlobs(uri)
    if uri.scheme == "gs":
        from feedkv.changefeed.sinks.gcs import GCSBlobs

        return GCSBlobs(uri)
    from feedkv.changefeed.sinks.s3 import S3Blobs

    return S3Blobs(uri)
