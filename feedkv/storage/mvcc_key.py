"""Byte layouts of the MVCC sub-databases.

``versions``: committed versions only. Key = escaped user key, terminator ``00 01``,
then the *inverted* timestamp (12 bytes), so a key's versions sit together, newest
first. Escaping (``00`` -> ``00 ff``) keeps keys that are prefixes of other keys in
order: ``a`` and its versions sort before ``a\\x00``. Value = ``01`` + bytes, or empty
for a tombstone.

``intents``: one record per key with an intent, keyed by the raw user key (see
:mod:`feedkv.storage.intent`). Keeping intents out of version space means versions
never have to be told apart from provisional values, and finding a span's intents costs
O(intents), not O(data).

``changes``: the committed-change time index. Key = timestamp (12 bytes, not inverted)
+ raw user key; value = the version's value, duplicated so that an export reads the
index sequentially instead of seeking into ``versions`` at random for every change.
Written in the same transaction as the version, so an incremental export over
``(lo, hi]`` walks only the changes in that window.
"""

from __future__ import annotations

import struct
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from itertools import repeat
from operator import itemgetter

from feedkv.util.hlc import MAX_LOGICAL, Timestamp, decode_timestamps

__all__ = [
    "SUFFIX_LEN",
    "TOMBSTONE",
    "decode_change_key",
    "change_user_key",
    "decode_change_keys",
    "decode_change_timestamps",
    "decode_ts",
    "decode_version_key",
    "decode_version_keys",
    "decode_version_ts",
    "decode_version_value",
    "encode_change_key",
    "encode_ts",
    "encode_version_value",
    "escape_key",
    "escaped_keys",
    "key_versions_end",
    "key_versions_start",
    "unescape_key",
    "version_key",
    "version_suffix",
    "version_suffixes",
    "version_terminated_suffix",
]

_TS = struct.Struct(">QI")
_MAX_WALL = (1 << 64) - 1
_TERMINATOR = b"\x00\x01"
SUFFIX_LEN = 2 + _TS.size
TOMBSTONE = b""
_VALUE_TAG = b"\x01"


def encode_ts(ts: Timestamp) -> bytes:
    return _TS.pack(ts[0], ts[1])


def decode_ts(buf: bytes, offset: int = 0) -> Timestamp:
    wall, logical = _TS.unpack_from(buf, offset)
    return Timestamp(wall, logical)


_new_tuple = tuple.__new__


def escape_key(key: bytes) -> bytes:
    return key.replace(b"\x00", b"\x00\xff") if b"\x00" in key else key


def unescape_key(escaped: bytes) -> bytes:
    return escaped.replace(b"\x00\xff", b"\x00") if b"\x00" in escaped else escaped


def version_key(key: bytes, ts: Timestamp) -> bytes:
    """The ``versions`` key of ``key`` at ``ts``."""
    return escape_key(key) + _TERMINATOR + _TS.pack(_MAX_WALL - ts[0], MAX_LOGICAL - ts[1])


def version_suffix(ts: Timestamp) -> bytes:
    """The last bytes of a ``versions`` key at ``ts``: a key's versions at or below ``ts``
    are exactly those whose suffix is at least this."""
    return _TS.pack(_MAX_WALL - ts[0], MAX_LOGICAL - ts[1])


def version_terminated_suffix(ts: Timestamp) -> bytes:
    """What follows an escaped user key in its ``versions`` key at ``ts``: many keys'
    versions at one timestamp are each ``escape_key(key) + this`` (a bulk write)."""
    return _TERMINATOR + version_suffix(ts)


def decode_version_ts(raw: bytes) -> Timestamp:
    """The timestamp of a ``versions`` key."""
    inv_wall, inv_logical = _TS.unpack_from(raw, len(raw) - _TS.size)
    # NB: one per version scanned; tuple.__new__ skips the NamedTuple's Python __new__.
    return _new_tuple(Timestamp, (_MAX_WALL - inv_wall, MAX_LOGICAL - inv_logical))


def key_versions_start(key: bytes) -> bytes:
    """The smallest ``versions`` key of ``key`` (sorts at or before its newest version)."""
    return escape_key(key) + _TERMINATOR


def key_versions_end(key: bytes) -> bytes:
    """A ``versions`` key after every version of ``key`` and before the next user key."""
    return escape_key(key) + b"\x00\x02"


