"""Multi-version concurrency control over an engine.

Every key keeps its committed versions (newest first) and at most one intent: the
provisional write of a transaction. Readers at timestamp ``ts`` see the newest committed
version at or below ``ts``. Functions here are pure over a reader or read-writer:
mutations run inside ``engine.write(fn)`` and return their logical operations.

Conflict rules (what the KV layer builds transactions on):

- A read at ``ts`` meeting another transaction's intent at or below ``ts`` raises
  :class:`WriteIntentError` (a scan collects every such intent first). Intents above
  ``ts`` are invisible. A transaction reads its own intent (the value written by its
  current sequence, in its current epoch).
- A write meeting another transaction's intent raises :class:`WriteIntentError`.
- A write at ``ts`` meeting a committed version at or above ``ts`` raises
  :class:`WriteTooOldError` carrying the timestamp to retry at.
- Reads below the garbage-collection threshold raise
  :class:`BatchTimestampBeforeGCError`; they never return partial history.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import NamedTuple

from feedkv.errors import (
    ConditionFailedError,
    InvalidArgumentError,
    InvariantViolation,
    ValueTooLargeError,
    WriteIntentError,
    WriteTooOldError,
)
from feedkv.storage.engine import Reader, ReadWriter
from feedkv.storage.gc import check_gc_threshold
from feedkv.storage.intent import (
    Intent,
    IntentRecord,
    TxnMeta,
    TxnStatus,
    encode_intents,
    uniform_intents,
)
from feedkv.storage.logical_ops import (
    AbortIntent,
    AbortIntents,
    CommitIntent,
    CommitIntents,
    DeleteRange,
    IngestValues,
    LogicalOp,
    UpdateIntent,
    WriteIntent,
    WriteIntents,
    WriteValue,
)
from feedkv.storage.mvcc_key import (
    SUFFIX_LEN,
    decode_version_key,
    decode_version_ts,
    encode_change_key,
    encode_ts,
    encode_version_value,
    key_versions_start,
    unescape_key,
    version_key,
    version_suffix,
    version_terminated_suffix,
)
from feedkv.storage.schema import CHANGES, INTENTS, VERSIONS
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span, check_key, key_next

_new_tuple = tuple.__new__

__all__ = [
    "MAX_VALUE_BYTES",
    "KeyValue",
    "ScanResult",
    "conditional_put",
    "delete",
    "check_value",
    "delete_range",
    "first_change",
    "newest_version_ts",
    "get",
    "ingest",
    "ingest_intents",
    "put",
    "resolve_intent",
    "resolve_intents",
    "scan",
    "scan_intents",
    "version_at",
]

MAX_VALUE_BYTES = 16 << 20
BULK_RESOLVE = 16  # intents of a transaction in a span from which a resolution tries a batch
_VALUE_TAG = b"\x01"  # a version's value is this tag and its bytes (mvcc_key)
_ESCAPED_NEXT = b"\x00\x02"


class KeyValue(NamedTuple):
    """A visible value and the timestamp of the version (or intent) it came from."""

    key: bytes
    value: bytes
    ts: Timestamp


@dataclass(frozen=True, slots=True)
class ScanResult:
    """Rows of a scan. ``resume_key`` is the next key to read when ``limit`` cut it short:
    forward scans continue at ``Span(resume_key, end)``, reverse scans at
    ``Span(start, key_next(resume_key))``."""

    rows: list[KeyValue]
    resume_key: bytes | None = None


# Reads.


def get(
    reader: Reader, key: bytes, ts: Timestamp, *, txn: TxnMeta | None = None
) -> KeyValue | None:
    """The value of ``key`` visible at ``ts`` (to ``txn``, if given), or ``None``."""
    check_key(key)
    check_gc_threshold(reader, Span.for_key(key), ts)
    raw_intent = reader.get(INTENTS, key)
    if raw_intent is not None:
        found, kv = _read_intent(key, raw_intent, ts, txn)
        if found:
            return kv
    return _visible_version(reader, key, ts, None)


def scan(
    reader: Reader,
    span: Span,
    ts: Timestamp,
    *,
    txn: TxnMeta | None = None,
    limit: int | None = None,
    reverse: bool = False,
) -> ScanResult:
    """The live values in ``span`` at ``ts``, in key order (descending if ``reverse``).

    Raises :class:`WriteIntentError` listing every conflicting intent it met.
    """
    if limit is not None and limit < 0:
        raise InvalidArgumentError(f"scan limit must be >= 0, got {limit}")
    check_gc_threshold(reader, span, ts)
    if not reverse:
        first_intent = reader.seek(INTENTS, span.start)
        if first_intent is None or first_intent[0] >= span.end:
            return _scan_committed(reader, span, ts, limit)
    rows: list[KeyValue] = []
    conflicts: list[Intent] = []
    for key, escaped, newest, raw_intent in _keys_in_span(reader, span, reverse):
        if limit is not None and len(rows) >= limit:
            if conflicts:
                break
            return ScanResult(rows, key)
        if raw_intent is not None:
            try:
                found, kv = _read_intent(key, raw_intent, ts, txn)
            except WriteIntentError as exc:
                conflicts.extend(exc.intents)
                continue
            if found:
                if kv is not None:
                    rows.append(kv)
                continue
        if escaped is None:
            continue
        kv = _visible_version(reader, key, ts, newest)
        if kv is not None:
            rows.append(kv)
    if conflicts:
        raise WriteIntentError(conflicts)
    return ScanResult(rows)


_SKIPS_BEFORE_SEEK = 16  # a key's newer versions stepped over before seeking past them


def _scan_committed(reader: Reader, span: Span, ts: Timestamp, limit: int | None) -> ScanResult:
    """:func:`scan` forward over a span without intents, in one pass over the versions
    (newest first per key): the first version of a key at or below ``ts`` is the visible
    one, and the key's older versions are stepped over, or sought past when many."""
    rows: list[KeyValue] = []
    floor = version_suffix(ts)
    high = key_versions_start(span.end)
    start = key_versions_start(span.start)
    current = b""  # the escaped key of the versions being read
    decided = False  # its visible version (or its absence at ts) is known
    # NB: the last version's timestamp, decoded once for the run of versions that share
    # it (a bulk write's: IMPORT, COPY, a large INSERT)
    last_suffix, last_ts = b"", Timestamp(0, 0)
    while True:
        skipped = 0
        for raw, value in reader.scan(VERSIONS, start, high):
            escaped = raw[:-SUFFIX_LEN]
            if escaped != current:
                if limit is not None and len(rows) >= limit:
                    return ScanResult(rows, unescape_key(escaped))
                current, decided, skipped = escaped, False, 0
            elif decided:
                skipped += 1
                if skipped > _SKIPS_BEFORE_SEEK:
                    start = escaped + _ESCAPED_NEXT  # after every version of the key
                    break
                continue
            if raw[-len(floor) :] < floor:  # newer than ts
                skipped += 1
                if skipped > _SKIPS_BEFORE_SEEK:
                    start = escaped + raw[-SUFFIX_LEN : -len(floor)] + floor
                    break
                continue
            decided = True
            if value:
                suffix = raw[-SUFFIX_LEN:]
                if suffix != last_suffix:
                    last_suffix, last_ts = suffix, decode_version_ts(raw)
                # NB: tuple.__new__ skips the NamedTuple's Python __new__: once a version
                rows.append(_new_tuple(KeyValue, (unescape_key(escaped), value[1:], last_ts)))
        else:
            return ScanResult(rows)


