"""Order-preserving encoding of SQL values for table keys.

The encoding turns a value into bytes whose byte-wise (memcmp) order is the value's
order, so a store that only compares raw bytes keeps table rows sorted by their key
columns. Each column sorts ascending or descending (:class:`Direction`).

Contract:

* **Order.** For two values of the same type, ``a < b`` if and only if
  ``encode_value(a) < encode_value(b)``; descending encodings sort the other way round.
  NULL sorts before every value ascending and after every value descending. Floats sort
  numerically with NaN before every other float (as in CockroachDB) and ``-0.0`` equal to
  ``0.0``; strings sort by code point (which is UTF-8 byte order).
* **Prefix-free.** No encoding is a prefix of another, so the concatenation of several
  encodings (a composite key) sorts like the tuple of its values, column by column.
* **Canonical.** Every value has exactly one encoding (``-0.0`` encodes as ``0.0``) and
  the decoder rejects any other byte string, so equal keys are equal bytes.

Ascending layout; the first byte is a type marker, and values of different types sort
by their marker (NULL < bytes < str < float < bool < int)::

    NULL    00
    bytes   12 <payload, 00 escaped as 00 FF> 00 01
    str     13 <UTF-8, 00 escaped as 00 FF> 00 01
    NaN     20
    float   21 <IEEE-754 bits, big-endian: all bits inverted if negative, else sign flipped>
    bool    30 (False) or 31 (True)
    int     77..88: v >= 0 is 80+n then v in n big-endian bytes (n = 0 for 0, at most 8);
            v < 0 is 7F-m then v mod 256**m in m bytes, m being the length of ~v

The int marker carries the length, so short ints are short and longer (larger
magnitude) ints sort after shorter positive ones and before shorter negative ones. The
string terminator ``00 01`` sorts before an escaped ``00 FF`` and before any other
payload byte, so a string sorts before every string it is a proper prefix of.

A descending encoding is the ascending one with every byte inverted. That reverses the
order only because ascending encodings are prefix-free: inverting ``ab`` and ``abc``
would otherwise leave the shorter one first.
"""

from __future__ import annotations

import bisect
import enum
import itertools
import operator
import struct
from collections.abc import Sequence
from typing import Literal, TypeAlias

from feedkv.errors import InvalidArgumentError

__all__ = [
    "Direction",
    "KeyValue",
    "decode_int_keys",
    "decode_value",
    "decode_values",
    "encode_int",
    "encode_int_keys",
    "encode_value",
    "encode_values",
    "key_between",
]

KeyValue: TypeAlias = bool | int | float | str | bytes | None
"""A value that can be a key column."""


class Direction(enum.Enum):
    """The order a key column sorts in."""

    ASC = "asc"
    DESC = "desc"


_ASC = Direction.ASC
_DESC = Direction.DESC

_NULL = 0x00
_BYTES = 0x12
_STR = 0x13
_NAN = 0x20
_FLOAT = 0x21
_FALSE = 0x30
_TRUE = 0x31
_INT_ZERO = 0x80  # a non-negative int of n bytes has marker _INT_ZERO + n
_INT_MINUS_ONE = 0x7F  # a negative int v has marker _INT_MINUS_ONE - (bytes of ~v)
_INT_LOWEST = _INT_MINUS_ONE - 8
_INT_HIGHEST = _INT_ZERO + 8

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_U64_MASK = (1 << 64) - 1
_SIGN_BIT = 1 << 63
_LOW_MASKS = tuple((1 << (8 * n)) - 1 for n in range(9))  # _LOW_MASKS[n]: n bytes of 1s

_F64 = struct.Struct(">d")
_U64 = struct.Struct(">Q")
_FLOAT_KEY = struct.Struct(">BQ")

_INVERT = bytes(range(255, -1, -1))  # bytes.translate table that inverts every bit
_NULL_KEY = bytes((_NULL,))
_NAN_KEY = bytes((_NAN,))
_FALSE_KEY = bytes((_FALSE,))
_TRUE_KEY = bytes((_TRUE,))
_BYTES_PREFIX = bytes((_BYTES,))
_STR_PREFIX = bytes((_STR,))
_TERMINATOR = b"\x00\x01"
_DESC_TERMINATOR = b"\xff\xfe"


