"""Names a changefeed gives to things outside it, escaped as CockroachDB escapes them.

A table's name may hold characters a Kafka topic or an Avro name cannot. CockroachDB
escapes each such character as ``_u`` + its code point in hex (four digits; eight
above U+10000) + ``_``, so ``"`` becomes ``_u0022_`` and the escape can be undone; a
consumer that moves from CockroachDB finds its topics and schema subjects under the same
names.

- :func:`kafka_name`: a Kafka topic, ``[a-zA-Z0-9._-]{1,249}`` and not ``.`` or
  ``..`` (those two are escaped whole); longer names are cut at 249 characters.
- :func:`avro_name`: an Avro record or field name, ``[A-Za-z_][A-Za-z0-9_]*``; a
  leading digit is escaped too.
"""

from __future__ import annotations

import re

__all__ = ["MAX_KAFKA_TOPIC", "avro_name", "escape_rune", "kafka_name"]

MAX_KAFKA_TOPIC = 249

_KAFKA_DISALLOWED = re.compile(r"[^a-zA-Z0-9._-]")
_AVRO_DISALLOWED = re.compile(r"[^A-Za-z0-9_]")


def escape_rune(char: str) -> str:
    """The escape of one character: ``_u0022_`` for ``"``."""
    code = ord(char)
    return f"_u{code:04x}_" if code <= 1 << 16 else f"_u{code:08x}_"


def _escape(match: re.Match[str]) -> str:
    return escape_rune(match.group())


def kafka_name(name: str) -> str:
    """``name`` as a Kafka topic name."""
    if name in (".", ".."):
        return escape_rune(".") * len(name)
    return _KAFKA_DISALLOWED.sub(_escape, name)[:MAX_KAFKA_TOPIC]


def avro_name(name: str) -> str:
    """``name`` as an Avro record or field name."""
    if not name:
        return name
    if name[0].isdigit():
        return escape_rune(name[0]) + _AVRO_DISALLOWED.sub(_escape, name[1:])
    return _AVRO_DISALLOWED.sub(_escape, name)