def first_change(
    reader: Reader, span: Span, lo: Timestamp, hi: Timestamp, *, txn_id: bytes | None = None
) -> bytes | None:
    """The first key in ``span`` with a committed version in ``(lo, hi]`` or another
    transaction's intent at or below ``hi``; ``None`` if nothing changed.

    This is what a transaction refreshing its reads from ``lo`` to ``hi`` must not find.
    """
    for key, escaped, _newest, raw_intent in _keys_in_span(reader, span, reverse=False):
        if raw_intent is not None:
            meta = IntentRecord.decode(raw_intent).txn
            if meta.id != txn_id and meta.write_ts <= hi:
                return key
        if escaped is not None:
            found = version_at(reader, key, hi)
            if found is not None and found[0] > lo:
                return key
    return None


def newest_version_ts(reader: Reader, span: Span) -> Timestamp | None:
    """The timestamp of the newest committed version of any key in ``span`` (a tombstone
    counts); ``None`` if no key there has one. A locking read above it read the latest."""
    newest: Timestamp | None = None
    for _key, _escaped, item in _version_keys(reader, span, reverse=False):
        if item is None:
            continue
        ts = decode_version_key(item[0])[1]
        if newest is None or ts > newest:
            newest = ts
    return newest


def scan_intents(reader: Reader, span: Span, max_ts: Timestamp | None = None) -> list[Intent]:
    """Every intent in ``span`` (with a write timestamp ``<= max_ts`` if given), by key."""
    intents = []
    for key, raw in reader.scan(INTENTS, span.start, span.end):
        meta = IntentRecord.decode(raw).txn
        if max_ts is None or meta.write_ts <= max_ts:
            intents.append(Intent(key, meta))
    return intents


