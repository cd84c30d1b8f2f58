"""Changefeeds end to end on a real node: sinkless feeds through ``db.sql``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from feedkv import DB
from feedkv.changefeed.changefeed import ChangefeedError
from feedkv.changefeed.sinkless import FeedResult
from feedkv.errors import SQLError
from feedkv.util.hlc import Timestamp

DEADLINE = 30.0


def feed(db: DB, statement: str) -> FeedResult:
    result = db.sql(statement)
    assert isinstance(result, FeedResult)
    return result


def rows_until(result: FeedResult, done: Any, *, limit: int = 2000) -> list[tuple[Any, Any, Any]]:
    """Rows of ``result`` until ``done(rows)`` is true (each row waits up to DEADLINE)."""
    rows: list[tuple[Any, Any, Any]] = []
    while not done(rows):
        row = result.poll(DEADLINE)
        assert row is not None, f"the changefeed ended early after {rows}"
        rows.append(row)
        assert len(rows) < limit
    return rows


def data(rows: list[tuple[Any, Any, Any]]) -> list[tuple[str, Any, dict[str, Any] | None]]:
    """(topic, key, value) of the row messages, JSON decoded; resolved markers dropped."""
    return [
        (t, json.loads(k), None if v is None else json.loads(v))
        for t, k, v in rows
        if t is not None
    ]


def resolved_of(row: tuple[Any, Any, Any]) -> Timestamp | None:
    if row[0] is not None:
        return None
    return Timestamp.parse(json.loads(row[2])["resolved"])


def count(n: int) -> Any:
    return lambda rows: len([r for r in rows if r[0] is not None]) >= n


def resolved_past(ts: Timestamp) -> Any:
    return lambda rows: bool(rows) and (resolved_of(rows[-1]) or Timestamp(0, 0)) >= ts


FAST = "resolved='0s', min_checkpoint_frequency='0s'"


@pytest.fixture
def table(db: DB) -> DB:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    db.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b')")
    return db


def test_initial_scan_then_every_change_in_the_wrapped_envelope(table: DB) -> None:
    db = table
    result = feed(db, f"EXPERIMENTAL CHANGEFEED FOR t WITH updated, diff, {FAST}")
    scanned = rows_until(result, count(2))
    assert [(k, v["after"], v["before"]) for _t, k, v in data(scanned)] == [
        ([1], {"k": 1, "v": "a"}, None),
        ([2], {"k": 2, "v": "b"}, None),
    ]
    scan_ts = {v["updated"] for _t, _k, v in data(scanned)}
    assert len(scan_ts) == 1  # one consistent scan timestamp
    db.sql("UPDATE t SET v = 'c' WHERE k = 1")
    db.sql("DELETE FROM t WHERE k = 2")
    changes = data(rows_until(result, count(2)))
    result.close()
    assert [(t, k, v["after"], v["before"]) for t, k, v in changes] == [
        ("t", [1], {"k": 1, "v": "c"}, {"k": 1, "v": "a"}),
        ("t", [2], None, {"k": 2, "v": "b"}),
    ]
    assert Timestamp.parse(changes[0][2]["updated"]) > Timestamp.parse(scan_ts.pop())


def test_a_resolved_marker_follows_every_row_it_covers(table: DB) -> None:
    db = table
    result = feed(db, f"EXPERIMENTAL CHANGEFEED FOR t WITH updated, {FAST}")
    for i in range(3, 40):
        db.sql("INSERT INTO t VALUES ($1, 'x')", i)
    last = db.now()
    rows = rows_until(result, resolved_past(last))
    result.close()
    resolved = Timestamp(0, 0)
    seen: set[tuple[str, str]] = set()
    for row in rows:
        ts = resolved_of(row)
        if ts is not None:
            assert ts >= resolved
            resolved = ts
            continue
        updated = json.loads(row[2])["updated"]
        assert Timestamp.parse(updated) > resolved or (row[1], updated) in seen
        seen.add((row[1], updated))
    assert {json.loads(k)[0] for _t, k, _v in rows if _t is not None} == set(range(1, 40))


def test_cursor_starts_after_it_without_a_scan(table: DB) -> None:
    db = table
    cursor = db.sql("SELECT cluster_logical_timestamp()").rows[0][0]
    db.sql("INSERT INTO t VALUES (3, 'c')")
    result = feed(db, f"EXPERIMENTAL CHANGEFEED FOR t WITH cursor='{cursor}'")
    (row,) = data(rows_until(result, count(1)))
    result.close()
    assert row == ("t", [3], {"after": {"k": 3, "v": "c"}})


def test_initial_scan_only_ends_after_the_scan(table: DB) -> None:
    result = feed(table, "EXPERIMENTAL CHANGEFEED FOR t WITH initial_scan='only'")
    rows = list(result)
    assert [k for _t, k, _v in data(rows)] == [[1], [2]]


def test_initial_scan_only_in_csv_streams_each_row_as_a_csv_line(table: DB) -> None:
    """As CockroachDB's CSV encoder: no key, the value one line without its line end
    (the rows were lost, NULL values with their keys, before)."""
    table.sql("INSERT INTO t VALUES (3, 'x, \"y\"')")
    result = feed(table, "EXPERIMENTAL CHANGEFEED FOR t WITH format=csv, initial_scan='only'")
    assert list(result) == [("t", None, "1,a"), ("t", None, "2,b"), ("t", None, '3,"x, ""y"""')]


