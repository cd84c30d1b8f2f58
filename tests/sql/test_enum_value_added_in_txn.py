"""``ALTER TYPE ... ADD VALUE`` in an explicit transaction, over the SQL port: the new
label is not yet public in that transaction (22023, as CockroachDB's), its commit makes
it public to every session, and its rollback drops it (more cases: testdata/enums.test)."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import errors

from feedkv import DB


def test_a_label_added_in_a_transaction_is_usable_once_committed(db: DB) -> None:
    with psycopg.connect(db.serve_sql(), autocommit=True) as conn:
        conn.execute("CREATE TYPE level AS ENUM ('low', 'high')")
        conn.execute("CREATE TABLE alarms (k INT PRIMARY KEY, l level)")
        with pytest.raises(errors.InvalidParameterValue) as raised, conn.transaction():
            conn.execute("ALTER TYPE level ADD VALUE 'mid' BEFORE 'high'")
            conn.execute("INSERT INTO alarms VALUES (1, 'mid')")
        assert raised.value.sqlstate == "22023"
        assert 'enum value "mid" is not yet public' in str(raised.value)
        with pytest.raises(errors.InvalidTextRepresentation):
            conn.execute("SELECT 'mid'::level")  # rolled back with its transaction

        with conn.transaction():
            conn.execute("ALTER TYPE level ADD VALUE 'mid' BEFORE 'high'")
            conn.execute("INSERT INTO alarms VALUES (1, 'low')")
        conn.execute("INSERT INTO alarms VALUES (2, 'high'), (3, 'mid')")
        rows = conn.execute("SELECT k, l::STRING FROM alarms ORDER BY alarms.l").fetchall()
        assert rows == [(1, "low"), (3, "mid"), (2, "high")]

    session = db.session()  # another session sees it public too
    assert session.execute("SELECT 'mid'::level::STRING").rows == [("mid",)]
