"""What a lake format's tables offer the lake sink (:mod:`feedkv.changefeed.sinks.lake`):
one window's commit into one table (:class:`TableChange`), the marker that records a
timestamp every table reached (:class:`Marker`), and the :class:`LakeTables` protocol
that Delta (:mod:`~feedkv.changefeed.sinks.delta`) and Iceberg
(:mod:`~feedkv.changefeed.sinks.iceberg`) implement.

**Marker history.** Beside the newest marker, the tables keep the newest
``marker_history`` markers (a sink URI parameter, :data:`DEFAULT_HISTORY` by default),
one entry each, named for its timestamp (:func:`history_name`): a read "as of ``T``"
takes the newest retained marker at or below ``T``. NB: only a marker's timestamp is a
consistent cut: between two markers a table may already hold a later window than
another (a crash between two tables' commits), so a time between markers is read at the
marker before it, never pieced together from the tables' own histories.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import pyarrow as pa

from feedkv.changefeed.sink import SinkError
from feedkv.errors import BatchTimestampBeforeGCError, InvalidArgumentError, TimestampParseError
from feedkv.util.hlc import Timestamp

__all__ = [
    "DEFAULT_HISTORY",
    "HISTORY",
    "MARKER",
    "LakeHistoryError",
    "RESOLVED_KEY",
    "STAGING",
    "LakeTables",
    "Marker",
    "TableChange",
    "history_name",
    "marker_at",
    "parse_history_name",
    "pruned",
    "sink_error",
]

RESOLVED_KEY = "feedkv.resolved"  # a commit's window end (and an Iceberg table property)
MARKER = "_feedkv_resolved"  # the Delta directory's marker file
STAGING = "_feedkv_staging"  # Spark tasks' staged rows, beside the tables
HISTORY = "_feedkv_markers"  # retained markers: a Delta directory's folder, an Iceberg
# namespace's property prefix (HISTORY + "." + history_name)
DEFAULT_HISTORY = 1000  # markers retained for reading at an older timestamp


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


class LakeHistoryError(BatchTimestampBeforeGCError[Timestamp]):
    """A read of a lake at ``ts``, which its retained history no longer covers: older
    than the oldest retained marker, or a marker whose table versions were vacuumed
    (Delta) or expired (Iceberg). ``readable_from`` is the oldest retained marker still
    readable (``None``: none is)."""

    def __init__(self, ts: Timestamp, readable_from: Timestamp | None, why: str) -> None:
        super().__init__(ts, readable_from or ts)
        self.readable_from = readable_from
        threshold = readable_from
        fix = (
            f"read at or after {threshold}"
            if threshold is not None
            else "no retained marker is readable any more"
        )
        self.args = (f"cannot read the lake as of {ts}: {why}; {fix}",)


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

    def marker(self) -> Marker | None:
        """The newest marker (``None``: no window committed yet)."""
        ...

    def marker_history(self) -> list[Timestamp]:
        """The timestamps of the retained markers, oldest first."""
        ...

    def history_marker(self, resolved: Timestamp) -> Marker | None:
        """The retained marker at ``resolved`` (``None``: not retained)."""
        ...

    def readable(self, table: str, version: int) -> bool:
        """Whether ``table`` can still be read at ``version``: its log (Delta) or
        snapshot (Iceberg) and its files are still there, not vacuumed or expired."""
        ...

    def read(self, table: str, version: int) -> pa.Table:
        """``table`` as of ``version`` (a version or snapshot id of a marker)."""
        ...

    def write_marker(self, marker: Marker) -> None:
        """Keep ``marker`` in the history (dropping the oldest past the tables'
        ``marker_history``), then make it the newest marker atomically."""
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


def history_name(resolved: Timestamp) -> str:
    """A retained marker's name: its timestamp, fixed-width so that names sort as the
    timestamps do."""
    return f"{resolved.wall:019d}.{resolved.logical:010d}"


def parse_history_name(name: str) -> Timestamp | None:
    """The timestamp of a :func:`history_name` (``None``: not one, e.g. a temporary
    file)."""
    try:
        return Timestamp.parse(name)
    except TimestampParseError:
        return None


def marker_at(retained: Sequence[Timestamp], at: Timestamp) -> Timestamp | None:
    """The newest of ``retained`` (oldest first) at or below ``at``."""
    i = bisect.bisect_right(retained, at)
    return retained[i - 1] if i else None


def pruned(retained: Sequence[Timestamp], keep: int) -> list[Timestamp]:
    """The markers of ``retained`` (oldest first) to drop to keep the newest ``keep``."""
    return list(retained[: max(0, len(retained) - keep)])
