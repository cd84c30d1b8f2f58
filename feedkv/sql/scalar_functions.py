"""Built-in scalar functions over strings and numbers, as PostgreSQL and CockroachDB
define them: pure functions of their argument values.

Each is *strict*: a NULL argument gives NULL without a call (the compiler sees to it),
but for ``concat`` and ``concat_ws``, which skip NULLs. An argument of a type the
function does not take raises ``TypeError``, which the compiler turns into 42883
(``unknown signature: f(type)``) naming the types it met.

Numbers: INT arguments of the rounding and power functions are taken as FLOAT, as
PostgreSQL resolves ``floor(5)`` to ``floor(float8)``. DECIMAL rounds half away from
zero (``round(2.5)`` is 3), FLOAT half to even (``round(2.5::FLOAT)`` is 2), as both
databases do.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import decimal
import fractions
import hashlib
import json
import math
from collections.abc import Callable
from typing import Any

from feedkv.errors import SQLError
from feedkv.sql import datetime_format, datetime_functions, jsonb, jsonb_functions, regexp
from feedkv.sql.arrays import Array
from feedkv.sql.as_json import as_json
from feedkv.sql.descriptor import quote_name
from feedkv.sql.interval import Interval
from feedkv.sql.records import Record
from feedkv.sql.text_format import built_length
from feedkv.sql.types import (
    DECIMAL_QUOTIENT,
    INT64_MAX,
    INT64_MIN,
    ColumnType,
    Kind,
    type_of_value,
)

__all__ = [
    "CCL_ONLY_FUNCTIONS",
    "FUNCTIONS",
    "ccl_only",
    "concat",
    "concat_ws",
    "each_keys",
    "is_int",
]


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(value)
    return value


def _interval(value: Any) -> Interval:
    if not isinstance(value, Interval):
        raise TypeError(value)
    return value


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(value)
    return value


def _number(value: Any) -> int | float | decimal.Decimal:
    if isinstance(value, bool) or not isinstance(value, int | float | decimal.Decimal):
        raise TypeError(value)
    return value


def _real(value: Any) -> float | decimal.Decimal:
    """A number for the rounding functions: DECIMAL stays, INT and FLOAT are FLOAT."""
    if isinstance(value, bool):
        raise TypeError(value)
    if isinstance(value, decimal.Decimal):
        return value
    if isinstance(value, int | float):
        return float(value)
    raise TypeError(value)


def _round(value: Any, digits: Any = 0) -> Any:
    number, places = _real(value), _int(digits)
    if isinstance(number, float):
        if not math.isfinite(number):
            return number
        return float(round(number, places))  # NB: Python rounds half to even
    exponent = decimal.Decimal(1).scaleb(-places)
    rounded = number.quantize(exponent, rounding=decimal.ROUND_HALF_UP)
    # NB: round(15, -1) is 20, not 2E+1
    return rounded.quantize(decimal.Decimal(1)) if places < 0 else rounded


def _whole(number: float, whole: int) -> float:
    """``whole`` as a FLOAT with ``number``'s sign kept on zero (ceil(-0.5) is -0)."""
    return math.copysign(float(whole), number) if whole == 0 else float(whole)


def _floor(value: Any) -> Any:
    number = _real(value)
    if isinstance(number, float):
        return _whole(number, math.floor(number)) if math.isfinite(number) else number
    return number.to_integral_value(rounding=decimal.ROUND_FLOOR)


def _ceil(value: Any) -> Any:
    number = _real(value)
    if isinstance(number, float):
        return _whole(number, math.ceil(number)) if math.isfinite(number) else number
    return number.to_integral_value(rounding=decimal.ROUND_CEILING)


def _trunc(value: Any) -> Any:
    number = _real(value)
    if isinstance(number, float):
        return _whole(number, math.trunc(number)) if math.isfinite(number) else number
    return number.to_integral_value(rounding=decimal.ROUND_DOWN)