def _read_intent(
    key: bytes, raw: bytes, ts: Timestamp, txn: TxnMeta | None
) -> tuple[bool, KeyValue | None]:
    """Resolve what an intent means for a read: ``(decided, value)``.

    ``decided=False`` means the intent is invisible and committed versions decide.
    """
    record = IntentRecord.decode(raw)
    meta = record.txn
    if txn is not None and meta.id == txn.id:
        if meta.epoch == txn.epoch:
            found, value = record.value_at_seq(txn.seq)
            if found:
                return True, None if value is None else KeyValue(key, value, meta.write_ts)
        return False, None
    if meta.write_ts <= ts:
        raise WriteIntentError([Intent(key, meta)])
    return False, None


def _visible_version(
    reader: Reader,
    key: bytes,
    ts: Timestamp,
    newest: tuple[bytes, bytes] | None,
) -> KeyValue | None:
    """The newest committed version of ``key`` at or below ``ts``, if live.

    ``newest`` is the key's newest version entry when the caller already holds it (a
    forward scan lands on it), which saves a seek when it is visible at ``ts``.
    """
    if newest is not None:
        version_ts = decode_version_key(newest[0])[1]
        if version_ts <= ts:
            raw_value = newest[1]
            return KeyValue(key, raw_value[1:], version_ts) if raw_value else None
    found = version_at(reader, key, ts)
    if found is None or found[1] is None:
        return None
    return KeyValue(key, found[1], found[0])


def version_at(reader: Reader, key: bytes, ts: Timestamp) -> tuple[Timestamp, bytes | None] | None:
    """The newest committed version of ``key`` at or below ``ts``: ``(version ts, value)``,
    value ``None`` for a tombstone; ``None`` if the key has no such version."""
    start = key_versions_start(key)
    return _version_of(start, reader.seek(VERSIONS, start + version_suffix(ts)))


def _newest_version(reader: Reader, key: bytes) -> tuple[Timestamp, bytes | None] | None:
    """The newest committed version of ``key`` (value ``None`` for a tombstone)."""
    start = key_versions_start(key)
    return _version_of(start, reader.seek(VERSIONS, start))


def _version_of(
    start: bytes, item: tuple[bytes, bytes] | None
) -> tuple[Timestamp, bytes | None] | None:
    """Decode a ``versions`` entry a seek landed on, if it is a version of the key whose
    :func:`key_versions_start` is ``start``.

    NB: compared escaped, not decoded: an escaped key neither holds the terminator nor
    ends in a zero byte (each is escaped), so a ``versions`` key that starts with
    ``start`` is one of that very key's (every write reads the key's newest version
    this way, and decoding the key cost two calls more)."""
    if item is None:
        return None
    raw = item[0]
    if not raw.startswith(start):
        return None
    return decode_version_ts(raw), item[1][1:] if item[1] else None