def encode_value(value: KeyValue, direction: Direction = Direction.ASC) -> bytes:
    """Encode one key column so that memcmp order is the value order in ``direction``.

    Raises :class:`InvalidArgumentError` for a value of an unsupported type, an int
    outside the signed 64-bit range, or a str that cannot be encoded as UTF-8 (lone
    surrogates).
    """
    key = _encode_asc(value)
    if direction is _ASC:
        return key
    if direction is _DESC:
        return key.translate(_INVERT)
    raise InvalidArgumentError(f"direction must be a Direction, not {direction!r}")


def encode_values(
    values: Sequence[KeyValue], directions: Sequence[Direction] | None = None
) -> bytes:
    """Encode a composite key: the concatenation of each column's encoding.

    ``directions`` gives one direction per value; ``None`` means all ascending. Composite
    keys sort like the tuples of their values, column by column. Raises
    :class:`InvalidArgumentError` as :func:`encode_value` does, or if the lengths differ.
    """
    if directions is None:
        return b"".join([_encode_asc(value) for value in values])
    if len(directions) != len(values):
        raise InvalidArgumentError(
            f"got {len(values)} key values but {len(directions)} directions; "
            "pass one direction per value"
        )
    return b"".join(
        [
            encode_value(value, direction)
            for value, direction in zip(values, directions, strict=True)
        ]
    )


def decode_value(
    buf: bytes, pos: int = 0, direction: Direction = Direction.ASC
) -> tuple[KeyValue, int]:
    """Decode the key column that starts at ``buf[pos]``, encoded in ``direction``.

    Returns the value and the position just after its encoding. Only the bytes of that
    one column are read, so decoding the columns of a composite key one after another is
    linear in its length. Raises :class:`InvalidArgumentError`, naming the position and
    what was expected there, if the column is truncated, malformed or not canonical.
    """
    if direction is _ASC:
        flip = 0
    elif direction is _DESC:
        flip = 0xFF
    else:
        raise InvalidArgumentError(f"direction must be a Direction, not {direction!r}")
    if pos < 0 or pos >= len(buf):
        raise InvalidArgumentError(
            f"expected a key column at position {pos}, but the key is {len(buf)} bytes long"
        )
    marker = buf[pos] ^ flip
    if _INT_LOWEST <= marker <= _INT_HIGHEST:
        return _decode_int(buf, pos, marker, flip)
    if marker == _NULL:
        return None, pos + 1
    if marker in (_STR, _BYTES):
        return _decode_string(buf, pos, marker, flip)
    if marker == _FLOAT:
        return _decode_float(buf, pos, flip)
    if marker == _NAN:
        return float("nan"), pos + 1
    if marker == _FALSE:
        return False, pos + 1
    if marker == _TRUE:
        return True, pos + 1
    raise InvalidArgumentError(
        f"unknown type marker 0x{buf[pos]:02x} at position {pos} of a {_name(flip)} key column"
    )


def decode_values(buf: bytes, directions: Sequence[Direction]) -> list[KeyValue]:
    """Decode a composite key of ``len(directions)`` columns that fills all of ``buf``.

    Raises :class:`InvalidArgumentError` if a column is truncated or malformed, or if
    bytes are left over after the last column.
    """
    values: list[KeyValue] = []
    pos = 0
    for direction in directions:
        value, pos = decode_value(buf, pos, direction)
        values.append(value)
    if pos != len(buf):
        raise InvalidArgumentError(
            f"{len(buf) - pos} unexpected bytes at position {pos} after the last of "
            f"{len(directions)} key columns"
        )
    return values