def test_end_time_ends_the_feed_with_nothing_after_it(table: DB) -> None:
    db = table
    start = db.sql("SELECT cluster_logical_timestamp()").rows[0][0]
    db.sql("INSERT INTO t VALUES (3, 'c')")
    end = db.sql("SELECT cluster_logical_timestamp()").rows[0][0]
    db.sql("INSERT INTO t VALUES (4, 'd')")
    result = feed(
        db,
        f"EXPERIMENTAL CHANGEFEED FOR t WITH cursor='{start}', initial_scan='yes', "
        f"end_time='{end}', {FAST}",
    )
    rows = list(result)
    assert sorted(k[0] for _t, k, _v in data(rows)) == [1, 2, 3]
    assert resolved_of(rows[-1]) == Timestamp.parse(str(end))


def test_envelopes_and_metadata_options(table: DB) -> None:
    db = table

    def first(options: str) -> tuple[Any, Any, Any]:
        # NB: a scan at the cursor, and an end (initial_scan='only' refuses updated and
        # mvcc_timestamp, as CockroachDB)
        since, end = db.now(), db.now()
        result = feed(
            db,
            f"EXPERIMENTAL CHANGEFEED FOR t WITH cursor='{since}', initial_scan='yes', "
            f"end_time='{end}', {options}",
        )
        rows = [r for r in result if r[0] is not None]
        return rows[0]

    _t, key, value = first("envelope=bare, updated, key_in_value")
    bare = json.loads(value)
    assert bare["k"] == 1 and bare["v"] == "a" and set(bare["__crdb__"]) == {"key", "updated"}
    assert bare["__crdb__"]["key"] == [1]
    _t, _key, value = first("envelope=row")
    assert json.loads(value) == {"k": 1, "v": "a"}
    _t, key, value = first("envelope=key_only")
    assert (json.loads(key), value) == ([1], None)
    topic, _key, value = first("full_table_name, topic_in_value, key_in_value, mvcc_timestamp")
    wrapped = json.loads(value)
    assert topic == "defaultdb.public.t" and wrapped["topic"] == "defaultdb.public.t"
    assert wrapped["key"] == [1] and "mvcc_timestamp" in wrapped