def _version_keys(
    reader: Reader, span: Span, reverse: bool
) -> Iterator[tuple[bytes, bytes, tuple[bytes, bytes] | None]]:
    """Distinct user keys with versions in ``span``: ``(key, escaped key, newest entry)``.

    Forward iteration lands on each key's newest version and passes it along; reverse
    iteration lands on the oldest, so it passes ``None``.
    """
    low = key_versions_start(span.start)
    high = key_versions_start(span.end)
    if not reverse:
        target = low
        while True:
            item = reader.seek(VERSIONS, target)
            if item is None or item[0] >= high:
                return
            escaped = item[0][:-SUFFIX_LEN]
            yield unescape_key(escaped), escaped, item
            target = escaped + _ESCAPED_NEXT
    else:
        target = high
        while True:
            item = reader.seek_before(VERSIONS, target)
            if item is None or item[0] < low:
                return
            escaped = item[0][:-SUFFIX_LEN]
            yield unescape_key(escaped), escaped, None
            target = escaped + b"\x00\x01"


def _keys_in_span(
    reader: Reader, span: Span, reverse: bool
) -> Iterator[tuple[bytes, bytes | None, tuple[bytes, bytes] | None, bytes | None]]:
    """Keys with versions or intents in ``span``, merged in order:
    ``(key, escaped key or None if no versions, newest version entry, raw intent)``."""
    versions = _version_keys(reader, span, reverse)
    intents = reader.scan(INTENTS, span.start, span.end, reverse=reverse)
    version = next(versions, None)
    intent = next(intents, None)
    while version is not None:
        if intent is None:
            yield version[0], version[1], version[2], None
            yield from ((k, e, n, None) for k, e, n in versions)
            return
        if version[0] == intent[0]:
            yield version[0], version[1], version[2], intent[1]
            version = next(versions, None)
            intent = next(intents, None)
        elif (version[0] > intent[0]) if reverse else (version[0] < intent[0]):
            yield version[0], version[1], version[2], None
            version = next(versions, None)
        else:
            yield intent[0], None, None, intent[1]
            intent = next(intents, None)
    if intent is not None:
        yield intent[0], None, None, intent[1]
        yield from ((k, None, None, raw) for k, raw in intents)


# Writes.


def put(
    rw: ReadWriter,
    key: bytes,
    ts: Timestamp,
    value: bytes | None,
    *,
    txn: TxnMeta | None = None,
) -> list[LogicalOp]:
    """Write ``value`` (``None`` deletes) at ``ts``; with ``txn``, as that txn's intent."""
    check_key(key)
    check_value(value)
    record, newest = _prepare_write(rw, key, ts, txn)
    return _write(rw, key, ts, value, txn, record, newest)


def delete(
    rw: ReadWriter, key: bytes, ts: Timestamp, *, txn: TxnMeta | None = None
) -> list[LogicalOp]:
    """Write a tombstone for ``key`` at ``ts``."""
    return put(rw, key, ts, None, txn=txn)


def conditional_put(
    rw: ReadWriter,
    key: bytes,
    ts: Timestamp,
    value: bytes | None,
    expected: bytes | None,
    *,
    txn: TxnMeta | None = None,
    exists: bool = False,
) -> list[LogicalOp]:
    """Write ``value`` only if the current value is ``expected`` (``None``: absent), or
    with ``exists`` only if there is a current value, whatever it is.

    Raises :class:`ConditionFailedError` carrying the actual value otherwise.
    """
    check_key(key)
    check_value(value)
    record, newest = _prepare_write(rw, key, ts, txn)
    if record is not None and txn is not None and record.txn.epoch == txn.epoch:
        found, current = record.value_at_seq(txn.seq)
        if not found:
            current = newest[1] if newest else None
    else:
        current = newest[1] if newest else None
    failed = current is None if exists else current != expected
    if failed:
        raise ConditionFailedError(key, expected, current, exists=exists)
    return _write(rw, key, ts, value, txn, record, newest)


