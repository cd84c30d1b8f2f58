"""Rangefeed events and registrations as protobuf messages (see ``feedkv.proto``).

Values travel as runs (:func:`values_to_proto`): a batch's values in columns, once for
every registration that read the same batch. A message per value cost about 1 us a
value each way, times the feeds of a range.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import chain, repeat
from operator import itemgetter, sub

from feedkv.errors import InvalidArgumentError
from feedkv.kv.proto import feedkv_pb2 as pb
from feedkv.kv.wire import span_from_proto, span_to_proto, timestamp_from_proto, timestamp_to_proto
from feedkv.rangefeed.event import Checkpoint, Error, ErrorReason, Value, ValueColumns, values_of
from feedkv.rangefeed.stream import ValueBatch
from feedkv.util.hlc import run_ends, timestamps_of

__all__ = [
    "RANGEFEED",
    "event_from_proto",
    "event_to_proto",
    "values_from_proto",
    "values_to_proto",
]

# The stream of a client's feeds on a node's batch port (:mod:`feedkv.kv.batch_socket`):
# it sends ``RangeFeedRequest`` messages, a frame each, and the node ``RangeFeedEvents``.
RANGEFEED = "rangefeed"

_KEY, _VALUE, _TS, _PREV_VALUE = itemgetter(0), itemgetter(1), itemgetter(2), itemgetter(3)
_WALL, _LOGICAL = itemgetter(0), itemgetter(1)


def event_to_proto(tag: int, event: Checkpoint | Error, out: pb.RangeFeedEvent) -> None:
    """A checkpoint or an error (values go in runs: :func:`values_to_proto`)."""
    out.tag = tag
    if isinstance(event, Checkpoint):
        span_to_proto(event.span, out.checkpoint.span)
        timestamp_to_proto(event.ts, out.checkpoint.ts)
    else:
        out.error.reason = event.reason.value
        out.error.message = event.message
        if event.threshold is not None:
            timestamp_to_proto(event.threshold, out.error.threshold)


def event_from_proto(msg: pb.RangeFeedEvent) -> Checkpoint | Error:
    """A checkpoint or an error (runs of values: :func:`values_from_proto`)."""
    kind = msg.WhichOneof("kind")
    if kind == "checkpoint":
        return Checkpoint(
            span_from_proto(msg.checkpoint.span), timestamp_from_proto(msg.checkpoint.ts)
        )
    if kind == "error":
        error = msg.error
        try:
            reason = ErrorReason(error.reason)
        except ValueError as exc:
            raise InvalidArgumentError(f"unknown rangefeed error reason {error.reason!r}") from exc
        threshold = timestamp_from_proto(error.threshold) if error.HasField("threshold") else None
        return Error(reason, error.message, threshold)
    raise InvalidArgumentError(f"a rangefeed event with no kind (tag {msg.tag})")


def values_to_proto(
    tags: Iterable[int], batch: ValueBatch, out: pb.RangeFeedValues, *, ts_runs: bool = False
) -> None:
    """``batch`` as one run for the registrations ``tags``: its columns as they are, or
    taken out of its values in C (Python code runs per value only for deletions and
    missing previous values). With ``ts_runs`` (the client reads them), a batch mostly in
    runs of one timestamp (see :func:`~feedkv.util.hlc.run_ends`) goes with a timestamp a
    run, saving the wire and both ends a timestamp a value."""
    values = batch.values
    keys: Iterable[bytes]
    prevs: list[bytes | None] | None
    if isinstance(values, ValueColumns):
        keys, column, timestamps, prevs = (
            values.keys,
            values.values,
            values.timestamps,
            values.prev_values,
        )
    else:
        keys, column = map(_KEY, values), list(map(_VALUE, values))
        timestamps, prevs = list(map(_TS, values)), list(map(_PREV_VALUE, values))
    out.tags.extend(tags)
    out.keys.extend(keys)
    if None in column:
        out.deleted.extend(_nones(column))
        column = [v or b"" for v in column]
    out.values.extend(column)  # type: ignore[arg-type]  # no None left
    if ts_runs and (ends := run_ends(timestamps)) and 2 * ends[-1] > len(timestamps):
        ends += range(ends[-1] + 1, len(timestamps) + 1)  # the rest in runs of one
        starts = [0, *ends[:-1]]
        out.ts_runs.extend(map(sub, ends, starts))
        timestamps = list(map(timestamps.__getitem__, starts))
    out.walls.extend(map(_WALL, timestamps))
    out.logicals.extend(map(_LOGICAL, timestamps))
    if prevs is not None and prevs.count(None) < len(prevs):
        out.no_prev.extend(_nones(prevs))
        out.prev_values.extend([v or b"" for v in prevs])
    timestamp_to_proto(batch.max_ts, out.max_ts)


def _nones(column: list[bytes | None]) -> list[int]:
    return [i for i, v in enumerate(column) if v is None]


def values_from_proto(msg: pb.RangeFeedValues) -> ValueBatch:
    """The run's values, decoded once: every registration in ``msg.tags`` gets the same
    batch. A run for one registration stays columns, its consumer making the values as it
    reads them (see :class:`ValueColumns`); one for several is made here, once for them
    all. A run whose columns do not line up is refused."""
    keys, walls, logicals, runs = msg.keys, msg.walls, msg.logicals, msg.ts_runs
    rows = len(keys)
    prevs = msg.prev_values
    if (
        len(msg.values) != rows
        or len(walls) != len(runs or keys)
        or len(logicals) != len(walls)
        or (runs and (sum(runs) != rows or 0 in runs))
        or (prevs and len(prevs) != rows)
    ):
        raise InvalidArgumentError(
            "a rangefeed values run's columns differ in length: keys, values, walls, "
            f"logicals, prev_values, ts_runs = {rows}, {len(msg.values)}, {len(walls)}, "
            f"{len(logicals)}, {len(prevs)}, {len(runs)} (of {sum(runs)} rows, none empty)"
        )
    values: list[bytes | None] = list(msg.values)
    _clear(values, msg.deleted, "deleted")
    prev_values: list[bytes | None] | None = None
    if prevs:
        prev_values = list(prevs)
        _clear(prev_values, msg.no_prev, "no_prev")
    try:
        timestamps = timestamps_of(walls, logicals)
    except InvalidArgumentError as exc:
        raise InvalidArgumentError(f"a rangefeed values run holds {exc}") from None
    if runs:
        timestamps = list(chain.from_iterable(map(repeat, timestamps, runs)))
    out: Sequence[Value]
    if len(msg.tags) == 1:
        out = ValueColumns(list(keys), values, timestamps, prev_values)
    else:
        out = values_of(keys, values, timestamps, prev_values)
    return ValueBatch(out, timestamp_from_proto(msg.max_ts))


def _clear(column: list[bytes | None], rows: Sequence[int], name: str) -> None:
    if rows and max(rows) >= len(column):
        raise InvalidArgumentError(
            f"a rangefeed values run names row {max(rows)} in {name}, of {len(column)} rows"
        )
    for row in rows:
        column[row] = None
