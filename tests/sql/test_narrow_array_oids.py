"""Arrays of the narrower types go out over the SQL port with PostgreSQL's array OIDs,
as CockroachDB sends them: int2[] 1005, int4[] 1007, int8[] 1016, float4[] 1021,
float8[] 1022, bool[] 1000, bpchar[] 1014, text[] 1009; in binary, each element in its
own width (psycopg reads both formats)."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from feedkv import DB

COLUMNS = {
    "i2": ("INT2[]", 1005),
    "i4": ("INT4[]", 1007),
    "i8": ("INT8[]", 1016),
    "f4": ("REAL[]", 1021),
    "f4b": ("FLOAT4[]", 1021),
    "f8": ("FLOAT8[]", 1022),
    "b": ("BOOL[]", 1000),
    "c": ("CHAR(2)[]", 1014),
    "s": ("STRING[]", 1009),
}


@pytest.fixture
def conn(db: DB) -> Iterator[psycopg.Connection]:
    columns = ", ".join(f"{name} {sql}" for name, (sql, _oid) in COLUMNS.items())
    with psycopg.connect(db.serve_sql(), autocommit=True) as connection:
        connection.execute(f"CREATE TABLE arr (k INT PRIMARY KEY, {columns})")
        connection.execute(
            "INSERT INTO arr VALUES (1, ARRAY[-32768, 32767], ARRAY[-2147483648, NULL], "
            "ARRAY[9223372036854775807], ARRAY[0.5, -1.25], ARRAY[1.5], ARRAY[0.1], "
            "ARRAY[true, false], ARRAY['ab', 'bc'], ARRAY['x'])"
        )
        yield connection


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_array_columns_go_out_with_their_element_types_oids(
    conn: psycopg.Connection, binary: bool
) -> None:
    cursor = conn.cursor(binary=binary)
    cursor.execute(f"SELECT {', '.join(COLUMNS)} FROM arr")
    assert [d.type_code for d in cursor.description] == [oid for _sql, oid in COLUMNS.values()]
    assert cursor.fetchall() == [
        (
            [-32768, 32767],
            [-2147483648, None],
            [9223372036854775807],
            [0.5, -1.25],
            [1.5],
            [0.1],
            [True, False],
            ["ab", "bc"],
            ["x"],
        )
    ]
