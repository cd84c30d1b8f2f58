"""Keys read as CockroachDB prints them, for the admin page and error messages."""

from __future__ import annotations

from feedkv.util.encoding import encode_value
from feedkv.util.keys import KEY_MAX
from feedkv.util.keyspace import CATALOG_PREFIX, TABLES_PREFIX, pretty_key, table_id_of_key


def row_key(table_id: int, *values: object) -> bytes:
    return TABLES_PREFIX + b"".join(encode_value(v) for v in (table_id, *values))  # type: ignore[arg-type]


def test_keys_read_as_cockroachdbs_pretty_keys() -> None:
    assert pretty_key(b"") == "/Min" and pretty_key(KEY_MAX) == "/Max"
    assert pretty_key(row_key(101)) == "/Table/101"
    # the index id, the key columns, then the family id: CockroachDB's /Table/104/1/4/0
    assert pretty_key(row_key(104, 1, 4, 0)) == "/Table/104/1/4/0"
    assert pretty_key(row_key(101, 1, "b c", 0)) == '/Table/101/1/"b c"/0'
    assert pretty_key(row_key(101, 1, None)) == "/Table/101/1/NULL"
    assert pretty_key(row_key(101) + b"\xfe\x01") == "/Table/101/fe01"  # not columns
    assert pretty_key(CATALOG_PREFIX + b"\x05") == "/System/05"


def test_a_key_outside_every_table_has_no_table_id() -> None:
    assert table_id_of_key(row_key(104, 1, 4)) == 104
    assert table_id_of_key(CATALOG_PREFIX + b"\x05") is None
    assert table_id_of_key(TABLES_PREFIX + b"\xfe") is None
