"""``crdb_internal_mvcc_timestamp``, every table's hidden column of its row's MVCC
timestamp, as CockroachDB's: a DECIMAL ``<wall>.<logical:010>`` a query may select and
filter on, which ``SELECT *`` leaves out."""

from __future__ import annotations

import decimal
import re

import psycopg
import pytest

from feedkv import DB
from feedkv.errors import SQLError
from feedkv.sql.session import Session


@pytest.fixture
def session(db: DB) -> Session:
    session = db.session()
    session.execute("CREATE TABLE t (k INT PRIMARY KEY, v INT, INDEX v_idx (v))")
    session.execute("INSERT INTO t VALUES (1, 10), (2, 20)")
    return session


def stamps(session: Session) -> dict[int, decimal.Decimal]:
    rows = session.execute("SELECT k, crdb_internal_mvcc_timestamp FROM t").rows
    return {k: ts for k, ts in rows}


def test_it_is_the_time_the_row_was_written(session: Session) -> None:
    before = stamps(session)
    session.execute("UPDATE t SET v = 21 WHERE k = 2")
    after = stamps(session)
    assert after[1] == before[1]
    assert after[2] > before[2]
    # the version at that timestamp is the update, the one just before it the insert
    at = session.execute(f"SELECT v FROM t AS OF SYSTEM TIME {after[2]} WHERE k = 2").rows
    assert at == [(21,)]
    wall, _, logical = str(after[2]).partition(".")
    earlier = f"{wall}.{int(logical) - 1:010d}" if int(logical) else f"{int(wall) - 1}.0000000000"
    assert session.execute(f"SELECT v FROM t AS OF SYSTEM TIME {earlier} WHERE k = 2").rows == [
        (20,)
    ]


def test_its_text_is_wall_nanoseconds_and_ten_logical_digits(session: Session) -> None:
    rows = session.execute("SELECT crdb_internal_mvcc_timestamp::STRING FROM t").rows
    assert len(rows) == 2
    assert all(re.fullmatch(r"\d{19}\.\d{10}", text) for (text,) in rows)


def test_star_leaves_it_out(session: Session) -> None:
    result = session.execute("SELECT *, crdb_internal_mvcc_timestamp IS NOT NULL FROM t")
    assert result.columns == ("k", "v", "?column?")
    assert result.rows == [(1, 10, True), (2, 20, True)]


def test_where_order_by_and_aggregates_read_it(session: Session) -> None:
    session.execute("UPDATE t SET v = 11 WHERE k = 1")
    latest = max(stamps(session).values())
    rows = session.execute("SELECT k FROM t WHERE crdb_internal_mvcc_timestamp = $1", latest).rows
    assert rows == [(1,)]
    ordered = session.execute("SELECT k FROM t ORDER BY crdb_internal_mvcc_timestamp DESC")
    assert ordered.rows == [(1,), (2,)]
    [(count, newest)] = session.execute(
        "SELECT count(*), max(t.crdb_internal_mvcc_timestamp) FROM t"
    ).rows
    assert (count, newest) == (2, latest)
    # through the secondary index's read as through a scan
    by_index = session.execute("SELECT crdb_internal_mvcc_timestamp FROM t WHERE v = 11").rows
    assert by_index == [(latest,)]


def test_joined_tables_each_have_their_own(session: Session) -> None:
    session.execute("CREATE TABLE u (k INT PRIMARY KEY)")
    session.execute("INSERT INTO u VALUES (1)")
    [(u_ts,)] = session.execute("SELECT crdb_internal_mvcc_timestamp FROM u").rows
    rows = session.execute(
        "SELECT t.k, t.crdb_internal_mvcc_timestamp, u.crdb_internal_mvcc_timestamp "
        "FROM t JOIN u ON t.k = u.k"
    ).rows
    assert rows == [(1, stamps(session)[1], u_ts)]
    with pytest.raises(SQLError) as raised:
        session.execute("SELECT crdb_internal_mvcc_timestamp FROM t JOIN u ON t.k = u.k")
    assert raised.value.code == "42702"


def test_other_unknown_columns_are_still_refused(session: Session) -> None:
    with pytest.raises(SQLError) as raised:
        session.execute("SELECT crdb_internal_mvcc_timestamps FROM t")
    assert raised.value.code == "42703"


def test_a_client_reads_it_as_numeric(db: DB, session: Session) -> None:
    with psycopg.connect(db.serve_sql(), autocommit=True) as conn:
        cursor = conn.execute(
            "SELECT k, crdb_internal_mvcc_timestamp FROM t WHERE crdb_internal_mvcc_timestamp > 0"
        )
        assert [d.name for d in cursor.description] == ["k", "crdb_internal_mvcc_timestamp"]
        assert cursor.description[1].type_code == 1700  # numeric
        assert dict(cursor.fetchall()) == stamps(session)