def key_between(lo: bytes, hi: bytes, fraction: float, *, columns_at: int = 0) -> bytes:
    """A byte string about ``fraction`` (0 to 1) of the way from ``lo`` to ``hi`` (``lo
    <= hi``), for cutting the keys between them into parts of similar size; it is in
    ``[lo, hi]`` but not necessarily a key.

    From byte ``columns_at`` on (the bytes before it are a prefix both keys share), the
    keys are read as composite keys of ascending encodings, column by column: the first column
    where they differ is interpolated by value when both are ints or both are floats (the
    int marker carries the length, so the bytes of 7 and of 70000 are far apart while
    their values are not); otherwise the bytes from that column on are interpolated as
    big-endian numbers."""
    scale = 1 << 32
    share = max(0, min(scale, round(fraction * scale)))
    between = _interpolate(lo, hi, share, scale, columns_at)
    return min(max(between, lo), hi)  # a shorter key or a padded one can fall outside


def _interpolate(lo: bytes, hi: bytes, share: int, scale: int, pos: int) -> bytes:
    while pos < len(lo) and pos < len(hi):
        try:
            a, end_a = decode_value(lo, pos)
            b, end_b = decode_value(hi, pos)
        except InvalidArgumentError:
            break
        if lo[pos:end_a] == hi[pos:end_b]:
            pos = end_a
            continue
        if type(a) is int and type(b) is int:
            return lo[:pos] + encode_value(a + (b - a) * share // scale)
        if type(a) is float and type(b) is float and not (a != a or b != b):  # NaN: bytes
            return lo[:pos] + encode_value(a + (b - a) * share / scale)
        break
    width = max(len(lo), len(hi)) - pos
    x = int.from_bytes(lo[pos:].ljust(width, b"\0"))
    y = int.from_bytes(hi[pos:].ljust(width, b"\0"))
    return lo[:pos] + (x + (y - x) * share // scale).to_bytes(width)


def _encode_asc(value: KeyValue) -> bytes:
    if value is None:
        return _NULL_KEY
    # NB: bool is a subclass of int, so it must be checked first.
    if isinstance(value, bool):
        return _TRUE_KEY if value else _FALSE_KEY
    if isinstance(value, int):
        return _encode_int(value)
    if isinstance(value, float):
        return _encode_float(value)
    if isinstance(value, str):
        try:
            payload = value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidArgumentError(
                f"cannot encode string key {value!r}: it is not valid Unicode ({exc.reason})"
            ) from exc
        return _STR_PREFIX + payload.replace(b"\x00", b"\x00\xff") + _TERMINATOR
    if isinstance(value, bytes):
        return _BYTES_PREFIX + value.replace(b"\x00", b"\x00\xff") + _TERMINATOR
    raise InvalidArgumentError(
        f"cannot encode a {type(value).__name__} as a key column; "
        "supported types are None, bool, int, float, str and bytes"
    )


def encode_int(value: int) -> bytes:
    """:func:`encode_value` of an ``int`` (not a ``bool``) ascending, without its type
    dispatch: a bulk load's key column, ``map``-ped over ints known to be ints."""
    return _encode_int(value)


_BYTES_OF_BITS = tuple((bits + 7) >> 3 for bits in range(65))
_BIG: Literal["big"] = "big"
_MAX_RUNS = 64  # runs of one byte length a column may have for encode_int_keys


def encode_int_keys(prefix: bytes, values: Sequence[int], suffix: bytes) -> list[bytes] | None:
    """``prefix + encode_int(v) + suffix`` of each of ``values`` (ints, not bools), with
    no Python code run per value: each key is one int (prefix, marker, value and suffix
    shifted into place) written out by ``int.to_bytes``, for each run of values of one
    byte length (a bulk load's key column, in about half the time of
    :func:`encode_int` per value and a join). ``None`` when a value is negative or past
    the int64 maximum, or the byte lengths change more than ``_MAX_RUNS`` times (keys
    out of order): encode those one by one."""
    if not values:
        return []
    runs = _length_runs(values)
    if runs is None:
        return None
    head, tail = int.from_bytes(prefix, "big"), int.from_bytes(suffix, "big")
    shift = 8 * len(suffix)
    keys: list[bytes] = []
    start = 0
    for n, count in runs:
        width = len(prefix) + 1 + n + len(suffix)
        base = (head << 8 * (1 + n + len(suffix))) | ((_INT_ZERO + n) << 8 * n + shift) | tail
        shifted = map(operator.lshift, values[start : start + count], itertools.repeat(shift))
        keys.extend(
            map(
                int.to_bytes,
                map(base.__or__, shifted),
                itertools.repeat(width),
                itertools.repeat(_BIG),
            )
        )
        start += count
    return keys


def decode_int_keys(prefix: bytes, keys: list[bytes], suffix: bytes) -> list[int] | None:
    """The ints ``v`` of ``keys`` that are each ``prefix + encode_int(v) + suffix``, the
    inverse of :func:`encode_int_keys`, with no Python code run per key: each key's
    middle read as a non-negative int, then the ints encoded again and compared with
    ``keys``. ``None`` when a key is not such a key of a non-negative int (or
    :func:`encode_int_keys` declines the ints): decode those one by one."""
    if not keys:
        return []
    body = slice(len(prefix) + 1, -len(suffix) or None)
    values = list(
        map(
            int.from_bytes,
            map(operator.getitem, keys, itertools.repeat(body)),
            itertools.repeat(_BIG),
        )
    )
    if encode_int_keys(prefix, values, suffix) != keys:
        return None
    return values


def _length_runs(values: Sequence[int]) -> list[tuple[int, int]] | None:
    """``values`` as runs of one byte length: ``(length, count)`` in order; ``None`` if
    one is out of encode_int_keys's range or there are too many runs."""
    if all(map(operator.lt, values, itertools.islice(values, 1, None))):
        # NB: ascending (a load of sorted rows): each run ends where the next length
        # starts, found by bisection, not by a length per value
        if values[0] < 0 or values[-1] > _INT64_MAX:
            return None
        runs, start = [], 0
        for n in range(_BYTES_OF_BITS[values[0].bit_length()], 9):
            end = bisect.bisect_left(values, 1 << 8 * n, start)
            if end > start:
                runs.append((n, end - start))
            start = end
        return runs
    if min(values) < 0 or max(values) > _INT64_MAX:
        return None
    lengths = map(_BYTES_OF_BITS.__getitem__, map(int.bit_length, values))
    runs = []
    for n, run in itertools.groupby(lengths):
        runs.append((n, len(list(run))))
        if len(runs) > _MAX_RUNS:
            return None
    return runs


def _encode_int(value: int) -> bytes:
    if value >= 0:
        if value > _INT64_MAX:
            raise InvalidArgumentError(f"int key {value} is above the int64 maximum {_INT64_MAX}")
        n = (value.bit_length() + 7) >> 3
        return (((_INT_ZERO + n) << (8 * n)) | value).to_bytes(n + 1, "big")
    if value < _INT64_MIN:
        raise InvalidArgumentError(f"int key {value} is below the int64 minimum {_INT64_MIN}")
    m = ((~value).bit_length() + 7) >> 3
    # NB: on Python's unbounded two's complement ints, value & mask is value mod 256**m.
    return (((_INT_MINUS_ONE - m) << (8 * m)) | (value & _LOW_MASKS[m])).to_bytes(m + 1, "big")


def _encode_float(value: float) -> bytes:
    if value != value:
        return _NAN_KEY
    if value == 0.0:
        value = 0.0  # NB: -0.0 == 0.0, so both must encode as +0.0
    (bits,) = _U64.unpack(_F64.pack(value))
    bits ^= _U64_MASK if bits & _SIGN_BIT else _SIGN_BIT
    return _FLOAT_KEY.pack(_FLOAT, bits)


def _decode_int(buf: bytes, pos: int, marker: int, flip: int) -> tuple[int, int]:
    n = marker - _INT_ZERO if marker >= _INT_ZERO else _INT_MINUS_ONE - marker
    start = pos + 1
    end = start + n
    if end > len(buf):
        raise _truncated(buf, pos, f"an int of {n} bytes", flip)
    raw = int.from_bytes(buf[start:end], "big")
    if flip:
        raw ^= _LOW_MASKS[n]
    if marker >= _INT_ZERO:
        value = raw
        # A canonical positive int has no leading zero byte; ~v of a negative one neither.
        noncanonical = n > 0 and raw >> (8 * (n - 1)) == 0
    else:
        value = raw - (1 << (8 * n))
        noncanonical = n > 0 and raw >> (8 * (n - 1)) == 0xFF
    if noncanonical:
        raise InvalidArgumentError(
            f"non-canonical int at position {pos} of a {_name(flip)} key column: "
            f"{value} does not need {n} bytes"
        )
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise InvalidArgumentError(
            f"int at position {pos} of a {_name(flip)} key column is outside int64: {value}"
        )
    return value, end


def _decode_float(buf: bytes, pos: int, flip: int) -> tuple[float, int]:
    end = pos + 9
    if end > len(buf):
        raise _truncated(buf, pos, "a float of 8 bytes", flip)
    (bits,) = _U64.unpack_from(buf, pos + 1)
    if flip:
        bits ^= _U64_MASK
    bits ^= _SIGN_BIT if bits & _SIGN_BIT else _U64_MASK
    (value,) = _F64.unpack(_U64.pack(bits))
    if value != value or bits == _SIGN_BIT:
        # NaN has its own marker and -0.0 encodes as 0.0; other forms would break order
        # or make two keys for one value.
        raise InvalidArgumentError(
            f"non-canonical float at position {pos} of a {_name(flip)} key column: "
            f"{value!r} must be encoded as {'NaN' if value != value else '0.0'}"
        )
    return value, end


def _decode_string(buf: bytes, pos: int, marker: int, flip: int) -> tuple[str | bytes, int]:
    kind = "str" if marker == _STR else "bytes"
    start = pos + 1
    # NB: a zero payload byte is always escaped (00 FF), so the first 00 01 (inverted:
    # FF FE) is the terminator, and the body is well formed exactly when every 00 in it
    # starts an escape. All of this runs in C; descending bodies are inverted only after
    # their end is found, never the rest of the buffer.
    if flip:
        end = buf.find(_DESC_TERMINATOR, start)
        if end < 0:
            raise _truncated(buf, pos, f"a {kind} ending in FF FE", flip)
        body = buf[start:end]
        if body.count(b"\xff") != body.count(b"\xff\x00"):
            raise _bad_escape(buf, pos, start, end, kind, flip)
        payload = body.replace(b"\xff\x00", b"\xff").translate(_INVERT)
    else:
        end = buf.find(_TERMINATOR, start)
        if end < 0:
            raise _truncated(buf, pos, f"a {kind} ending in 00 01", flip)
        body = buf[start:end]
        if body.count(b"\x00") != body.count(b"\x00\xff"):
            raise _bad_escape(buf, pos, start, end, kind, flip)
        payload = body.replace(b"\x00\xff", b"\x00")
    if marker == _BYTES:
        return payload, end + 2
    try:
        return payload.decode("utf-8"), end + 2
    except UnicodeDecodeError as exc:
        raise InvalidArgumentError(
            f"str at position {pos} of a {_name(flip)} key column is not valid UTF-8: "
            f"{exc.reason} at payload byte {exc.start}"
        ) from exc


def _truncated(buf: bytes, pos: int, expected: str, flip: int) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"truncated {_name(flip)} key column at position {pos}: expected {expected}, "
        f"but only {len(buf) - pos - 1} bytes follow the type marker"
    )


def _bad_escape(
    buf: bytes, pos: int, start: int, end: int, kind: str, flip: int
) -> InvalidArgumentError:
    escape = 0xFF ^ flip
    # The body failed the escape check, so some zero byte in it is not followed by an
    # escape byte: report the first one.
    zero = bytes((flip,))
    at = buf.find(zero, start, end)
    while at + 1 < end and buf[at + 1] == escape:
        at = buf.find(zero, at + 2, end)
    return InvalidArgumentError(
        f"malformed {kind} at position {pos} of a {_name(flip)} key column: byte "
        f"0x{flip:02x} at position {at} must be followed by 0x{escape:02x} (an escaped "
        f"zero) or 0x{1 ^ flip:02x} (the terminator)"
    )


def _name(flip: int) -> str:
    return "descending" if flip else "ascending"