def ingest(
    rw: ReadWriter, span: Span, keys: Sequence[bytes], values: Sequence[bytes], ts: Timestamp
) -> list[LogicalOp]:
    """Write ``values[i]`` at ``keys[i]`` as committed versions at ``ts``: a bulk load's
    batch, as CockroachDB's AddSSTable, costing per key list operations and two bulk
    engine writes instead of a conditional put's evaluation.

    ``keys`` ascend strictly and lie in ``span``; every key must be new (no live value;
    a tombstone is fine): one that holds a value raises :class:`ConditionFailedError`
    naming it, an intent on a key :class:`WriteIntentError` (every such intent), a
    version at or above ``ts`` :class:`WriteTooOldError`; nothing is written then.
    The versions and their time-index entries are written as any other write's
    are, and one :class:`IngestValues` op holds the batch (what a ``WriteValue`` per key,
    with no previous value, would say). The check costs as :func:`_check_new_keys`."""
    _check_ingest(span, keys, values)
    _check_new_keys(rw, span, keys, ts, None)
    if not keys:
        return []
    _put_versions(rw, keys, values, ts)
    return [IngestValues(Span(keys[0], key_next(keys[-1])), ts, keys, values)]


def ingest_intents(
    rw: ReadWriter,
    span: Span,
    keys: Sequence[bytes],
    values: Sequence[bytes],
    ts: Timestamp,
    txn: TxnMeta,
) -> list[LogicalOp]:
    """:func:`ingest` as ``txn``'s intents at ``ts``: the part of a bulk load a
    transaction writes in one range when its rows span several (a COPY after splits).
    The checks are :func:`ingest`'s (a key the transaction wrote already is refused:
    the batch is its only write there); each key gets an ordinary intent record, so
    readers, writers, pushes and the intent scan of a rangefeed see ordinary intents,
    and one :class:`WriteIntents` op counts them. :func:`resolve_intents` resolves them
    in bulk too."""
    _check_ingest(span, keys, values)
    _check_new_keys(rw, span, keys, ts, txn.id)
    if not keys:
        return []
    meta = txn.with_ts(ts)
    rw.put_many(INTENTS, zip(keys, encode_intents(meta, values), strict=True))
    batch = Span(keys[0], key_next(keys[-1]))
    return [WriteIntents(txn.id, txn.key, batch, ts, len(keys))]


def _check_new_keys(
    rw: ReadWriter, span: Span, keys: Sequence[bytes], ts: Timestamp, txn_id: bytes | None
) -> None:
    """Raise unless every key of ``keys`` (in ``span``) is new: no intent on it, no live
    value, no version at or above ``ts``.

    Cost: when ``span`` holds no version yet (a load into new keys) the check is one
    seek; otherwise one seek per key."""
    intents = scan_intents(rw, span)
    if intents:
        wanted = set(keys)
        conflicts = [intent for intent in intents if intent.key in wanted]
        if any(intent.txn.id == txn_id for intent in conflicts):
            raise InvalidArgumentError(
                "a bulk write in a transaction must be its only write of its keys"
            )
        if conflicts:
            raise WriteIntentError(conflicts)
    first = rw.seek(VERSIONS, key_versions_start(span.start))
    if first is not None and first[0] < key_versions_start(span.end):
        for key in keys:
            newest = _newest_version(rw, key)
            if newest is None:
                continue
            if newest[1] is not None:
                raise ConditionFailedError(key, None, newest[1])
            if newest[0] >= ts:
                raise WriteTooOldError(key, ts, newest[0])


def _put_versions(
    rw: ReadWriter, keys: Sequence[bytes], values: Sequence[bytes], ts: Timestamp
) -> None:
    """The committed versions of new ``keys`` (ascending) at ``ts`` and their time-index
    entries, in two bulk engine writes."""
    raws = list(map(_VALUE_TAG.__add__, values))
    escaped = (
        keys
        if b"\x00" not in b"".join(keys)
        else map(bytes.replace, keys, repeat(b"\x00"), repeat(b"\x00\xff"))  # escape_key's
    )
    # NB: zips, not lists of pairs: the engine takes each pair and drops it, so zip
    # reuses one tuple, where a list would hold a tracked tuple per key (each 700 of
    # them a garbage collection, and the old generation walked again and again)
    suffix = version_terminated_suffix(ts)
    first = (keys[0].replace(b"\x00", b"\x00\xff")) + suffix
    # NB: a load into the newest table, at the newest timestamp, lies past every key
    # of both: the engine may append (one seek each to know)
    rw.put_many(
        VERSIONS,
        zip(map(bytes.__add__, escaped, repeat(suffix)), raws, strict=True),
        append=rw.seek(VERSIONS, first) is None,
    )
    change = encode_ts(ts)
    rw.put_many(
        CHANGES,
        zip(map(change.__add__, keys), raws, strict=True),
        append=rw.seek(CHANGES, change + keys[0]) is None,
    )