def test_every_type_in_cockroachdb_json_form(db: DB) -> None:
    db.sql(
        "CREATE TABLE types (k INT PRIMARY KEY, f FLOAT, d DECIMAL, s STRING, b BYTES, "
        "ok BOOL, day DATE, at TIMESTAMP, atz TIMESTAMPTZ, u UUID, j JSONB)"
    )
    db.sql(
        "INSERT INTO types VALUES (1, 1.5, 12.50, 'hé', x'01ff', true, '2024-05-01', "
        "'2024-05-01 10:00:00.5', '2024-05-01 10:00:00+02', "
        "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{\"x\": [1, null]}'), "
        "(2, 'NaN', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)"
    )
    result = feed(db, "EXPERIMENTAL CHANGEFEED FOR types WITH initial_scan='only'")
    (_t1, _k1, one), (_t2, _k2, two) = list(result)
    assert '"d": 12.50' in one  # exact digits, a JSON number
    after = json.loads(one)["after"]
    assert after == {
        "k": 1,
        "f": 1.5,
        "d": 12.5,
        "s": "hé",
        "b": "\\x01ff",
        "ok": True,
        "day": "2024-05-01",
        "at": "2024-05-01T10:00:00.5",  # no trailing zeros, as CockroachDB
        "atz": "2024-05-01T08:00:00Z",
        "u": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
        "j": {"x": [1, None]},
    }
    assert json.loads(two)["after"]["f"] == "NaN"


def test_infinite_timestamps_are_written_as_the_words(db: DB) -> None:
    db.sql("CREATE TABLE ends (k INT PRIMARY KEY, at TIMESTAMP, atz TIMESTAMPTZ)")
    db.sql(
        "INSERT INTO ends VALUES (1, 'infinity', '-infinity'), "
        "(2, '0001-01-01 00:00:00', '9999-12-31 23:59:59.999999+00')"
    )
    result = feed(db, "EXPERIMENTAL CHANGEFEED FOR ends WITH initial_scan='only'")
    values = [json.loads(value)["after"] for _t, _k, value in result]
    # NB: the earliest and latest real timestamps are no infinities
    assert values == [
        {"k": 1, "at": "infinity", "atz": "-infinity"},
        {"k": 2, "at": "0001-01-01T00:00:00", "atz": "9999-12-31T23:59:59.999999Z"},
    ]


def test_column_families_merge_into_whole_rows(db: DB) -> None:
    db.sql(
        "CREATE TABLE fam (k INT PRIMARY KEY, a STRING, b STRING, FAMILY f1 (k, a), FAMILY f2 (b))"
    )
    db.sql("INSERT INTO fam VALUES (1, 'a1', 'b1')")
    result = feed(db, f"EXPERIMENTAL CHANGEFEED FOR fam WITH diff, {FAST}")
    rows_until(result, count(1))
    db.sql("UPDATE fam SET b = 'b2' WHERE k = 1")
    db.sql("UPDATE fam SET a = 'a2', b = 'b3' WHERE k = 1")  # both families, one row change
    db.sql("DELETE FROM fam WHERE k = 1")
    now = db.now()
    rows = data(rows_until(result, resolved_past(now)))
    result.close()
    assert [(v["after"], v["before"]) for _t, _k, v in rows] == [
        ({"k": 1, "a": "a1", "b": "b2"}, {"k": 1, "a": "a1", "b": "b1"}),
        ({"k": 1, "a": "a2", "b": "b3"}, {"k": 1, "a": "a1", "b": "b2"}),
        (None, {"k": 1, "a": "a2", "b": "b3"}),
    ]


def test_an_update_that_changes_nothing_is_still_a_change(db: DB) -> None:
    # As in CockroachDB and PostgreSQL: an assignment writes a new version of the
    # families it names (and only those), so the feed sees the UPDATE and UPSERT.
    db.sql(
        "CREATE TABLE fam (k INT PRIMARY KEY, a STRING, b STRING, FAMILY f1 (k, a), FAMILY f2 (b))"
    )
    db.sql("INSERT INTO fam VALUES (1, 'a1', 'b1')")
    result = feed(
        db, f"EXPERIMENTAL CHANGEFEED FOR fam WITH split_column_families, updated, {FAST}"
    )
    rows_until(result, count(2))
    db.sql("UPDATE fam SET b = 'b1' WHERE k = 1")
    db.sql("UPSERT INTO fam (k, a) VALUES (1, 'a1')")
    now = db.now()
    rows = data(rows_until(result, resolved_past(now)))
    result.close()
    assert [(t, v["after"]) for t, _k, v in rows] == [
        ("fam.f2", {"k": 1, "b": "b1"}),
        ("fam.f1", {"k": 1, "a": "a1"}),
    ]