def _sign(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        return (value > 0) - (value < 0)  # NB: an INT's sign is an INT, as CockroachDB's
    number = _real(value)
    if isinstance(number, float):
        return float((number > 0) - (number < 0))
    return decimal.Decimal((number > 0) - (number < 0))


def _sqrt(value: Any) -> Any:
    number = _real(value)
    if number < 0:
        raise SQLError("2201F", "cannot take square root of a negative number")
    if isinstance(number, decimal.Decimal):
        return DECIMAL_QUOTIENT.sqrt(number)  # NB: 20 significant digits, as CockroachDB
    return math.sqrt(number)


def _power(base: Any, exponent: Any) -> Any:
    """As CockroachDB's pow and ^: INT ones give an INT (22003 when the power is no
    INT8, as 2 ^ -1 or 2 ^ 64), a FLOAT with a FLOAT or a numeric constant a FLOAT,
    DECIMAL ones a DECIMAL of 20 significant digits."""
    if is_int(base) and is_int(exponent):
        return _int_power(base, exponent)
    if isinstance(base, float) or isinstance(exponent, float):
        # NB: the constant in f ^ 0.5 is a FLOAT, as CockroachDB types it
        base, exponent = float(base), float(exponent)
    a, b = _real(base), _real(exponent)
    if isinstance(a, decimal.Decimal) or isinstance(b, decimal.Decimal):
        a, b = decimal.Decimal(a), decimal.Decimal(b)
        if a == 0 and b < 0:
            raise SQLError("2201F", "zero raised to a negative power is undefined")
        if a < 0 and b != b.to_integral_value():
            raise SQLError(
                "2201F", "a negative number raised to a non-integer power yields a complex result"
            )
        try:
            return DECIMAL_QUOTIENT.power(a, b)  # NB: 20 significant digits, as CockroachDB
        except decimal.Overflow:
            raise SQLError("22003", "value out of range: overflow") from None
    if a == 0 and b < 0:
        raise SQLError("2201F", "zero raised to a negative power is undefined")
    try:
        return math.pow(a, b)
    except ValueError:
        raise SQLError(
            "2201F", "a negative number raised to a non-integer power yields a complex result"
        ) from None
    except OverflowError:
        raise SQLError("22003", "value out of range: overflow") from None


def is_int(value: Any) -> bool:
    """Whether ``value`` is an INT's (a Python int, not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _int_power(base: int, exponent: int) -> int:
    if base == 0 and exponent < 0:
        raise SQLError("2201F", "zero raised to a negative power is undefined")
    if exponent < 0:
        if base in (1, -1):
            return 1 if base == 1 or exponent % 2 == 0 else -1
        raise SQLError("22003", "integer out of range")
    if abs(base) > 1 and exponent > 64:
        raise SQLError("22003", "integer out of range")
    result: int = base**exponent
    if not INT64_MIN <= result <= INT64_MAX:
        raise SQLError("22003", "integer out of range")
    return result


def _float(value: Any) -> float:
    """A FLOAT argument (an INT is taken as one)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(value)
    return float(value)


def _logarithm_operand(number: float | decimal.Decimal, what: str = "") -> None:
    if isinstance(number, decimal.Decimal) and number.is_nan():
        return  # NB: NaN's logarithm is NaN; a Decimal NaN does not compare with <=
    if number <= 0:
        shown = what or ("zero" if number == 0 else "a negative number")
        raise SQLError("2201E", f"cannot take logarithm of {shown}")


# NB: a DECIMAL's logarithm is taken to twice CockroachDB's 20 digits before a quotient
# of two of them (log(b, x)) is rounded to 20: log(2.0, 8.0) is then 3, not 2.99...
_DECIMAL_LOGARITHM = DECIMAL_QUOTIENT.copy()
_DECIMAL_LOGARITHM.prec = 2 * DECIMAL_QUOTIENT.prec


def _ln(value: Any) -> float | decimal.Decimal:
    """ln(x): a DECIMAL's to 20 significant digits (as CockroachDB's), else a FLOAT."""
    if isinstance(value, decimal.Decimal):
        _logarithm_operand(value)
        return DECIMAL_QUOTIENT.ln(value)
    number = _float(value)
    _logarithm_operand(number)
    return math.log(number)


def _log(first: Any, second: Any = None) -> float | decimal.Decimal:
    """log(x): base 10; log(b, x): base b. DECIMALs give a DECIMAL, as :func:`_ln`."""
    if second is None and isinstance(first, decimal.Decimal):
        _logarithm_operand(first)
        return DECIMAL_QUOTIENT.log10(first)
    # NB: an INT beside a DECIMAL is one, as log(2.0, 8)'s constant 8 is typed
    if isinstance(first, decimal.Decimal) and is_int(second):
        second = decimal.Decimal(second)
    elif is_int(first) and isinstance(second, decimal.Decimal):
        first = decimal.Decimal(first)
    if isinstance(first, decimal.Decimal) and isinstance(second, decimal.Decimal):
        _logarithm_operand(first, "zero or a negative number")
        _logarithm_operand(second, "zero or a negative number")
        if first == 1:
            raise SQLError("22012", "division by zero")
        return DECIMAL_QUOTIENT.divide(_DECIMAL_LOGARITHM.ln(second), _DECIMAL_LOGARITHM.ln(first))
    base, number = (10.0, _float(first)) if second is None else (_float(first), _float(second))
    _logarithm_operand(base, "zero or a negative number")
    _logarithm_operand(number, "zero or a negative number")
    if base == 1:
        raise SQLError("22012", "division by zero")
    return math.log(number, base) if second is not None else math.log10(number)


def _exp(value: Any) -> float | decimal.Decimal:
    """exp(x): a DECIMAL's to 20 significant digits, as :func:`_ln`."""
    try:
        if isinstance(value, decimal.Decimal):
            return DECIMAL_QUOTIENT.exp(value)
        return math.exp(_float(value))
    except (OverflowError, decimal.Overflow):
        raise SQLError("22003", "value out of range: overflow") from None


def _ascii(value: Any) -> int:
    text = _text(value)
    return ord(text[0]) if text else 0


def _chr(value: Any) -> str:
    """``chr(n)``: the character of code point ``n``; a surrogate (U+D800..U+DFFF) is
    U+FFFD, as CockroachDB's (Go's ``string(rune(n))``) is. NB: a lone surrogate is no
    UTF-8 text: RE2 (:mod:`feedkv.sql.regexp`) and the key encoding cannot take one."""
    code = _int(value)
    if not 0 < code <= 0x10FFFF:
        raise SQLError("22023", f"requested character too large for encoding: {code}")
    return "\ufffd" if 0xD800 <= code <= 0xDFFF else chr(code)


def _substring(value: Any, start: Any, length: Any = None) -> str:
    """SQL's 1-based substring: characters from ``start`` (which may be below 1, so
    fewer are taken) for ``length`` (to the end without one)."""
    text, first = _text(value), _int(start)
    if length is None:
        return text[max(first, 1) - 1 :]
    count = _int(length)
    if count < 0:
        raise SQLError("22011", "negative substring length not allowed")
    end = first + count
    return text[max(first, 1) - 1 : max(end, 1) - 1]


def _trim(where: str) -> Callable[..., str]:
    def trim(value: Any, characters: Any = " ") -> str:
        text, chars = _text(value), _text(characters)
        if where == "both":
            return text.strip(chars)
        return text.lstrip(chars) if where == "leading" else text.rstrip(chars)

    return trim


def _replace(value: Any, old: Any, new: Any) -> str:
    text, find = _text(value), _text(old)
    return text.replace(find, _text(new)) if find else text


def _strpos(value: Any, find: Any) -> int:
    return _text(value).find(_text(find)) + 1


def _left(value: Any, count: Any) -> str:
    text, n = _text(value), _int(count)
    return text[:n] if n >= 0 else text[: max(len(text) + n, 0)]


def _right(value: Any, count: Any) -> str:
    text, n = _text(value), _int(count)
    if n >= 0:
        return text[len(text) - n :] if n else ""
    return text[-n:]


def _split_part(value: Any, delimiter: Any, index: Any) -> str:
    text, sep, n = _text(value), _text(delimiter), _int(index)
    if n == 0:
        raise SQLError("22023", "field position must not be zero")
    parts = text.split(sep) if sep else [text]
    position = n - 1 if n > 0 else len(parts) + n
    return parts[position] if 0 <= position < len(parts) else ""


def _repeat(value: Any, times: Any) -> str:
    text, n = _text(value), max(_int(times), 0)
    built_length("repeat", len(text) * n)
    return text * n


def _pad(left: bool) -> Callable[..., str]:
    def pad(value: Any, length: Any, fill: Any = " ") -> str:
        text, n, filler = _text(value), _int(length), _text(fill)
        built_length("lpad" if left else "rpad", n)
        if n <= len(text):
            return text[: max(n, 0)]
        if not filler:
            return text
        padding = (filler * n)[: n - len(text)]
        return padding + text if left else text + padding

    return pad


def _initcap(value: Any) -> str:
    out, word = [], False
    for ch in _text(value):
        out.append(ch.lower() if word else ch.upper())
        word = ch.isalnum()
    return "".join(out)


def _md5(value: Any) -> str:
    data = value.encode() if isinstance(value, str) else value
    if not isinstance(data, bytes):
        raise TypeError(value)
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


def _to_hex(value: Any) -> str:
    """to_hex(INT | BYTES | STRING): an INT's 64 bits (a negative one's two's
    complement, as CockroachDB's), or the bytes, in lowercase hexadecimal."""
    if isinstance(value, int) and not isinstance(value, bool):
        return format(value & 0xFFFF_FFFF_FFFF_FFFF, "x")
    data = value.encode() if isinstance(value, str) else value
    if not isinstance(data, bytes):
        raise TypeError(value)
    return data.hex()


def _digest(name: str) -> Callable[[Any], str]:
    """sha1, sha224, sha256, sha384, sha512: the hash of a STRING's UTF-8 or of BYTES,
    in lowercase hexadecimal, as CockroachDB's."""

    def digest(value: Any) -> str:
        data = value.encode() if isinstance(value, str) else value
        if not isinstance(data, bytes):
            raise TypeError(value)
        return hashlib.new(name, data).hexdigest()

    return digest


_FORMATS = ("hex", "escape", "base64")


def _format(name: Any, function: str) -> str:
    found = _text(name).lower()
    if found not in _FORMATS:
        raise SQLError(
            "22023", f"only 'hex', 'escape', and 'base64' formats are supported for {function}()"
        )
    return found


def _encode(value: Any, form: Any) -> str:
    """encode(bytes, 'hex' | 'escape' | 'base64'): the bytes as text. ``escape`` writes
    a zero byte, a byte of the high bit and a backslash as ``\\ooo`` (octal) and ``\\\\``."""
    data = value.encode() if isinstance(value, str) else value
    if not isinstance(data, bytes):
        raise TypeError(value)
    name = _format(form, "encode")
    if name == "hex":
        return data.hex()
    if name == "base64":
        return base64.b64encode(data).decode()
    return "".join("\\\\" if b == 0x5C else chr(b) if 0 < b < 0x80 else f"\\{b:03o}" for b in data)


def _decode(value: Any, form: Any) -> bytes:
    """decode(text, 'hex' | 'escape' | 'base64'): the bytes ``encode`` wrote as
    ``text`` (22023 for text not in that form)."""
    text, name = _text(value), _format(form, "decode")
    try:
        if name == "hex":
            return bytes.fromhex(text)
        if name == "base64":
            return base64.b64decode("".join(text.split()), validate=True)
    except (ValueError, binascii.Error):
        raise SQLError("22023", f"invalid {name} input for decode(): {text!r}") from None
    out, at = bytearray(), 0
    while at < len(text):
        if text[at] != "\\":
            out += text[at].encode()
            at += 1
        elif text.startswith("\\\\", at):
            out.append(0x5C)
            at += 2
        elif len(digits := text[at + 1 : at + 4]) == 3 and all(d in "01234567" for d in digits):
            out.append(int(digits, 8) & 0xFF)
            at += 4
        else:
            raise SQLError(
                "22023", "invalid escape input for decode(): \\ takes \\ or 3 octal digits"
            )
    return bytes(out)


def _bit_length(value: Any) -> int:
    return 8 * _octet_length(value)


def _octet_length(value: Any) -> int:
    if isinstance(value, str):
        return len(value.encode())
    if isinstance(value, bytes):
        return len(value)
    raise TypeError(value)


def _reverse(value: Any) -> str:
    return _text(value)[::-1]


def _translate(value: Any, find: Any, into: Any) -> str:
    """translate(s, from, to): each character of ``from`` in ``s`` replaced by the one
    at its place in ``to``, or removed where ``to`` is shorter (PostgreSQL's)."""
    source, target = _text(find), _text(into)
    table: dict[int, int | None] = {}
    for n, ch in enumerate(source):
        table.setdefault(ord(ch), ord(target[n]) if n < len(target) else None)
    return _text(value).translate(table)


def _quote_ident(value: Any) -> str:
    """quote_ident(s): ``s`` as an identifier, quoted only where it must be."""
    return quote_name(_text(value))


def _overlay(text: Any, placing: Any, start: Any, count: Any = None) -> str:
    """overlay(s PLACING r FROM n [FOR m]): ``s`` with its ``m`` characters from the
    ``n``-th (by default as many as ``r`` has) replaced by ``r``."""
    s, r, n = _text(text), _text(placing), _int(start)
    m = len(r) if count is None else _int(count)
    if n < 1:
        raise SQLError("22011", "negative substring length not allowed")
    # NB: a negative count takes the rest from before n, as PostgreSQL's
    return s[: n - 1] + r + s[max(0, n - 1 + m) :]


def _width_bucket(operand: Any, low: Any, high: Any, count: Any) -> int:
    """width_bucket(operand, low, high, count): which of ``count`` equal buckets between
    ``low`` and ``high`` holds ``operand`` (from 1; 0 below them, ``count + 1`` above),
    as PostgreSQL's; ``low`` above ``high`` counts down."""
    buckets = _int(count)
    if buckets <= 0:
        raise SQLError("2201G", "count must be greater than zero")
    values = [_number(v) for v in (operand, low, high)]
    exact = not any(isinstance(v, float) for v in values)
    x, lo, hi = (fractions.Fraction(v) if exact else float(v) for v in values)
    if lo == hi:
        raise SQLError("2201G", "lower bound cannot equal upper bound")
    if lo < hi:
        if x < lo:
            return 0
        if x >= hi:
            return buckets + 1
        return math.floor((x - lo) * buckets / (hi - lo)) + 1
    if x > lo:
        return 0
    if x <= hi:
        return buckets + 1
    return math.floor((lo - x) * buckets / (lo - hi)) + 1


def _make_date(year: Any, month: Any, day: Any) -> datetime.date:
    y, m, d = _int(year), _int(month), _int(day)
    try:
        return datetime.date(y, m, d)
    except ValueError:
        raise SQLError("22008", f"date field value out of range: {y}-{m:02d}-{d:02d}") from None


def concat(values: list[Any], text: Callable[[Any], str]) -> str:
    """concat(...): the arguments' text, NULLs skipped (``text`` renders a value)."""
    return "".join(text(v) for v in values if v is not None)


def concat_ws(values: list[Any], text: Callable[[Any], str]) -> str | None:
    """concat_ws(separator, ...): NULL for a NULL separator; NULL values skipped."""
    if not values or values[0] is None:
        return None
    return _text(values[0]).join(text(v) for v in values[1:] if v is not None)


# name -> (function, fewest arguments, most arguments)
def _jsonb_typeof(value: Any) -> str:
    """jsonb_typeof(j): object, array, string, number, boolean or null (a JSON null,
    which is not SQL NULL: that gives NULL)."""
    if not (jsonb.is_json(value) or isinstance(value, int | float | str | decimal.Decimal)):
        raise TypeError(value)
    return jsonb.type_name(value)


def _jsonb_array_length(value: Any) -> int:
    if isinstance(value, str):  # NB: the text of a JSON array (a JSON string fails anyway)
        try:
            value = json.loads(value)
        except ValueError:
            raise SQLError("22P02", f"could not parse JSON: {value!r}") from None
    document = jsonb.document(value)
    if not isinstance(document, list):
        raise SQLError("22023", "cannot get array length of a non-array")
    return len(document)


def _regexp_split_to_array(value: Any, pattern: Any, flags: Any = "") -> Array:
    return Array(tuple(regexp.regexp_split(value, pattern, flags)), ColumnType(Kind.STRING))


def _object_keys(value: Any) -> Array:
    return Array(tuple(jsonb_functions.object_keys(value)), ColumnType(Kind.STRING))


def _array_elements(value: Any) -> Array:
    return Array(tuple(jsonb_functions.array_elements(value)), ColumnType(Kind.JSONB))


def _array_elements_text(value: Any) -> Array:
    """jsonb_array_elements_text(j)'s rows: the elements as ``->>`` gives them."""
    elements = jsonb_functions.array_elements(value)
    return Array(tuple(jsonb.as_text(v) for v in elements), ColumnType(Kind.STRING))


def each_keys(function: str, value: Any) -> Array:
    """The key column of ``function(j)`` (jsonb_each or its kin, see parser._each_srf):
    an object's keys, as jsonb_object_keys gives them, but a non-object refused in
    ``function``'s name."""
    return Array(
        tuple(k for k, _v in jsonb_functions.each(value, function)), ColumnType(Kind.STRING)
    )


def _each_values(value: Any) -> Array:
    """jsonb_each(j)'s values column: an object's values in its keys' order (as
    jsonb_object_keys gives them), each a JSONB value."""
    pairs = jsonb_functions.each(value)
    return Array(tuple(v for _k, v in pairs), ColumnType(Kind.JSONB))


def _each_text_values(value: Any) -> Array:
    """jsonb_each_text(j)'s values column: as :func:`_each_values`, as ``->>`` gives them."""
    pairs = jsonb_functions.each(value, "jsonb_each_text")
    return Array(tuple(jsonb.as_text(v) for _k, v in pairs), ColumnType(Kind.STRING))


def _to_jsonb(value: Any) -> Any:
    """to_jsonb(v) and to_json(v): ``v`` as JSON (:func:`as_json`)."""
    return jsonb.from_document(as_json(value))


def _row_to_json(value: Any) -> Any:
    """row_to_json(row): a row value as a JSON object (:func:`as_json`); CockroachDB
    has no other signature."""
    if not isinstance(value, Record):
        raise SQLError("42883", f"unknown signature: row_to_json({type_of_value(value)})")
    return _to_jsonb(value)


_DIGIT_NAMES = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


def _to_english(value: Any) -> str:
    """CockroachDB's ``to_english(int)``: the digits spelled out, hyphenated
    (``10`` is ``one-zero``, ``-7`` is ``minus-seven``)."""
    number = _int(value)
    words = [_DIGIT_NAMES[int(digit)] for digit in str(abs(number))]
    return "-".join(["minus", *words] if number < 0 else words)


# CockroachDB's bounded-staleness reads: functions of its CCL (enterprise) build, which
# feedkv does not have; refused as CockroachDB's core build refuses them, in a SELECT
# list as in AS OF SYSTEM TIME.
CCL_ONLY_FUNCTIONS = frozenset({"with_min_timestamp", "with_max_staleness"})


def ccl_only(name: str) -> SQLError:
    return SQLError("XXC01", f"{name} can only be used with a CCL distribution")


def _ccl_only(name: str) -> Callable[..., Any]:
    def refuse(*_args: Any) -> Any:
        raise ccl_only(name)

    return refuse


FUNCTIONS: dict[str, tuple[Callable[..., Any], int, int]] = {
    "to_english": (_to_english, 1, 1),
    "with_min_timestamp": (_ccl_only("with_min_timestamp"), 1, 2),
    "with_max_staleness": (_ccl_only("with_max_staleness"), 1, 2),
    "to_jsonb": (_to_jsonb, 1, 1),
    "to_json": (_to_jsonb, 1, 1),
    "row_to_json": (_row_to_json, 1, 1),
    "jsonb_typeof": (_jsonb_typeof, 1, 1),
    "json_typeof": (_jsonb_typeof, 1, 1),
    "jsonb_array_length": (_jsonb_array_length, 1, 1),
    "json_array_length": (_jsonb_array_length, 1, 1),
    "round": (_round, 1, 2),
    "floor": (_floor, 1, 1),
    "ceil": (_ceil, 1, 1),
    "ceiling": (_ceil, 1, 1),
    "trunc": (_trunc, 1, 1),
    "sign": (_sign, 1, 1),
    "sqrt": (_sqrt, 1, 1),
    "power": (_power, 2, 2),
    "pow": (_power, 2, 2),
    "ln": (_ln, 1, 1),
    "log": (_log, 1, 2),
    "exp": (_exp, 1, 1),
    "pi": (lambda: math.pi, 0, 0),
    "ascii": (_ascii, 1, 1),
    "to_hex": (_to_hex, 1, 1),
    "chr": (_chr, 1, 1),
    "substring": (_substring, 2, 3),
    "substr": (_substring, 2, 3),
    "btrim": (_trim("both"), 1, 2),
    "ltrim": (_trim("leading"), 1, 2),
    "rtrim": (_trim("trailing"), 1, 2),
    "replace": (_replace, 3, 3),
    "strpos": (_strpos, 2, 2),
    "left": (_left, 2, 2),
    "right": (_right, 2, 2),
    "split_part": (_split_part, 3, 3),
    "repeat": (_repeat, 2, 2),
    "lpad": (_pad(left=True), 2, 3),
    "rpad": (_pad(left=False), 2, 3),
    "initcap": (_initcap, 1, 1),
    "md5": (_md5, 1, 1),
    "octet_length": (_octet_length, 1, 1),
    "bit_length": (_bit_length, 1, 1),
    **{f"sha{bits}": (_digest(f"sha{bits}"), 1, 1) for bits in (1, 224, 256, 384, 512)},
    "encode": (_encode, 2, 2),
    "decode": (_decode, 2, 2),
    "regexp_replace": (regexp.regexp_replace, 3, 4),
    "regexp_extract": (regexp.regexp_extract, 2, 2),
    "regexp_split_to_array": (_regexp_split_to_array, 2, 3),
    "jsonb_set": (jsonb_functions.jsonb_set, 3, 4),
    "jsonb_insert": (jsonb_functions.jsonb_insert, 3, 4),
    "jsonb_strip_nulls": (jsonb_functions.strip_nulls, 1, 1),
    "json_strip_nulls": (jsonb_functions.strip_nulls, 1, 1),
    "jsonb_pretty": (jsonb_functions.jsonb_pretty, 1, 1),
    # NB: reached only as unnest(jsonb_object_keys(j)), as the parser reads these functions
    **dict.fromkeys(("jsonb_object_keys", "json_object_keys"), (_object_keys, 1, 1)),
    **dict.fromkeys(("jsonb_array_elements", "json_array_elements"), (_array_elements, 1, 1)),
    **dict.fromkeys(("jsonb_each", "json_each"), (_each_values, 1, 1)),
    **dict.fromkeys(("jsonb_each_text", "json_each_text"), (_each_text_values, 1, 1)),
    **dict.fromkeys(
        ("jsonb_array_elements_text", "json_array_elements_text"), (_array_elements_text, 1, 1)
    ),
    "to_char": (datetime_format.to_char, 2, 2),
    "age": (datetime_functions.age, 2, 2),
    "timezone": (datetime_functions.at_time_zone, 2, 2),
    "justify_hours": (lambda i: _interval(i).justify_hours(), 1, 1),
    "justify_days": (lambda i: _interval(i).justify_days(), 1, 1),
    "justify_interval": (lambda i: _interval(i).justify_interval(), 1, 1),
    "to_timestamp": (datetime_functions.to_timestamp, 1, 1),
    "reverse": (_reverse, 1, 1),
    "translate": (_translate, 3, 3),
    "quote_ident": (_quote_ident, 1, 1),
    "make_date": (_make_date, 3, 3),
    "overlay": (_overlay, 3, 4),
    "width_bucket": (_width_bucket, 4, 4),
}
