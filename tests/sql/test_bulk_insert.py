"""Large INSERTs pay per batch: a loader's statement text is parsed and planned once."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError
from feedkv.kv.api import BatchRequest, BatchResponse
from feedkv.sql.session import prepare

BATCH = 1000
INSERT = "INSERT INTO t VALUES " + ", ".join(f"(${2 * j + 1}, ${2 * j + 2})" for j in range(BATCH))


def test_a_long_insert_with_placeholders_is_parsed_once() -> None:
    assert len(INSERT) > 2000
    assert prepare(INSERT) is prepare(INSERT)


def test_a_long_insert_of_literal_rows_is_not_kept() -> None:
    literal = "INSERT INTO t VALUES " + ", ".join(f"({j}, 'v{j}')" for j in range(BATCH))
    assert prepare(literal) is not prepare(literal)
    assert prepare(literal)[0][1] == 0  # no placeholders


def test_the_same_long_insert_run_again_with_new_values_writes_them(db: DB) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    session = db.session()
    try:
        for lo in (0, BATCH):
            params = [p for k in range(lo, lo + BATCH) for p in (k, f"v{k}")]
            assert session.execute(INSERT, *params).tag == f"INSERT 0 {BATCH}"
    finally:
        session.close()
    rows = db.sql("SELECT count(*), min(k), max(k), max(v) FROM t").rows
    assert rows == [(2 * BATCH, 0, 2 * BATCH - 1, "v999")]


def test_execute_many_writes_every_run_or_none(db: DB) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    two = "INSERT INTO t VALUES ($1, $2), ($3, $4)"
    one = "INSERT INTO t VALUES ($1, $2)"
    session = db.session()
    try:
        results = session.execute_many([(two, [1, "a", 2, "b"]), (one, [3, "c"])])
        assert [r.tag for r in results] == ["INSERT 0 2", "INSERT 0 1"]
        with pytest.raises(SQLError) as caught:  # 2 is there already: nothing is written
            session.execute_many([(one, [4, "d"]), (two, [5, "e", 2, "x"])])
        assert caught.value.code == "23505"
        with pytest.raises(SQLError) as caught:  # one proposed twice
            session.execute_many([(one, [6, "f"]), (one, [6, "g"])])
        assert caught.value.code == "23505"
    finally:
        session.close()
    assert db.sql("SELECT k, v FROM t ORDER BY k").rows == [(1, "a"), (2, "b"), (3, "c")]


@pytest.mark.parametrize(
    ("run", "code"),
    [
        (("INSERT INTO t VALUES ($1, $2)", [1]), "08P01"),
        (("SELECT 1; SELECT 2", []), "42601"),
        (("BEGIN", []), "0A000"),
    ],
)
def test_execute_many_refuses_what_is_not_one_statement_with_its_arguments(
    db: DB, run: tuple[str, list[object]], code: str
) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    session = db.session()
    try:
        with pytest.raises(SQLError) as caught:
            session.execute_many([run])
        assert caught.value.code == code
    finally:
        session.close()


def test_a_session_keeps_few_plans_of_long_texts(db: DB) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    session = db.session()
    try:
        for rows in range(900, 940):  # forty different long texts, as COPY's last batches
            text = "INSERT INTO t VALUES " + ", ".join(
                f"(${2 * j + 1}, ${2 * j + 2})" for j in range(rows)
            )
            lo = rows * 1000
            session.execute(text, *[p for k in range(lo, lo + rows) for p in (k, "v")])
            assert len(session._long_plans) <= 16
        assert session.execute(INSERT, *[p for k in range(BATCH) for p in (k, "v")]).tag == (
            f"INSERT 0 {BATCH}"
        )
        assert INSERT in {s.text for s, _desc, _plan in session._long_plans.values()}
    finally:
        session.close()
    assert db.sql("SELECT count(*) FROM t").rows == [(sum(range(900, 940)) + BATCH,)]


def test_an_insert_across_ranges_sends_a_batch_a_range_and_the_commit(db: DB) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    db.sql("ALTER TABLE t SPLIT AT VALUES (100), (200)")
    session = db.session()
    transport = db.transport
    send = transport.send
    sent: list[list[str]] = []

    def recording(batch: BatchRequest) -> BatchResponse:
        sent.append([type(r).__name__ for r in batch.requests])
        return send(batch)

    try:
        session.execute("INSERT INTO t VALUES (1, 'warm'), (101, 'the'), (201, 'lease')")
        transport.send = recording  # type: ignore[method-assign]
        tag = session.execute("INSERT INTO t VALUES (2, 'a'), (102, 'b'), (202, 'c')").tag
        assert tag == "INSERT 0 3"
    finally:
        transport.send = send  # type: ignore[method-assign]
        session.close()
    # the transaction's batches (not the descriptor lease's): three ranges' intents, the
    # record with the first range's, then the commit
    mine = [names for names in sent if "ConditionalPut" in names or names == ["EndTxn"]]
    assert mine == [
        ["HeartbeatTxn", "ConditionalPut"],
        ["ConditionalPut"],
        ["ConditionalPut"],
        ["EndTxn"],
    ]
    assert db.sql("SELECT count(*) FROM t").rows == [(6,)]