def _check_ingest(span: Span, keys: Sequence[bytes], values: Sequence[bytes]) -> None:
    if len(keys) != len(values):
        raise InvalidArgumentError(
            f"an ingest needs one value per key: got {len(keys)} keys and {len(values)} values"
        )
    if not keys:
        return
    if not span.start <= keys[0] or not keys[-1] < span.end:
        raise InvalidArgumentError(f"the ingested keys {keys[0]!r}..{keys[-1]!r} leave {span}")
    if not all(map(operator.lt, keys, itertools.islice(keys, 1, None))):
        bad = next(i for i in range(1, len(keys)) if not keys[i - 1] < keys[i])
        raise InvalidArgumentError(
            f"ingested keys must ascend, each once: {keys[bad - 1]!r} comes before {keys[bad]!r}"
        )
    if set(map(type, values)) != {bytes}:
        raise InvalidArgumentError("ingested values are bytes")
    longest = max(map(len, values))
    if longest > MAX_VALUE_BYTES:
        raise ValueTooLargeError(
            f"an ingested value of {longest} bytes exceeds the limit of {MAX_VALUE_BYTES} bytes"
        )


def delete_range(
    rw: ReadWriter, span: Span, ts: Timestamp, *, txn: TxnMeta | None = None
) -> tuple[list[bytes], list[LogicalOp]]:
    """Delete every live key in ``span`` at ``ts`` with point tombstones (intents with
    ``txn``). Returns the deleted keys and the logical ops.

    All or nothing: every conflict is found before anything is written, so a
    :class:`WriteIntentError` lists every conflicting intent and a
    :class:`WriteTooOldError` names the newest version in the span.
    """
    planned: list[tuple[bytes, IntentRecord | None, tuple[Timestamp, bytes | None] | None]] = []
    conflicts: list[Intent] = []
    too_old: WriteTooOldError[Timestamp] | None = None
    for key, _escaped, _newest, _raw in list(_keys_in_span(rw, span, reverse=False)):
        try:
            record, newest = _prepare_write(rw, key, ts, txn)
        except WriteIntentError as exc:
            conflicts.extend(exc.intents)
            continue
        except WriteTooOldError as exc:
            if too_old is None or exc.existing_ts > too_old.existing_ts:
                too_old = exc
            continue
        if record is not None and txn is not None and record.txn.epoch == txn.epoch:
            found, current = record.value_at_seq(txn.seq)
            live = current is not None if found else bool(newest and newest[1] is not None)
        else:
            live = bool(newest and newest[1] is not None)
        if live:
            planned.append((key, record, newest))
    if conflicts:
        raise WriteIntentError(conflicts)
    if too_old is not None:
        raise too_old
    ops: list[LogicalOp] = []
    for key, record, newest in planned:
        ops.extend(_write(rw, key, ts, None, txn, record, newest))
    deleted = [key for key, _record, _newest in planned]
    if deleted and txn is None:
        ops.append(DeleteRange(span, ts))
    return deleted, ops


