"""SQL cursors in a session (feedkv.sql.cursors), as CockroachDB has them: forward-only
motion with every FETCH and MOVE form it takes, insensitive reads at the transaction's
timestamp, rows read as FETCH asks, the cursors' lifetime (COMMIT, ROLLBACK, ROLLBACK
TO SAVEPOINT, CLOSE, WITH HOLD) and its errors."""

from __future__ import annotations

import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from feedkv import DB
from feedkv.errors import SQLError
from feedkv.sql.cursors import Cursor
from feedkv.sql.session import Session

NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


@pytest.fixture
def session(db: DB) -> Session:
    db.sql("CREATE TABLE t (id INT PRIMARY KEY, v STRING)")
    db.sql("INSERT INTO t SELECT i, 'v' || i::STRING FROM generate_series(1, 10) AS g(i)")
    return db.session()


def ids(session: Session, text: str) -> list[int]:
    return [row[0] for row in session.execute(text)]


def code_of(session: Session, text: str) -> str:
    with pytest.raises(SQLError) as raised:
        session.execute(text)
    return raised.value.code


def test_fetch_and_move_step_forward_as_cockroachdb(session: Session) -> None:
    session.execute("BEGIN")
    assert session.execute("DECLARE c CURSOR FOR SELECT id FROM t").tag == "DECLARE CURSOR"
    fetched = session.execute("FETCH 2 FROM c")
    assert (fetched.columns, fetched.rows, fetched.tag) == (("id",), [(1,), (2,)], "FETCH 2")
    assert ids(session, "FETCH NEXT c") == [3]
    assert ids(session, "FETCH FORWARD c") == [4]
    assert session.execute("MOVE 2 IN c").tag == "MOVE 2"
    assert ids(session, "FETCH RELATIVE 0 c") == [6]  # the current row again
    assert ids(session, "FETCH RELATIVE 2 c") == [8]
    assert ids(session, "FETCH ABSOLUTE 8 c") == [8]
    assert ids(session, "FETCH ABSOLUTE 9 c") == [9]
    assert ids(session, "FETCH 0 c") == []  # as CockroachDB: nothing
    assert ids(session, "FETCH FORWARD ALL c") == [10]
    assert ids(session, "FETCH ALL c") == []
    assert session.execute("MOVE ALL c").tag == "MOVE 0"
    assert ids(session, "FETCH ABSOLUTE 20 c") == []
    session.execute("COMMIT")


def test_first_and_move_absolute(session: Session) -> None:
    session.execute("BEGIN")
    session.execute("DECLARE c CURSOR FOR SELECT id FROM t WHERE id > 4")
    assert ids(session, "FETCH FIRST c") == [5]
    assert ids(session, "FETCH FIRST c") == [5]  # on the first row still
    assert session.execute("MOVE ABSOLUTE 3 c").tag == "MOVE 1"
    assert ids(session, "FETCH NEXT c") == [8]
    assert session.execute("MOVE RELATIVE 5 c").tag == "MOVE 0"  # past the last row
    assert ids(session, "FETCH 1 c") == []
    session.execute("COMMIT")


@pytest.mark.parametrize(
    "motion",
    ["PRIOR", "BACKWARD", "BACKWARD 2", "BACKWARD ALL", "LAST", "-1", "RELATIVE -1", "FIRST",
     "ABSOLUTE 1", "ABSOLUTE -1", "FORWARD -2"],
)  # fmt: skip
def test_backward_motion_is_refused_with_55000(session: Session, motion: str) -> None:
    session.execute("BEGIN")
    session.execute("DECLARE c CURSOR FOR SELECT id FROM t")
    session.execute("MOVE 2 c")
    for verb in ("FETCH", "MOVE"):
        assert code_of(session, f"{verb} {motion} c") == "55000"
        assert code_of(session, "FETCH 1 c") == "25P02"  # the error aborted the transaction
        session.execute("ROLLBACK")
        session.execute("BEGIN")
        session.execute("DECLARE c CURSOR FOR SELECT id FROM t")
        session.execute("MOVE 2 c")
    session.execute("ROLLBACK")