def test_split_column_families_and_family_targets(db: DB) -> None:
    db.sql(
        "CREATE TABLE fam (k INT PRIMARY KEY, a STRING, b STRING, FAMILY f1 (k, a), FAMILY f2 (b))"
    )
    db.sql("INSERT INTO fam VALUES (1, 'a1', 'b1')")
    result = feed(
        db, "EXPERIMENTAL CHANGEFEED FOR fam WITH split_column_families, initial_scan='only'"
    )
    assert sorted((t, json.dumps(v["after"])) for t, _k, v in data(list(result))) == [
        ("fam.f1", json.dumps({"a": "a1", "k": 1})),  # keys sorted, as CockroachDB
        ("fam.f2", json.dumps({"b": "b1", "k": 1})),
    ]
    result = feed(db, "EXPERIMENTAL CHANGEFEED FOR fam FAMILY f2 WITH initial_scan='only'")
    assert [(t, v["after"]) for t, _k, v in data(list(result))] == [("fam.f2", {"k": 1, "b": "b1"})]


def test_a_table_of_one_family_keeps_its_topic_beside_split_families(table: DB) -> None:
    """CockroachDB splits only a table of several families (its target is
    ``EACH_FAMILY``); a table of one family beside it, under ``split_column_families`` or
    beside a ``FAMILY`` target, keeps its table's topic (``t``, not ``t.primary``)."""
    db = table
    db.sql(
        "CREATE TABLE fam (k INT PRIMARY KEY, a STRING, b STRING, FAMILY f1 (k, a), FAMILY f2 (b))"
    )
    db.sql("INSERT INTO fam VALUES (1, 'a1', 'b1')")
    split = "EXPERIMENTAL CHANGEFEED FOR fam, t WITH split_column_families, initial_scan='only'"
    assert sorted((topic, k) for topic, k, _v in data(list(feed(db, split)))) == [
        ("fam.f1", [1]),
        ("fam.f2", [1]),
        ("t", [1]),
        ("t", [2]),
    ]
    family = "EXPERIMENTAL CHANGEFEED FOR fam FAMILY f2, t WITH initial_scan='only'"
    assert sorted((topic, k) for topic, k, _v in data(list(feed(db, family)))) == [
        ("fam.f2", [1]),
        ("t", [1]),
        ("t", [2]),
    ]


def test_backfill_re_emits_rows_at_the_schema_change(table: DB) -> None:
    db = table
    result = feed(db, f"EXPERIMENTAL CHANGEFEED FOR t WITH updated, {FAST}")
    rows_until(result, count(2))
    db.sql("ALTER TABLE t ADD COLUMN n INT DEFAULT 7")
    db.sql("INSERT INTO t VALUES (3, 'c', 8)")
    rows = data(rows_until(result, count(3)))
    result.close()
    assert [v["after"] for _t, _k, v in rows] == [
        {"k": 1, "v": "a", "n": 7},
        {"k": 2, "v": "b", "n": 7},
        {"k": 3, "v": "c", "n": 8},
    ]
    assert rows[0][2]["updated"] == rows[1][2]["updated"]  # at the change's timestamp


