"""What a lake format's tables offer the lake sink (:mod:`feedkv.changefeed.sinks.lake`):
one window's commit into one table (:class:`TableChange`), the marker that records a
timestamp every table reached (:class:`Marker`), and the :class:`LakeTables` protocol
that Delta (:mod:`~feedkv.changefeed.sinks.delta`) and Iceberg
(:mod:`~feedkv.changefeed.sinks.iceberg`) implement.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Protocol

import pyarrow as pa

from feedkv.changefeed.sink import SinkError
from feedkv.errors import InvalidArgumentError, TimestampParseError
from feedkv.util.hlc import Timestamp

__all__ = [
    "MARKER",
    "RESOLVED_KEY",
    "STAGING",
    "LakeTables",
    "Marker",
    "TableChange",
    "sink_error",
]

RESOLVED_KEY = "feedkv.resolved"  # a commit's window end (and an Iceberg table property)
MARKER = "_feedkv_resolved"  # the Delta directory's marker file
STAGING = "_feedkv_staging"  # Spark tasks' staged rows, beside the tables


@dataclass(frozen=True)
class Marker:
    """Every table of a changefeed as of ``resolved``: each table's version (Delta) or
    snapshot id (Iceberg) that holds exactly its rows up to it."""

    resolved: Timestamp
    versions: dict[str, int]

    def to_json(self) -> str:
        return json.dumps({"resolved": str(self.resolved), "versions": self.versions})

    @classmethod
    def from_json(cls, text: str) -> Marker:
        try:
            parsed = json.loads(text)
            versions = {str(k): int(v) for k, v in parsed["versions"].items()}
            return cls(Timestamp.parse(parsed["resolved"]), versions)
        except (ValueError, KeyError, TypeError, AttributeError, TimestampParseError) as exc:
            raise InvalidArgumentError(f"not a feedkv lake marker: {text[:200]!r}") from exc


@dataclass(frozen=True)
class TableChange:
    """One window's commit into one lake table. ``columns`` are the source table's
    (its newest descriptor version in the window), ``key`` its primary key. Mirror:
    ``upserts`` (whole rows) and ``deletes`` (key columns); changelog: ``changes``
    (the columns, then :data:`CHANGE_COLUMNS`)."""

    table: str
    resolved: Timestamp
    key: tuple[str, ...]
    columns: pa.Schema
    upserts: pa.Table | None = None
    deletes: pa.Table | None = None
    changes: pa.Table | None = None
    # A Spark job's (job id, batch id): a Delta application transaction
    # (feedkv-<job id>, batch id), feedkv.job/feedkv.batch in Iceberg snapshot summaries.
    batch: tuple[int, int] | None = None


class LakeTables(Protocol):
    """One lake format's tables (a Delta directory, an Iceberg namespace)."""

    def last_resolved(self, table: str) -> Timestamp | None:
        """The ``feedkv.resolved`` of ``table``'s newest commit (``None``: no table)."""
        ...

    def commit(self, change: TableChange) -> None:
        """Apply ``change`` as one commit recording ``change.resolved``. Raises
        :class:`SinkError`."""
        ...

    def version_at(self, table: str, resolved: Timestamp) -> int | None:
        """The version (Delta) or snapshot id (Iceberg) of ``table`` that holds its rows
        up to ``resolved``: the last one made by a commit recording a timestamp at or
        below it (``None``: no such commit, the table had no rows then). NB: not always
        the newest: after a crash between two tables' commits, a table may hold a
        window that the restart reaches again in smaller windows."""
        ...

    def marker(self) -> Marker | None: ...

    def read(self, table: str, version: int) -> pa.Table:
        """``table`` as of ``version`` (a version or snapshot id of a marker)."""
        ...

    def write_marker(self, marker: Marker) -> None:
        """Replace the marker atomically."""
        ...

    def location(self, table: str) -> str:
        """Where another reader finds ``table``: a Delta table's directory, an Iceberg
        table's current metadata file (which lists every snapshot)."""
        ...

    def close(self) -> None: ...


def sink_error(what: str, exc: Exception) -> SinkError:
    """A lake library's failure as a retryable sink error."""
    error = SinkError(f"{what}: {type(exc).__name__}: {exc}")
    error.__cause__ = exc
    return error
