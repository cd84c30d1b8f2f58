"""Identity columns over the SQL port, as a client sees CockroachDB's: a GENERATED
ALWAYS column refuses a value with 428C9 and its DETAIL, OVERRIDING SYSTEM VALUE lets
one in, and the table's sequence numbers the rows (more cases:
testdata/identity_columns.test)."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import errors

from feedkv import DB


def test_an_always_identity_column_over_the_wire(db: DB) -> None:
    with psycopg.connect(db.serve_sql(), autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE orders (id INT PRIMARY KEY GENERATED ALWAYS AS IDENTITY, item STRING)"
        )
        inserted = conn.execute(
            "INSERT INTO orders (item) VALUES (%s), (%s) RETURNING id", ("tea", "jam")
        ).fetchall()
        assert inserted == [(1,), (2,)]

        with pytest.raises(errors.GeneratedAlways) as raised:
            conn.execute("INSERT INTO orders (id, item) VALUES (%s, %s)", (7, "oat"))
        assert raised.value.sqlstate == "428C9"
        assert raised.value.diag.message_primary == 'cannot insert into column "id"'
        assert raised.value.diag.message_detail == (
            'Column "id" is an identity column defined as GENERATED ALWAYS.'
        )

        conn.execute(
            "INSERT INTO orders (id, item) OVERRIDING SYSTEM VALUE VALUES (%s, %s)", (7, "oat")
        )
        conn.execute("INSERT INTO orders (item) VALUES ('fig')")
        rows = conn.execute("SELECT id, item FROM orders ORDER BY id").fetchall()
        assert rows == [(1, "tea"), (2, "jam"), (3, "fig"), (7, "oat")]

        [(create,)] = conn.execute("SELECT create_statement FROM [SHOW CREATE TABLE orders]")
        assert "id INT8 NOT NULL GENERATED ALWAYS AS IDENTITY," in create
