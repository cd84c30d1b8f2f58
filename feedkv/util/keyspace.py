"""How the user keyspace is divided, and a key as a person reads it.

The catalog's keys start with :data:`CATALOG_PREFIX`; a table's keys start with
:data:`TABLES_PREFIX` and the table id, then the index id, the key columns and the
column family, each in the ascending order-preserving encoding of
:mod:`feedkv.util.encoding`. :func:`pretty_key` prints a key as CockroachDB does
(``/Table/104/1/4/0``), for the admin page, ``SHOW RANGES`` and error messages; it lives
here, below the KV layer, because a transaction's retry error names the key it met.
"""

from __future__ import annotations

from feedkv.errors import InvalidArgumentError
from feedkv.util.encoding import decode_value
from feedkv.util.keys import KEY_MAX, KEY_MIN

__all__ = ["CATALOG_PREFIX", "TABLES_PREFIX", "pretty_key", "table_id_of_key"]

CATALOG_PREFIX = b"\xf1"
TABLES_PREFIX = b"\xf2"


def table_id_of_key(key: bytes) -> int | None:
    """The table a key belongs to, or ``None`` for a key outside every table."""
    if not key.startswith(TABLES_PREFIX):
        return None
    try:
        table_id, _ = decode_value(key, len(TABLES_PREFIX))
    except InvalidArgumentError:
        return None
    return table_id if isinstance(table_id, int) and not isinstance(table_id, bool) else None


def pretty_key(key: bytes) -> str:
    """A key as CockroachDB prints one: ``/Min``, ``/Max``,
    ``/Table/<id>/<index id>/<key values...>/<family id>`` (a string value in double
    quotes; the rest in hex when it does not decode as ascending key columns),
    ``/System/...`` for the catalog's keys, else the bytes."""
    if key == KEY_MIN:
        return "/Min"
    if key >= KEY_MAX:
        return "/Max"
    table_id = table_id_of_key(key)
    if table_id is not None:
        _, pos = decode_value(key, len(TABLES_PREFIX))
        rest = key[pos:]
        return f"/Table/{table_id}" + (f"/{_key_columns(rest)}" if rest else "")
    if key.startswith(CATALOG_PREFIX):
        rest = key[len(CATALOG_PREFIX) :]
        return "/System" + (f"/{rest.hex()}" if rest else "")
    return repr(key)


def _key_columns(rest: bytes) -> str:
    """The key columns after a table's prefix (its index id first) as ``1/50``; in hex
    when they do not decode (a descending column, a key split inside a column)."""
    shown = []
    pos = 0
    try:
        while pos < len(rest):
            value, pos = decode_value(rest, pos)
            shown.append(_shown(value))
    except InvalidArgumentError:
        return rest.hex()
    return "/".join(shown)


def _shown(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, bytes):
        return '"' + "".join(f"\\x{b:02x}" for b in value) + '"'
    return str(value)