def test_a_cursor_reads_what_the_transaction_saw_when_it_was_declared(
    db: DB, session: Session
) -> None:
    session.execute("BEGIN")
    session.execute("INSERT INTO t VALUES (0, 'before')")
    session.execute("DECLARE c CURSOR FOR SELECT id, v FROM t")
    session.execute("INSERT INTO t VALUES (11, 'after')")
    session.execute("UPDATE t SET v = 'changed' WHERE id = 5")
    db.sql("INSERT INTO t VALUES (12, 'other transaction')")
    rows = session.execute("FETCH ALL c").rows
    assert [r[0] for r in rows] == list(range(0, 11))
    assert dict(rows)[5] == "v5"
    assert ids(session, "SELECT id FROM t WHERE id >= 11") == [11]  # the statements see it
    session.execute("COMMIT")


@pytest.mark.parametrize("order", ["", "ORDER BY id", "ORDER BY t.id ASC", "ORDER BY x.id"])
def test_rows_are_computed_as_fetch_asks_for_them(session: Session, order: str) -> None:
    session.execute("BEGIN")
    alias = "x" if "x." in order else ""
    session.execute(f"DECLARE c CURSOR FOR SELECT 10 / (id - 6) FROM t {alias} {order}")
    assert len(session.execute("FETCH 5 c").rows) == 5  # the row that divides by 0 is next
    assert code_of(session, "FETCH 1 c") == "22012"
    session.execute("ROLLBACK")


@pytest.mark.parametrize("order", ["ORDER BY v", "ORDER BY id DESC", "ORDER BY 1"])
def test_a_query_in_another_order_runs_whole_when_declared(session: Session, order: str) -> None:
    session.execute("BEGIN")
    assert code_of(session, f"DECLARE c CURSOR FOR SELECT 10 / (id - 6) FROM t {order}") == "22012"
    session.execute("ROLLBACK")


def test_queries_that_read_everything_first_still_fetch_in_order(session: Session) -> None:
    session.execute("BEGIN")
    session.execute(
        "DECLARE c CURSOR FOR SELECT v, count(*) FROM t WHERE id < 4 GROUP BY v ORDER BY v DESC"
    )
    assert session.execute("FETCH 2 c").rows == [("v3", 1), ("v2", 1)]
    session.execute("DECLARE d CURSOR FOR SELECT id FROM t ORDER BY id DESC LIMIT 3 OFFSET 1")
    assert ids(session, "FETCH ALL d") == [9, 8, 7]
    session.execute("DECLARE e CURSOR FOR SELECT id FROM t LIMIT 2 OFFSET 7")
    assert ids(session, "FETCH ALL e") == [8, 9]
    session.execute("DECLARE f CURSOR FOR SELECT id FROM t WHERE v = $1", "v4")
    assert ids(session, "FETCH ALL f") == [4]
    session.execute("COMMIT")


def test_cursors_end_with_their_transaction_and_with_close(session: Session) -> None:
    for end in ("COMMIT", "ROLLBACK"):
        session.execute("BEGIN")
        session.execute("DECLARE c CURSOR FOR SELECT id FROM t")
        session.execute(end)
        session.execute("BEGIN")
        assert code_of(session, "FETCH 1 c") == "34000"
        session.execute("ROLLBACK")
    session.execute("BEGIN")
    session.execute("DECLARE a CURSOR FOR SELECT 1")
    session.execute("DECLARE b CURSOR FOR SELECT 2")
    assert session.execute("CLOSE a").tag == "CLOSE"
    assert ids(session, "FETCH 1 b") == [2]
    session.execute("CLOSE ALL")
    assert code_of(session, "CLOSE b") == "34000"
    session.execute("ROLLBACK")