def test_a_backfill_from_a_cursor_follows_every_older_version_of_the_rows(table: DB) -> None:
    """From a cursor before a column change, with the store busy elsewhere (so a range of
    ``t`` holds far fewer versions than the store changed: its history could be read by
    key), each row's older versions come before the backfill re-emits it at the change."""
    db = table
    db.sql("CREATE TABLE busy (k INT PRIMARY KEY, v STRING)")
    cursor = db.sql("SELECT cluster_logical_timestamp()").rows[0][0]
    db.sql("UPDATE t SET v = 'a1' WHERE k = 1")
    db.sql("UPDATE t SET v = 'a2' WHERE k = 1")
    db.sql("ALTER TABLE t ADD COLUMN n INT")  # rewrites no row: the backfill does
    db.sql("UPDATE t SET v = 'b1' WHERE k = 2")
    for i in range(0, 200, 50):
        db.sql("INSERT INTO busy VALUES " + ", ".join(f"({j}, 'x')" for j in range(i, i + 50)))
    result = feed(
        db,
        f"EXPERIMENTAL CHANGEFEED FOR t WITH updated, cursor='{cursor}', "
        f"schema_change_events='column_changes', {FAST}",
    )
    rows = data(rows_until(result, count(5)))
    result.close()
    assert [(k, v["after"]["v"]) for _t, k, v in rows] == [
        ([1], "a1"),
        ([1], "a2"),
        ([1], "a2"),  # the backfill, at the change
        ([2], "b"),
        ([2], "b1"),
    ]


def test_nobackfill_leaves_rewritten_rows_out(table: DB) -> None:
    db = table
    result = feed(
        db, f"EXPERIMENTAL CHANGEFEED FOR t WITH schema_change_policy='nobackfill', {FAST}"
    )
    rows_until(result, count(2))
    db.sql("ALTER TABLE t ADD COLUMN n INT DEFAULT 7")
    db.sql("INSERT INTO t VALUES (3, 'c', 8)")
    rows = data(rows_until(result, count(1)))
    result.close()
    assert [v["after"] for _t, _k, v in rows] == [{"k": 3, "v": "c", "n": 8}]


def test_stop_policy_ends_resolved_just_before_the_change(table: DB) -> None:
    db = table
    result = feed(db, f"EXPERIMENTAL CHANGEFEED FOR t WITH schema_change_policy='stop', {FAST}")
    rows_until(result, count(2))
    db.sql("INSERT INTO t VALUES (3, 'c')")
    db.sql("ALTER TABLE t ADD COLUMN n INT DEFAULT 7")
    changed_at = db.now()
    db.sql("INSERT INTO t VALUES (4, 'd', 8)")
    rows: list[tuple[Any, Any, Any]] = []
    with pytest.raises(ChangefeedError, match="schema change occurred at") as raised:
        while True:
            row = result.poll(DEADLINE)
            assert row is not None
            rows.append(row)
    assert [k for _t, k, _v in data(rows)] == [[3]]
    last = resolved_of(rows[-1])
    assert last is not None and last < changed_at
    assert "added column(s) n" in str(raised.value)


def test_a_dropped_table_ends_the_feed(table: DB) -> None:
    db = table
    result = feed(db, f"EXPERIMENTAL CHANGEFEED FOR t WITH {FAST}")
    rows_until(result, count(2))
    db.sql("DROP TABLE t")
    with pytest.raises(ChangefeedError, match='"t" was dropped at'):
        while result.poll(DEADLINE) is not None:
            pass