def resolve_intent(rw: ReadWriter, key: bytes, txn: TxnMeta, status: TxnStatus) -> list[LogicalOp]:
    """Resolve ``txn``'s intent on ``key``; a no-op if there is none (idempotent).

    - ``COMMITTED``: the value becomes a committed version at ``txn.write_ts`` (which must
      be at or above the intent's timestamp). An intent from an older epoch is aborted.
    - ``ABORTED``: the intent is removed, whatever its epoch.
    - ``PENDING``: a push; the intent moves up to ``txn.write_ts`` if that is higher.
    """
    raw = rw.get(INTENTS, key)
    if raw is None:
        return []
    record = IntentRecord.decode(raw)
    meta = record.txn
    if meta.id != txn.id:
        return []
    if status is TxnStatus.PENDING:
        if txn.write_ts <= meta.write_ts:
            return []
        moved = IntentRecord(meta.with_ts(txn.write_ts), record.value, record.history)
        rw.put(INTENTS, key, moved.encode())
        return [UpdateIntent(txn.id, key, txn.write_ts)]
    if status is TxnStatus.ABORTED:
        rw.delete(INTENTS, key)
        return [AbortIntent(txn.id, key)]
    if meta.epoch > txn.epoch:
        raise InvariantViolation(
            f"committing {key!r} for epoch {txn.epoch} but the intent is from epoch {meta.epoch}"
        )
    if meta.epoch < txn.epoch:
        rw.delete(INTENTS, key)
        return [AbortIntent(txn.id, key)]
    commit_ts = txn.write_ts
    if commit_ts < meta.write_ts:
        raise InvariantViolation(
            f"cannot commit the intent on {key!r} at {commit_ts}, below its timestamp "
            f"{meta.write_ts}"
        )
    newest = _newest_version(rw, key)
    if newest is not None and newest[0] >= commit_ts:
        raise InvariantViolation(
            f"committing {key!r} at {commit_ts} but a committed version exists at {newest[0]}"
        )
    _write_version(rw, key, commit_ts, record.value)
    rw.delete(INTENTS, key)
    prev = newest[1] if newest is not None else None
    return [CommitIntent(txn.id, key, commit_ts, record.value, prev)]


def resolve_intents(rw: ReadWriter, span: Span, txn: TxnMeta, status: TxnStatus) -> list[LogicalOp]:
    """Resolve every intent of ``txn`` in ``span`` (see :func:`resolve_intent`).

    A bulk write's intents (:func:`ingest_intents`) are resolved as a batch, with one
    op: see :func:`_resolve_batch`."""
    items = list(rw.scan(INTENTS, span.start, span.end))
    if len(items) >= BULK_RESOLVE:
        resolved = _resolve_batch(rw, items, txn, status)
        if resolved is not None:
            return resolved
    keys = [key for key, raw in items if IntentRecord.decode(raw).txn.id == txn.id]
    ops: list[LogicalOp] = []
    for key in keys:
        ops.extend(resolve_intent(rw, key, txn, status))
    return ops


def _resolve_batch(
    rw: ReadWriter, items: list[tuple[bytes, bytes]], txn: TxnMeta, status: TxnStatus
) -> list[LogicalOp] | None:
    """Resolve ``txn``'s intents among ``items`` (a span's intent records) as one batch,
    when they are one bulk write's (:func:`~feedkv.storage.intent.uniform_intents`):
    what :func:`resolve_intent` does to each, with no Python code run per key and one
    op, :class:`CommitIntents` (every key new: none has a previous value),
    :class:`AbortIntents` or an :class:`UpdateIntent` of the first key (a push moves
    the transaction, whichever key it names). ``None``, with nothing written, when they
    are not such a batch, or a key has a previous value: resolve them one by one."""
    keys = list(map(operator.itemgetter(0), items))
    raws = list(map(operator.itemgetter(1), items))
    mine = list(map(bytes.startswith, raws, repeat(txn.id)))
    if not all(mine):
        keys, raws = list(itertools.compress(keys, mine)), list(itertools.compress(raws, mine))
        if len(keys) < BULK_RESOLVE:
            return None
    uniform = uniform_intents(raws)
    if uniform is None:
        return None
    meta, values = uniform
    span = Span(keys[0], key_next(keys[-1]))
    if status is TxnStatus.PENDING:
        if txn.write_ts <= meta.write_ts:
            return []
        moved = meta.with_ts(txn.write_ts)
        rw.put_many(INTENTS, zip(keys, encode_intents(moved, values), strict=True))
        return [UpdateIntent(txn.id, keys[0], txn.write_ts)]
    if status is TxnStatus.ABORTED or meta.epoch < txn.epoch:
        rw.delete_many(INTENTS, keys)
        return [AbortIntents(txn.id, span, len(keys))]
    if meta.epoch > txn.epoch:
        raise InvariantViolation(
            f"committing {span} for epoch {txn.epoch} but its intents are from epoch {meta.epoch}"
        )
    commit_ts = txn.write_ts
    if commit_ts < meta.write_ts:
        raise InvariantViolation(
            f"cannot commit the intents in {span} at {commit_ts}, below their timestamp "
            f"{meta.write_ts}"
        )
    first = rw.seek(VERSIONS, key_versions_start(span.start))
    if first is not None and first[0] < key_versions_start(span.end):
        for key in keys:
            newest = _newest_version(rw, key)
            if newest is None:
                continue
            if newest[0] >= commit_ts:
                raise InvariantViolation(
                    f"committing {key!r} at {commit_ts} but a committed version exists at "
                    f"{newest[0]}"
                )
            if newest[1] is not None:
                return None
    _put_versions(rw, keys, values, commit_ts)
    rw.delete_many(INTENTS, keys)
    return [CommitIntents(txn.id, span, commit_ts, keys, values)]