def test_rollback_to_a_savepoint_closes_the_cursors_declared_after_it(session: Session) -> None:
    session.execute("BEGIN")
    session.execute("DECLARE before CURSOR FOR SELECT id FROM t")
    session.execute("SAVEPOINT s")
    session.execute("DECLARE after CURSOR FOR SELECT id FROM t")
    assert ids(session, "FETCH 2 before") == [1, 2]
    session.execute("ROLLBACK TO SAVEPOINT s")
    assert ids(session, "FETCH 1 before") == [3]  # its position is not rolled back
    assert code_of(session, "FETCH 1 after") == "34000"
    session.execute("ROLLBACK")


def test_a_held_cursor_outlives_its_commit_but_not_its_rollback(session: Session) -> None:
    session.execute("BEGIN")
    session.execute("DECLARE h CURSOR WITH HOLD FOR SELECT id FROM t")
    assert ids(session, "FETCH 3 h") == [1, 2, 3]
    session.execute("COMMIT")
    session.execute("INSERT INTO t VALUES (11, 'late')")
    assert ids(session, "FETCH 2 h") == [4, 5]  # outside a transaction too
    session.execute("BEGIN")
    session.execute("DECLARE gone CURSOR WITH HOLD FOR SELECT id FROM t")
    assert ids(session, "FETCH 1 h") == [6]
    session.execute("ROLLBACK")
    assert ids(session, "FETCH ALL h") == [7, 8, 9, 10]  # an earlier commit's: kept
    assert code_of(session, "FETCH 1 gone") == "34000"
    session.execute("DECLARE now CURSOR WITH HOLD FOR SELECT count(*) FROM t")
    assert ids(session, "FETCH ALL now") == [11]
    session.execute("CLOSE ALL")
    assert code_of(session, "FETCH 1 now") == "34000"


def test_a_held_cursor_that_fails_when_read_at_commit_rolls_back(session: Session) -> None:
    session.execute("BEGIN")
    session.execute("INSERT INTO t VALUES (20, 'rolled back')")
    session.execute("DECLARE h CURSOR WITH HOLD FOR SELECT 1 / (id - 8) FROM t")
    assert code_of(session, "COMMIT") == "22012"
    assert not session.in_transaction
    assert ids(session, "SELECT count(*) FROM t WHERE id = 20") == [0]
    assert code_of(session, "FETCH 1 h") == "34000"


def test_declare_errors_are_cockroachdbs(session: Session) -> None:
    assert code_of(session, "DECLARE c CURSOR FOR SELECT 1") == "25P01"
    assert code_of(session, "FETCH 1 c") == "34000"
    assert code_of(session, "CLOSE c") == "34000"
    session.execute("BEGIN")
    for text, code, message in [
        ("DECLARE c SCROLL CURSOR FOR SELECT 1", "0A000", "unimplemented: DECLARE SCROLL CURSOR"),
        ("DECLARE c BINARY CURSOR FOR SELECT 1", "0A000", "unimplemented: DECLARE BINARY CURSOR"),
        ("DECLARE c CURSOR FOR SELECT * FROM nope", "42P01", 'relation "nope" does not exist'),
    ]:
        with pytest.raises(SQLError) as raised:
            session.execute(text)
        assert (raised.value.code, raised.value.message) == (code, message)
        session.execute("ROLLBACK")
        session.execute("BEGIN")
    held_lock = "DECLARE c CURSOR WITH HOLD FOR SELECT id FROM t FOR UPDATE"
    with pytest.raises(SQLError) as raised:
        session.execute(held_lock)
    error = raised.value
    assert (error.code, error.message, error.detail) == (
        "0A000",
        "DECLARE CURSOR WITH HOLD must not contain locking",
        "Holdable cursors must be READ ONLY.",
    )
    session.execute("ROLLBACK")
    assert code_of(session, held_lock) == "0A000"  # outside a transaction too
    session.execute("BEGIN")
    session.execute("DECLARE c NO SCROLL CURSOR WITHOUT HOLD FOR SELECT 1")
    assert code_of(session, "DECLARE c CURSOR FOR SELECT 2") == "42P03"
    session.execute("ROLLBACK")
    session.execute("BEGIN")
    session.execute("DECLARE c CURSOR FOR SELECT 1")
    assert code_of(session, "CREATE TABLE u (a INT PRIMARY KEY)") == "0A000"
    session.execute("ROLLBACK")