@pytest.mark.parametrize(
    ("statement", "code", "message"),
    [
        ("EXPERIMENTAL CHANGEFEED FOR nope", "42P01", "nope"),
        ("EXPERIMENTAL CHANGEFEED FOR t WITH envelop='bare'", "22023", "did you mean 'envelope'"),
        ("EXPERIMENTAL CHANGEFEED FOR t WITH envelope='wrappd'", "22023", "did you mean 'wrapped'"),
        ("EXPERIMENTAL CHANGEFEED FOR t WITH updated='yes'", "22023", "takes no value"),
        ("EXPERIMENTAL CHANGEFEED FOR t WITH resolved='soon'", "22023", "not a duration"),
        ("EXPERIMENTAL CHANGEFEED FOR t WITH resolved='-1s'", "22023", "'-1s' is negative"),
        ("EXPERIMENTAL CHANGEFEED FOR t WITH resolved='999999999h'", "22023", "longest"),
        ("EXPERIMENTAL CHANGEFEED FOR t WITH cursor='99999999999999999999'", "22023", "cursor"),
        ("EXPERIMENTAL CHANGEFEED FOR t WITH format=csv", "22023", "initial_scan='only'"),
        ("EXPERIMENTAL CHANGEFEED FOR t WITH format=avro", "22023", "schema registry"),
        ("EXPERIMENTAL CHANGEFEED FOR t WITH format=parquet", "22023", "file sink"),
        ("EXPERIMENTAL CHANGEFEED FOR t WITH envelope=key_only, diff", "22023", "key_only"),
        ("EXPERIMENTAL CHANGEFEED FOR t WITH cursor='tomorrow'", "22023", "not a timestamp"),
        ("EXPERIMENTAL CHANGEFEED FOR t WITH updated, updated", "22023", "more than once"),
        ("EXPERIMENTAL CHANGEFEED FOR t FAMILY nope", "42704", "nope"),
        ("EXPERIMENTAL CHANGEFEED FOR t, t", "22023", "more than once"),
        (
            "CREATE CHANGEFEED FOR t INTO 'kafak://x:9092'",
            "22023",
            "'kafak' (did you mean kafka://?);",
        ),
        ("CREATE CHANGEFEED FOR t INTO 'nowhere'", "22023", "no scheme"),
        ("CREATE CHANGEFEED FOR t INTO 'file:///tmp/x?file_sise=1'", "22023", "file_size"),
        ("CREATE CHANGEFEED FOR t INTO 'null://' WITH compression=gzip", "22023", "compression"),
        ("CREATE CHANGEFEED FOR t INTO 'kafka://h:1' WITH format=parquet", "22023", "parquet"),
        (
            "CREATE CHANGEFEED FOR t INTO 'webhook-https://h/x' "
            "WITH format=parquet, initial_scan='only'",
            "22023",
            "parquet",
        ),
    ],
)
def test_bad_changefeeds_are_refused_and_create_nothing(
    table: DB, statement: str, code: str, message: str
) -> None:
    with pytest.raises(SQLError) as raised:
        table.sql(statement)
    assert raised.value.code == code
    assert message in raised.value.message
    assert not table.sql("SHOW CHANGEFEED JOBS").rows and not table.changefeeds._sinkless


def test_changefeeds_need_an_admin_and_no_open_transaction(table: DB) -> None:
    db = table
    db.sql("CREATE USER alice")
    with pytest.raises(SQLError) as raised:
        db.session(user="alice").execute("EXPERIMENTAL CHANGEFEED FOR t")
    assert raised.value.code == "42501"
    session = db.session()
    session.execute("BEGIN")
    with pytest.raises(SQLError) as raised:
        session.execute("EXPERIMENTAL CHANGEFEED FOR t")
    assert raised.value.code == "25001"
    session.execute("ROLLBACK")


def test_truncate_of_a_watched_table_ends_the_feed_before_the_truncation(table: DB) -> None:
    """CockroachDB's docs ("Create and Configure Changefeeds", Considerations): TRUNCATE
    causes errors on a changefeed watching the table, and a new changefeed must be
    started. The feed ends resolved up to just before the truncation: the rows it
    emitted stay valid, and the truncation's deletions are not emitted as changes."""
    db = table
    result = feed(db, f"EXPERIMENTAL CHANGEFEED FOR t WITH {FAST}")
    rows_until(result, count(2))
    db.sql("INSERT INTO t VALUES (3, 'c')")
    before = db.now()
    db.sql("TRUNCATE t")
    assert db.sql("SELECT * FROM t").rows == []
    rows: list[tuple[Any, Any, Any]] = []
    with pytest.raises(ChangefeedError, match='"t" was truncated at') as raised:
        while True:
            row = result.poll(DEADLINE)
            assert row is not None
            rows.append(row)
    assert [k for _t, k, v in data(rows)] == [[3]]  # no deletion of 1, 2 or 3
    message = str(raised.value)
    assert "the changefeed ended" in message
    truncated = Timestamp.parse(message.split(" was truncated at ")[1].split(";")[0])
    assert truncated > before
    resolved = [ts for ts in map(resolved_of, rows) if ts is not None]
    assert resolved and all(ts < truncated for ts in resolved)