def decode_version_key(raw: bytes) -> tuple[bytes, Timestamp]:
    """Split a ``versions`` key into its user key and timestamp."""
    inv_wall, inv_logical = _TS.unpack_from(raw, len(raw) - _TS.size)
    return unescape_key(raw[:-SUFFIX_LEN]), Timestamp(
        _MAX_WALL - inv_wall, MAX_LOGICAL - inv_logical
    )


def escaped_keys(raws: list[bytes]) -> list[bytes]:
    """The escaped user keys of ``versions`` keys (equal for a key's versions)."""
    return list(map(_escaped_part, raws))


def version_suffixes(raws: list[bytes]) -> list[bytes]:
    """The timestamp suffixes of ``versions`` keys (see :func:`version_suffix`)."""
    return list(map(_suffix_part, raws))


def decode_version_keys(
    raws: list[bytes], suffixes: list[bytes]
) -> tuple[list[bytes], list[Timestamp]]:
    """:func:`decode_version_key` of many ``versions`` keys at once (``suffixes`` being
    their :func:`version_suffixes`), as a column of user keys and one of timestamps (see
    :func:`decode_timestamps`): Python code runs per key only for a column holding a key
    with a zero byte (escaped)."""
    keys = escaped_keys(raws)
    if b"\x00" in b"".join(keys):
        keys = list(map(unescape_key, keys))
    return keys, decode_timestamps(suffixes, _uninvert_all)


def _uninvert_all(encoded: Sequence[bytes]) -> Iterator[tuple[int, int]]:
    parts = list(map(_TS.unpack, encoded))
    walls = map(_MAX_WALL.__sub__, map(_wall_part, parts))
    return zip(walls, map(MAX_LOGICAL.__sub__, map(_logical_part, parts)), strict=True)


def encode_version_value(value: bytes | None) -> bytes:
    return TOMBSTONE if value is None else _VALUE_TAG + value


def decode_version_value(raw: bytes) -> bytes | None:
    return raw[1:] if raw else None


def encode_change_key(ts: Timestamp, key: bytes) -> bytes:
    return _TS.pack(ts[0], ts[1]) + key


def decode_change_key(raw: bytes) -> tuple[Timestamp, bytes]:
    wall, logical = _TS.unpack_from(raw)
    return Timestamp(wall, logical), raw[_TS.size :]


def decode_change_keys(raws: Sequence[bytes]) -> tuple[list[bytes], list[Timestamp]]:
    """:func:`decode_change_key` of many index keys at once, in the index's order, as a
    column of user keys and one of timestamps (see :func:`decode_change_timestamps`): an
    export decodes every change it reads, so no Python code runs per key."""
    return list(map(change_user_key, raws)), decode_change_timestamps(raws)


def decode_change_timestamps(
    raws: Sequence[bytes], before: Timestamp | None = None
) -> list[Timestamp]:
    """The timestamps of index keys in the index's order (see :func:`decode_timestamps`).
    Keys of one timestamp (a transaction's) share one Timestamp object, and with
    ``before``, the timestamp of the key just before ``raws`` (decoded apart), a run of
    it going on in ``raws`` shares that one."""
    head, tail = _ts_part(raws[0]), _ts_part(raws[-1])
    if head == tail:  # NB: in the index's order, so all one timestamp
        ts = decode_ts(head)
        return [before if before is not None and before == ts else ts] * len(raws)
    split = bisect_right(raws, head, key=_ts_part)
    if _ts_part(raws[split]) == tail:
        # NB: two timestamps, the common case of a chunk of the index where one
        # transaction's run ends and the next begins: found by bisection, not run by run
        first = decode_ts(head)
        if before is not None and before == first:
            first = before
        return [first] * split + [decode_ts(tail)] * (len(raws) - split)
    timestamps = decode_timestamps(raws, _unpack_all, _ts_part)
    if before is not None and timestamps[0] == before:
        run = bisect_right(timestamps, before)
        timestamps[:run] = repeat(before, run)
    return timestamps


def _unpack_all(encoded: Sequence[bytes]) -> Iterator[tuple[int, int]]:
    return map(_TS.unpack, encoded)


_ts_part = itemgetter(slice(0, _TS.size))
change_user_key = itemgetter(slice(_TS.size, None))  # an index key's user key, in C
_escaped_part = itemgetter(slice(0, -SUFFIX_LEN))
_suffix_part = itemgetter(slice(-_TS.size, None))
_wall_part = itemgetter(0)
_logical_part = itemgetter(1)