def test_fetch_is_described_with_the_cursors_columns(session: Session) -> None:
    session.execute("BEGIN")
    session.execute("DECLARE c CURSOR FOR SELECT id, v AS name FROM t")
    described = session.describe("FETCH 3 FROM c")
    assert [(name, str(ctype)) for name, ctype in described.columns or ()] == [
        ("id", "INT8"),
        ("name", "STRING"),
    ]
    assert session.describe("MOVE 3 c").columns == ()
    assert session.describe("CLOSE c").columns == ()
    declared = session.describe("DECLARE d CURSOR FOR SELECT v FROM t WHERE id = $1")
    assert declared.columns == () and [str(p) for p in declared.params] == ["INT8"]
    session.execute("ROLLBACK")


def test_a_cursor_pages_through_a_node_over_grpc_as_in_process(any_db: DB) -> None:
    any_db.sql("CREATE TABLE n (id INT PRIMARY KEY)")
    any_db.sql("INSERT INTO n SELECT i FROM generate_series(1, 3000) AS g(i)")
    session = any_db.session()
    session.execute("BEGIN")
    session.execute("DECLARE c CURSOR FOR SELECT id FROM n WHERE id % 2 = 0")
    session.execute("INSERT INTO n VALUES (3002)")
    pages = [ids(session, "FETCH 700 c") for _ in range(3)]
    assert [len(page) for page in pages] == [700, 700, 100]
    assert [i for page in pages for i in page] == list(range(2, 3001, 2))
    session.execute("COMMIT")


def _model(rows: list[int], pos: int, kind: str, count: int) -> tuple[list[int], int] | None:
    """PostgreSQL's positions restated for a forward-only cursor over ``rows``: what a
    FETCH returns and where it leaves the cursor (None: a backward motion, refused)."""
    end = len(rows) + 1  # after the last row
    if kind == "count" or kind == "all":
        if count < 0:
            return None
        taken = rows[pos:] if kind == "all" else rows[pos : pos + count]
        moved = end if kind == "all" or len(taken) < count else pos + count
        return taken, moved
    if kind == "first":
        kind, count = "absolute", 1
    target = pos + count if kind == "relative" else count
    if count < 0 or target < pos or (kind == "absolute" and pos > count):
        return None
    if target == 0:
        return [], 0
    if target <= len(rows):
        return [rows[target - 1]], target
    return [], end


_MOTIONS = st.tuples(
    st.sampled_from(["count", "all", "first", "absolute", "relative"]),
    st.integers(min_value=-2, max_value=7),
)


@settings(max_examples=300, deadline=None)
@given(size=st.integers(min_value=0, max_value=6), motions=st.lists(_MOTIONS, max_size=8))
def test_motion_follows_postgresqls_positions_forward(
    size: int, motions: list[tuple[str, int]]
) -> None:
    rows = list(range(1, size + 1))
    cursor = Cursor("c", "q", ("n",), (None,), iter([(n,) for n in rows]), False, NOW)
    pos = 0
    for kind, given_count in motions:
        count = {"first": 1, "all": 0}.get(kind, given_count)  # as the parser gives them
        expected = _model(rows, pos, kind, count)
        if expected is None:
            with pytest.raises(SQLError) as raised:
                cursor.motion(kind, count)
            assert raised.value.code == "55000"
            continue
        assert [row[0] for row in cursor.motion(kind, count)] == expected[0]
        pos = expected[1]
        assert cursor.position == pos