def check_value(value: bytes | None) -> None:
    """Raise :class:`InvalidArgumentError` unless ``value`` is bytes within the size limit
    (or ``None``, a deletion)."""
    if value is None:
        return
    if type(value) is not bytes:
        raise InvalidArgumentError(f"values are bytes, not {type(value).__name__}")
    if len(value) > MAX_VALUE_BYTES:
        raise ValueTooLargeError(
            f"value of {len(value)} bytes exceeds the limit of {MAX_VALUE_BYTES} bytes"
        )


def _prepare_write(
    rw: ReadWriter, key: bytes, ts: Timestamp, txn: TxnMeta | None
) -> tuple[IntentRecord | None, tuple[Timestamp, bytes | None] | None]:
    """Check a write of ``key`` at ``ts`` can proceed; return the txn's own intent record
    (if any) and the newest committed version."""
    raw_intent = rw.get(INTENTS, key)
    record = None
    if raw_intent is not None:
        record = IntentRecord.decode(raw_intent)
        if txn is None or record.txn.id != txn.id:
            raise WriteIntentError([Intent(key, record.txn)])
        if record.txn.epoch > txn.epoch:
            raise InvalidArgumentError(
                f"write to {key!r} from epoch {txn.epoch} of txn {txn.id.hex()[:8]} arrived "
                f"after epoch {record.txn.epoch} wrote it"
            )
    newest = _newest_version(rw, key)
    if newest is not None and newest[0] >= ts:
        raise WriteTooOldError(key, ts, newest[0])
    return record, newest


def _write_version(rw: ReadWriter, key: bytes, ts: Timestamp, value: bytes | None) -> None:
    """A committed version and its time-index entry, in the same transaction."""
    raw = encode_version_value(value)
    rw.put(VERSIONS, version_key(key, ts), raw)
    rw.put(CHANGES, encode_change_key(ts, key), raw)


def _write(
    rw: ReadWriter,
    key: bytes,
    ts: Timestamp,
    value: bytes | None,
    txn: TxnMeta | None,
    record: IntentRecord | None,
    newest: tuple[Timestamp, bytes | None] | None,
) -> list[LogicalOp]:
    if txn is None:
        _write_version(rw, key, ts, value)
        return [WriteValue(key, ts, value, newest[1] if newest is not None else None)]
    if record is None:
        rw.put(INTENTS, key, IntentRecord(txn.with_ts(ts), value).encode())
        return [WriteIntent(txn.id, txn.key, key, ts)]
    history = record.history
    write_ts = ts
    if record.txn.epoch == txn.epoch:
        if txn.seq <= record.txn.seq:
            found, earlier = record.value_at_seq(txn.seq)
            if found and earlier == value:
                return []  # a replay of a write this txn already made
            raise InvalidArgumentError(
                f"txn {txn.id.hex()[:8]} rewrote {key!r} at sequence {txn.seq}, not after "
                f"its latest sequence {record.txn.seq}"
            )
        history = (*history, (record.txn.seq, record.value))
        write_ts = max(ts, record.txn.write_ts)
    else:
        history = ()
    rw.put(INTENTS, key, IntentRecord(txn.with_ts(write_ts), value, history).encode())
    if write_ts != record.txn.write_ts:
        return [UpdateIntent(txn.id, key, write_ts)]
    return []
