"""Named changefeeds (the CDC design's surface beside CockroachDB's job ids): ``CREATE
CHANGEFEED <name>``, ``PAUSE | RESUME | DROP CHANGEFEED <name>``, ``SHOW CREATE
CHANGEFEED``, ``SHOW CHANGEFEED JOB <name>``, ``ALTER CHANGEFEED <name>``, and the
design's envelopes ``none`` and ``diff``; through ``db.sql`` and ``feedkv sql``.

The sink is a ``file://`` directory (one JSON message per line); the thread runner is
at-least-once, so the tests look for every row version, not for exactly-once."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import feedkv
from feedkv import DB
from feedkv.changefeed.sinkless import FeedResult
from feedkv.cli.main import main
from feedkv.errors import SQLError
from feedkv.kv.store import StoreConfig
from feedkv.sql import catalog
from feedkv.sql.row_codec import table_span
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import Timestamp

DEADLINE = 30.0
FAST = "min_checkpoint_frequency='100ms', resolved='100ms'"


def messages(out: Path) -> list[dict[str, Any]]:
    """Every row message written into ``out``, files in name order, lines in order."""
    if not out.exists():
        return []
    paths = [
        p
        for p in out.rglob("*")
        if p.is_file()
        and not p.name.endswith(".tmp")
        and "RESOLVED" not in p.name
        and ".feedkv" not in p.relative_to(out).parts
    ]
    found: list[dict[str, Any]] = []
    for path in sorted(paths, key=lambda p: p.name):
        found.extend(json.loads(line) for line in path.read_text().splitlines())
    return found


def afters(out: Path) -> set[tuple[int, str]]:
    return {(m["after"]["k"], m["after"]["v"]) for m in messages(out) if m["after"]}


def wait_afters(out: Path, expected: set[tuple[int, str]]) -> None:
    wait_until(lambda: expected <= afters(out), timeout_s=DEADLINE, what=f"{expected} in {out}")


def show(db: DB, ref: str | int) -> dict[str, Any]:
    result = db.sql(f"SHOW CHANGEFEED JOB {ref}")
    (row,) = result.rows
    return dict(zip(result.columns, row, strict=True))


def jobs(db: DB) -> list[dict[str, Any]]:
    result = db.sql("SHOW CHANGEFEED JOBS")
    return [dict(zip(result.columns, row, strict=True)) for row in result.rows]


def create_named(db: DB, name: str, out: Path, options: str = FAST) -> int:
    result = db.sql(f"CREATE CHANGEFEED {name} FOR TABLE t INTO 'file://{out}' WITH {options}")
    assert result.columns == ("job_id",)
    (job_id,) = result.rows[0]
    assert isinstance(job_id, int)
    return job_id


def refused(db: DB, statement: str, code: str, message: str) -> None:
    with pytest.raises(SQLError) as raised:
        db.sql(statement)
    assert raised.value.code == code, raised.value.message
    assert message in raised.value.message, raised.value.message


@pytest.fixture
def table(db: DB) -> DB:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    db.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b')")
    return db


def watchers(db: DB, table: str) -> list[int]:
    """The jobs recorded as watching ``table``."""
    snapshot = catalog.Snapshot(db, db.now())
    database = catalog.database_by_name(snapshot, "defaultdb")
    return catalog.changefeed_watchers(
        snapshot, catalog.table_by_name(snapshot, database, table).id
    )


# CREATE CHANGEFEED <name> and SHOW.


def test_a_named_changefeed_is_shown_and_found_by_its_name(table: DB, tmp_path: Path) -> None:
    db = table
    out = tmp_path / "out"
    job_id = create_named(db, "feed_t", out)

    (row,) = jobs(db)
    assert (row["job_id"], row["name"]) == (job_id, "feed_t")
    assert show(db, "feed_t")["job_id"] == job_id
    assert show(db, "defaultdb.feed_t")["job_id"] == job_id
    assert show(db, job_id)["name"] == "feed_t"
    wait_afters(out, {(1, "a"), (2, "b")})


def test_a_name_is_unique_in_its_database_only(table: DB, tmp_path: Path) -> None:
    db = table
    job_id = create_named(db, "feed_t", tmp_path / "a")

    refused(
        db,
        f"CREATE CHANGEFEED feed_t FOR TABLE t INTO 'file://{tmp_path / 'b'}'",
        "42710",
        f"changefeed 'feed_t' already exists in database 'defaultdb' (job {job_id})",
    )
    assert [r["job_id"] for r in jobs(db)] == [job_id]  # nothing was created
    assert not (tmp_path / "b").exists()  # refused before the sink was probed

    db.sql("CREATE DATABASE other")
    db.sql(
        "CREATE CHANGEFEED other.feed_t FOR TABLE defaultdb.t "
        f"INTO 'file://{tmp_path / 'c'}' WITH {FAST}"
    )
    named = {(r["name"], r["job_id"] == job_id) for r in jobs(db)}
    assert named == {("feed_t", True), ("feed_t", False)}
    assert show(db, "other.feed_t")["job_id"] != job_id


def test_job_ids_keep_working_beside_names(table: DB, tmp_path: Path) -> None:
    db = table
    job_id = create_named(db, "feed_t", tmp_path / "out")
    db.sql(f"PAUSE JOB {job_id}")
    assert show(db, "feed_t")["status"] == "paused"
    db.sql(f"ALTER CHANGEFEED {job_id} SET updated")
    db.sql("RESUME CHANGEFEED feed_t")
    assert show(db, job_id)["status"] == "running"
    (unnamed,) = db.sql(f"CREATE CHANGEFEED FOR t INTO 'file://{tmp_path / 'b'}'").rows[0]
    assert show(db, unnamed)["name"] is None


# PAUSE, RESUME and DROP CHANGEFEED <name>.


def test_rows_written_while_paused_by_name_arrive_after_resume(table: DB, tmp_path: Path) -> None:
    db = table
    out = tmp_path / "out"
    create_named(db, "feed_t", out)
    wait_afters(out, {(1, "a"), (2, "b")})

    assert db.sql("PAUSE CHANGEFEED feed_t").tag == "PAUSE JOB"
    assert show(db, "feed_t")["status"] == "paused"  # it returns once the runner stopped
    db.sql("UPSERT INTO t VALUES (3, 'c'), (1, 'a2')")
    db.sql("RESUME CHANGEFEED feed_t")

    assert show(db, "feed_t")["status"] == "running"
    wait_afters(out, {(1, "a"), (2, "b"), (3, "c"), (1, "a2")})


def test_drop_cancels_the_changefeed_and_forgets_it_and_its_name(table: DB, tmp_path: Path) -> None:
    db = table
    out = tmp_path / "out"
    job_id = create_named(db, "feed_t", out)
    wait_afters(out, {(1, "a"), (2, "b")})
    assert watchers(db, "t") == [job_id]

    assert db.sql("DROP CHANGEFEED feed_t").tag == "DROP CHANGEFEED"

    assert jobs(db) == []
    assert db.changefeeds.get(job_id) is None  # its runner stopped
    assert db.changefeeds.record(job_id) is None
    refused(db, "SHOW CHANGEFEED JOB feed_t", "42704", "changefeed 'feed_t' does not exist")
    refused(db, f"SHOW CHANGEFEED JOB {job_id}", "42704", f"job with ID {job_id} does not exist")
    assert watchers(db, "t") == []  # nothing watches t any more
    again = create_named(db, "feed_t", tmp_path / "again")  # the name is free
    assert again != job_id


def test_drop_forgets_a_paused_or_ended_changefeed_too(table: DB, tmp_path: Path) -> None:
    db = table
    create_named(db, "paused", tmp_path / "a")
    db.sql("PAUSE CHANGEFEED paused")
    job_id = create_named(db, "canceled", tmp_path / "b")
    db.sql(f"CANCEL JOB {job_id}")
    db.sql("DROP CHANGEFEED paused")
    db.sql("DROP CHANGEFEED canceled")
    assert jobs(db) == []


@pytest.mark.parametrize(
    ("statement", "code", "message"),
    [
        ("PAUSE CHANGEFEED missing", "42704", "changefeed 'missing' does not exist"),
        ("RESUME CHANGEFEED missing", "42704", "in database 'defaultdb'"),
        ("DROP CHANGEFEED missing", "42704", "changefeed 'missing' does not exist"),
        ("SHOW CREATE CHANGEFEED missing", "42704", "changefeed 'missing' does not exist"),
        ("ALTER CHANGEFEED missing SET updated", "42704", "changefeed 'missing' does not exist"),
        ("PAUSE CHANGEFEED nowhere.feed_t", "3D000", "nowhere"),
        ("DROP CHANGEFEED", "42601", "expected a job id"),
        ("DROP CHANGEFEED feed_t now", "42601", "unexpected input after the changefeed"),
        ("PAUSE CHANGEFEED a.b.c", "42601", "unexpected input after the changefeed"),
        ("SHOW CREATE CHANGEFEED", "42601", "expected a job id"),
        ("CREATE CHANGEFEED feed_t t INTO 'null://'", "42601", "expected FOR TABLE"),
        ("CREATE CHANGEFEED 'f' FOR t INTO 'null://'", "42601", "expected a changefeed name"),
        ("EXPERIMENTAL CHANGEFEED feed_t FOR t", "42601", "a sinkless changefeed has no name"),
    ],
)
def test_bad_named_statements_are_refused(
    table: DB, tmp_path: Path, statement: str, code: str, message: str
) -> None:
    db = table
    job_id = create_named(db, "feed_t", tmp_path / "out")
    refused(db, statement, code, message)
    (row,) = jobs(db)
    assert (row["job_id"], row["name"]) == (job_id, "feed_t")


# SHOW CREATE CHANGEFEED.


def test_show_create_recreates_the_changefeed_with_its_current_options(
    table: DB, tmp_path: Path
) -> None:
    db = table
    out = tmp_path / "out"
    create_named(db, "feed_t", out, options="updated, resolved = '1s'")
    db.sql("PAUSE CHANGEFEED feed_t")
    db.sql("ALTER CHANGEFEED feed_t SET diff UNSET updated")

    result = db.sql("SHOW CREATE CHANGEFEED feed_t")

    assert result.columns == ("changefeed_name", "create_statement")
    ((name, statement),) = result.rows
    assert name == "feed_t"
    assert statement == (
        f"CREATE CHANGEFEED feed_t FOR TABLE defaultdb.public.t INTO 'file://{out}' "
        "WITH OPTIONS (diff, resolved = '1s')"
    )
    assert show(db, "feed_t")["description"] == statement  # the altered job's description
    db.sql("DROP CHANGEFEED feed_t")
    db.sql(statement)  # it recreates the changefeed, by name
    assert db.sql("SHOW CREATE CHANGEFEED feed_t").rows == [(name, statement)]


def test_show_create_redacts_secrets_and_pins_the_cursor(table: DB, s3_endpoint: str) -> None:
    db = table
    # NB: a cursor from before the table was created is refused: let it grow a second old
    made_by = db.now().wall
    wait_until(lambda: db.now().wall - made_by > 10**9, what="the table to be 1 s old")
    cursor = db.sql("SELECT cluster_logical_timestamp()").rows[0][0]
    uri = f"s3://feeds/named?AWS_ACCESS_KEY_ID=id&AWS_SECRET_ACCESS_KEY=s3cr3t&AWS_ENDPOINT={s3_endpoint}"
    db.sql(f"CREATE CHANGEFEED \"Feed\" FOR t INTO '{uri}' WITH cursor = '-1s'")

    ((name, statement),) = db.sql('SHOW CREATE CHANGEFEED "Feed"').rows

    assert name == "Feed"
    assert "s3cr3t" not in statement
    assert statement.startswith('CREATE CHANGEFEED "Feed" FOR TABLE defaultdb.public.t INTO ')
    assert "AWS_SECRET_ACCESS_KEY=redacted" in statement
    pinned = statement.rpartition("cursor = ")[2].strip("'")
    assert pinned != "-1s" and pinned < str(cursor)  # the timestamp '-1s' stood for


def test_show_create_of_an_unnamed_or_query_changefeed(table: DB, tmp_path: Path) -> None:
    db = table
    (job_id,) = db.sql(
        f"CREATE CHANGEFEED INTO 'file://{tmp_path}/q' AS SELECT k FROM t WHERE k > 1"
    ).rows[0]
    ((name, statement),) = db.sql(f"SHOW CREATE CHANGEFEED {job_id}").rows
    assert name is None
    assert (
        statement == f"CREATE CHANGEFEED INTO 'file://{tmp_path}/q' AS SELECT k FROM t WHERE k > 1"
    )


# The design's envelopes.


def feed_rows(db: DB, options: str, changes: list[str], n: int) -> list[tuple[Any, Any]]:
    """The first ``n`` row messages (key, value) of a sinkless feed on ``t`` from now,
    after ``changes`` ran."""
    result = db.sql(f"EXPERIMENTAL CHANGEFEED FOR t WITH cursor = 'now', {options}")
    assert isinstance(result, FeedResult)
    try:
        for change in changes:
            db.sql(change)
        found: list[tuple[Any, Any]] = []
        while len(found) < n:
            row = result.poll(DEADLINE)
            assert row is not None, f"the feed ended after {found}"
            if row[0] is not None:
                found.append((json.loads(row[1]), None if row[2] is None else json.loads(row[2])))
        return found
    finally:
        result.close()


def test_envelope_none_is_the_new_row_only_and_a_tombstone_on_delete(table: DB) -> None:
    rows = feed_rows(
        table,
        "envelope = 'none'",
        ["UPDATE t SET v = 'a2' WHERE k = 1", "DELETE FROM t WHERE k = 2"],
        2,
    )
    assert rows == [([1], {"k": 1, "v": "a2"}), ([2], None)]


def test_envelope_diff_is_the_old_and_the_new_row(table: DB) -> None:
    rows = feed_rows(
        table,
        "envelope = 'diff'",
        [
            "UPDATE t SET v = 'a2' WHERE k = 1",
            "DELETE FROM t WHERE k = 2",
            "INSERT INTO t VALUES (3, 'c')",
        ],
        3,
    )
    assert rows == [
        ([1], {"after": {"k": 1, "v": "a2"}, "before": {"k": 1, "v": "a"}}),
        ([2], {"after": None, "before": {"k": 2, "v": "b"}}),
        ([3], {"after": {"k": 3, "v": "c"}, "before": None}),
    ]


def test_envelope_names_are_checked(table: DB) -> None:
    refused(
        table,
        "EXPERIMENTAL CHANGEFEED FOR t WITH envelope = 'nope'",
        "22023",
        "unknown envelope 'nope'",
    )
    refused(
        table,
        "EXPERIMENTAL CHANGEFEED FOR t WITH envelope = 'none', diff",
        "22023",
        "option diff is only usable with envelope=wrapped",
    )


# feedkv sql.


def cli(where: Path | str, capsys: pytest.CaptureFixture[str], *statements: str) -> list[list[str]]:
    """``feedkv sql --store where`` (a path) or ``--url where`` (a node's URL) ``--format
    csv -e ...``: the CSV lines it printed."""
    place = ["--store", str(where)] if isinstance(where, Path) else ["--url", where]
    args = ["sql", *place, "--format", "csv"]
    for statement in statements:
        args += ["-e", statement]
    code = main(args)
    out, err = capsys.readouterr()
    assert code == 0, err
    return list(csv.reader(io.StringIO(out)))


def served(db: DB) -> str:
    """``db``'s node served on loopback (its jobs run on the thread runner): its URL."""
    assert db.node is not None
    return db.node.serve()


def test_named_changefeeds_from_feedkv_sql(
    db: DB, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store, out = served(db), tmp_path / "out"
    cli(
        store,
        capsys,
        "CREATE TABLE t (k INT PRIMARY KEY, v STRING)",
        "INSERT INTO t VALUES (1, 'a')",
        f"CREATE CHANGEFEED feed_t FOR TABLE t INTO 'file://{out}' WITH envelope = 'diff'",
        "PAUSE CHANGEFEED feed_t",
    )
    printed = cli(store, capsys, "SHOW CREATE CHANGEFEED feed_t")
    assert printed == [
        ["changefeed_name", "create_statement"],
        [
            "feed_t",
            f"CREATE CHANGEFEED feed_t FOR TABLE defaultdb.public.t INTO 'file://{out}' "
            "WITH OPTIONS (envelope = 'diff')",
        ],
    ]
    printed = cli(store, capsys, "SHOW CHANGEFEED JOB feed_t")
    row = dict(zip(printed[0], printed[1], strict=True))
    assert (row["name"], row["status"]) == ("feed_t", "paused")
    cli(store, capsys, "DROP CHANGEFEED feed_t")
    assert cli(store, capsys, "SHOW CHANGEFEED JOBS")[1:] == []


# FOR TABLE t VALUES FROM (a) TO (b).


def now(db: DB) -> Timestamp:
    ts = db.sql("SELECT cluster_logical_timestamp()").rows[0][0]
    return Timestamp.parse(str(ts))


def keys_until_resolved(result: FeedResult, ts: Timestamp) -> list[Any]:
    """The keys of the row messages of ``result`` until a resolved marker at or past
    ``ts`` (every row at or below it has then arrived)."""
    keys: list[Any] = []
    while True:
        row = result.poll(DEADLINE)
        assert row is not None, f"the feed ended after {keys}"
        if row[0] is not None:
            keys.append(json.loads(row[1]))
        elif Timestamp.parse(json.loads(row[2])["resolved"]) >= ts:
            return keys


def test_a_key_range_target_emits_only_the_rows_in_it(db: DB) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    db.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd'), (5, 'e')")
    result = db.sql(
        "EXPERIMENTAL CHANGEFEED FOR TABLE t VALUES FROM (2) TO (4) "
        "WITH resolved = '0s', min_checkpoint_frequency = '0s'"
    )
    assert isinstance(result, FeedResult)
    try:
        assert sorted(keys_until_resolved(result, now(db))) == [[2], [3]]  # the scan
        db.sql("UPDATE t SET v = v || '2'")  # every row, in one transaction
        db.sql("INSERT INTO t VALUES (0, 'z'), (6, 'f')")
        db.sql("DELETE FROM t WHERE k IN (1, 3, 4)")
        assert keys_until_resolved(result, now(db)) == [[2], [3], [3]]
    finally:
        result.close()


def test_composite_keys_bound_as_tuples_or_as_prefixes(db: DB) -> None:
    db.sql("CREATE TABLE c (a INT, b STRING, v INT, PRIMARY KEY (a, b))")
    db.sql(
        "INSERT INTO c VALUES (1, 'a', 0), (1, 'b', 0), (1, 'c', 0), (2, 'a', 0), (2, 'b', 0), "
        "(3, 'a', 0)"
    )

    def scanned(bounds: str) -> list[Any]:
        result = db.sql(f"EXPERIMENTAL CHANGEFEED FOR c {bounds} WITH initial_scan = 'only'")
        assert isinstance(result, FeedResult)
        return sorted(json.loads(key) for table, key, _value in result if table is not None)

    assert scanned("VALUES FROM (1, 'b') TO (2, 'b')") == [[1, "b"], [1, "c"], [2, "a"]]
    assert scanned("VALUES FROM (2) TO (3)") == [[2, "a"], [2, "b"]]
    assert scanned("VALUES FROM (1, 'c') TO (3)") == [[1, "c"], [2, "a"], [2, "b"]]


def test_a_key_range_job_watches_only_its_spans_and_keeps_them(db: DB, tmp_path: Path) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    db.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c'), (7, 'g'), (8, 'h')")
    out = tmp_path / "out"
    db.sql(
        "CREATE CHANGEFEED ranges FOR TABLE t VALUES FROM (2) TO (4), "
        f"TABLE t VALUES FROM (7) TO (8) INTO 'file://{out}' WITH {FAST}"
    )
    job_id = show(db, "ranges")["job_id"]
    job = wait_until(lambda: db.changefeeds.get(job_id), timeout_s=DEADLINE, what="the job")
    whole = table_span(job.spec.targets[0].table_id)
    (low, mid), (high, top) = [(t.span.start, t.span.end) for t in job.spec.targets]
    assert whole.start < low < mid <= high < top < whole.end  # two pieces of the table only
    record = db.changefeeds.record(job_id)
    assert record is not None and [t.bounds for t in record.spec.targets] == [
        t.bounds for t in job.spec.targets
    ]  # kept in the record, for a restart
    wait_afters(out, {(2, "b"), (3, "c"), (7, "g")})

    db.sql("PAUSE CHANGEFEED ranges")
    db.sql("UPSERT INTO t VALUES (1, 'a2'), (3, 'c2'), (4, 'd'), (7, 'g2'), (8, 'h2')")
    db.sql("RESUME CHANGEFEED ranges")
    wait_afters(out, {(2, "b"), (3, "c"), (7, "g"), (3, "c2"), (7, "g2")})
    db.sql("PAUSE CHANGEFEED ranges")
    assert {k for k, _v in afters(out)} == {2, 3, 7}

    ((_name, statement),) = db.sql("SHOW CREATE CHANGEFEED ranges").rows
    assert "FOR TABLE defaultdb.public.t VALUES FROM (2) TO (4), " in statement
    assert "TABLE defaultdb.public.t VALUES FROM (7) TO (8) INTO" in statement


@pytest.mark.parametrize(
    ("bounds", "code", "message"),
    [
        ("VALUES FROM (4) TO (2)", "22023", "VALUES FROM (4) TO (2) of table t watches no row"),
        ("VALUES FROM (2) TO (2)", "22023", "FROM must sort below TO"),
        (
            "VALUES FROM (1, 2) TO (3)",
            "22023",
            "give 1 to 1 values, a prefix of its primary key (k)",
        ),
        ("VALUES FROM () TO (3)", "22023", "VALUES FROM () of table t: give 1 to 1 values"),
        ("VALUES FROM (NULL) TO (3)", "22023", "the value of column k cannot be NULL"),
        ("VALUES FROM ('x') TO (3)", "22P02", ""),
        ("VALUES FROM (1) TO (3), TABLE t VALUES FROM (2) TO (5)", "22023", "ranges overlap"),
        ("VALUES FROM (1) TO (3), TABLE t", "22023", "is a target more than once"),
        ("VALUES FROM 1 TO 3", "42601", "expected a parenthesized list"),
        ("VALUES (1) TO (3)", "42601", "expected VALUES FROM (...) TO (...)"),
        ("VALUES FROM (1)", "42601", "expected TO (...) after VALUES FROM (...)"),
    ],
)
def test_bad_key_ranges_are_refused(db: DB, bounds: str, code: str, message: str) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    refused(db, f"CREATE CHANGEFEED FOR TABLE t {bounds} INTO 'null://'", code, message)
    assert jobs(db) == []


def test_key_ranges_and_design_envelopes_from_feedkv_sql(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    cli(
        store,
        capsys,
        "CREATE TABLE t (k INT PRIMARY KEY, v STRING)",
        "INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c')",
    )
    printed = cli(
        store,
        capsys,
        "EXPERIMENTAL CHANGEFEED FOR TABLE t VALUES FROM (2) TO (3) "
        "WITH initial_scan = 'only', envelope = 'none'",
    )
    assert printed == [["table", "key", "value"], ["t", "[2]", '{"k": 2, "v": "b"}']]


# ALTER CHANGEFEED <name> INTO '<sink>' and SET cursor.


def resolved_marker(out: Path) -> Timestamp | None:
    """The highest resolved marker written into ``out``."""
    markers = [
        Timestamp.parse(json.loads(p.read_text())["resolved"])
        for p in out.rglob("*.RESOLVED")
        if ".feedkv" not in p.relative_to(out).parts
    ]
    return max(markers, default=None)


def wait_resolved(out: Path, ts: Timestamp) -> None:
    """Wait for a resolved marker at or past ``ts``: every row at or below it is in."""

    def past() -> bool:
        marker = resolved_marker(out) if out.exists() else None
        return marker is not None and marker >= ts

    wait_until(past, timeout_s=DEADLINE, what=f"a resolved marker in {out} past {ts}")


def paused_past_scan(db: DB, name: str, out: Path) -> int:
    """A changefeed ``name`` on ``t`` into ``out`` that finished its initial scan and
    recorded a high-water mark past it, then paused."""
    job_id = create_named(db, name, out)

    def past_scan() -> bool:
        job = db.changefeeds.get(job_id)
        return job is not None and job.high_water > job.spec.start

    wait_until(past_scan, timeout_s=DEADLINE, what="the job past its initial scan")
    db.sql(f"PAUSE CHANGEFEED {name}")
    return job_id


def test_alter_into_moves_a_paused_changefeed_to_another_sink(table: DB, tmp_path: Path) -> None:
    db = table
    first, second = tmp_path / "first", tmp_path / "second"
    paused_past_scan(db, "feed_t", first)
    assert afters(first) == {(1, "a"), (2, "b")}
    db.sql("UPSERT INTO t VALUES (3, 'c')")

    refused(db, "ALTER CHANGEFEED feed_t INTO 'nope://x'", "22023", "nope")
    db.sql(f"ALTER CHANGEFEED feed_t INTO 'file://{second}'")
    assert show(db, "feed_t")["sink_uri"] == f"file://{second}"
    ((_name, statement),) = db.sql("SHOW CREATE CHANGEFEED feed_t").rows
    assert f"INTO 'file://{second}'" in statement
    db.sql("RESUME CHANGEFEED feed_t")
    db.sql("UPSERT INTO t VALUES (4, 'd')")
    written = now(db)

    wait_resolved(second, written)
    assert afters(second) == {(3, "c"), (4, "d")}  # from the high-water mark: no rescan
    assert afters(first) == {(1, "a"), (2, "b")}
    db.sql("PAUSE CHANGEFEED feed_t")


def test_alter_into_is_refused_on_a_running_changefeed(table: DB, tmp_path: Path) -> None:
    db = table
    job_id = create_named(db, "feed_t", tmp_path / "first")
    refused(
        db,
        f"ALTER CHANGEFEED feed_t INTO 'file://{tmp_path / 'second'}'",
        "55000",
        f"job {job_id} is running: ALTER CHANGEFEED changes paused jobs only",
    )
    assert show(db, "feed_t")["sink_uri"] == f"file://{tmp_path / 'first'}"


def test_set_cursor_back_emits_every_change_after_it_and_no_scan(table: DB, tmp_path: Path) -> None:
    db = table
    cursor = now(db)
    db.sql("UPSERT INTO t VALUES (3, 'c'), (1, 'a2')")
    out = tmp_path / "out"
    paused_past_scan(db, "feed_t", out)

    db.sql(f"ALTER CHANGEFEED feed_t INTO 'file://{tmp_path / 'again'}' SET cursor = '{cursor}'")
    assert show(db, "feed_t")["high_water_timestamp"] == Decimal(str(cursor))
    db.sql("RESUME CHANGEFEED feed_t")
    db.sql("UPSERT INTO t VALUES (4, 'd')")
    written = now(db)

    wait_resolved(tmp_path / "again", written)
    assert afters(tmp_path / "again") == {(3, "c"), (1, "a2"), (4, "d")}  # (2, 'b') is older


def test_set_cursor_forward_skips_the_changes_before_it(table: DB, tmp_path: Path) -> None:
    db = table
    out = tmp_path / "out"
    paused_past_scan(db, "feed_t", out)
    db.sql("UPSERT INTO t VALUES (5, 'skipped')")

    db.sql("ALTER CHANGEFEED feed_t SET cursor = 'now'")
    ((_name, statement),) = db.sql("SHOW CREATE CHANGEFEED feed_t").rows
    assert "cursor = '" in statement and "cursor = 'now'" not in statement  # pinned
    db.sql("RESUME CHANGEFEED feed_t")
    db.sql("UPSERT INTO t VALUES (6, 'after')")
    written = now(db)

    wait_resolved(out, written)
    assert afters(out) == {(1, "a"), (2, "b"), (6, "after")}


@pytest.mark.parametrize(
    ("alteration", "message"),
    [
        ("UNSET cursor", "option cursor says where the changefeed started"),
        ("SET initial_scan = 'yes'", "option initial_scan says where the changefeed started"),
        ("SET cursor", "option cursor needs a timestamp"),
        ("SET cursor = 'yesterday-ish'", "is not a timestamp"),
    ],
)
def test_bad_cursor_alterations_are_refused(
    table: DB, tmp_path: Path, alteration: str, message: str
) -> None:
    db = table
    paused_past_scan(db, "feed_t", tmp_path / "out")
    before = show(db, "feed_t")
    refused(db, f"ALTER CHANGEFEED feed_t {alteration}", "22023", message)
    assert show(db, "feed_t") == before


def test_a_cursor_set_back_before_the_table_was_created_is_refused(
    table: DB, tmp_path: Path
) -> None:
    """As at creation (CockroachDB plans ALTER CHANGEFEED as a CREATE CHANGEFEED)."""
    db = table
    paused_past_scan(db, "feed_t", tmp_path / "out")
    before = show(db, "feed_t")
    refused(db, "ALTER CHANGEFEED feed_t SET cursor = '-1h'", "42P01", 'table "t" does not exist')
    assert show(db, "feed_t") == before


@pytest.fixture
def gc_db(tmp_path: Path, store_config: StoreConfig) -> Iterator[DB]:
    """A node whose garbage collection keeps 1 ms of history, run by hand."""
    config = dataclasses.replace(store_config, gc_ttl_ns=1_000_000, gc_interval_s=3600.0)
    database = feedkv.connect(tmp_path / "gc", config=config, changefeed_runner="thread")
    yield database
    database.close()


def test_a_cursor_below_the_gc_threshold_is_refused_naming_it(gc_db: DB, tmp_path: Path) -> None:
    db = gc_db
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    db.sql("INSERT INTO t VALUES (1, 'v0')")
    early = now(db)
    db.sql("UPSERT INTO t VALUES (1, 'v1')")
    paused_past_scan(db, "feed_t", tmp_path / "out")  # it protects t from its high water on
    assert db.node is not None
    store = db.node.store
    closed_past = now(db)
    wait_until(
        lambda: all(store.closed_timestamp(d.range_id) > closed_past for d in store.descriptors()),
        timeout_s=DEADLINE,
        what="every range closed",
    )
    assert store.collect_garbage() > 0
    before = show(db, "feed_t")

    with pytest.raises(SQLError) as raised:
        db.sql(f"ALTER CHANGEFEED feed_t SET cursor = '{early}'")

    assert raised.value.code == "22023"
    assert f"cursor {early} is too old" in raised.value.message
    assert "below the garbage-collection threshold" in raised.value.message
    assert show(db, "feed_t") == before


def test_alter_into_and_set_cursor_from_feedkv_sql(
    db: DB, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store, first, second = served(db), tmp_path / "first", tmp_path / "second"
    cli(
        store,
        capsys,
        "CREATE TABLE t (k INT PRIMARY KEY, v STRING)",
        f"CREATE CHANGEFEED feed_t FOR TABLE t INTO 'file://{first}'",
        "PAUSE CHANGEFEED feed_t",
    )
    ((cursor,),) = cli(store, capsys, "SELECT cluster_logical_timestamp()")[1:]
    cli(store, capsys, f"ALTER CHANGEFEED feed_t INTO 'file://{second}' SET cursor = '{cursor}'")
    printed = cli(store, capsys, "SHOW CREATE CHANGEFEED feed_t")
    assert printed[1][1] == (
        f"CREATE CHANGEFEED feed_t FOR TABLE defaultdb.public.t INTO 'file://{second}' "
        f"WITH OPTIONS (cursor = '{cursor}')"
    )
    printed = cli(store, capsys, "SHOW CHANGEFEED JOB feed_t")
    row = dict(zip(printed[0], printed[1], strict=True))
    assert (row["high_water_timestamp"], row["sink_uri"]) == (cursor, f"file://{second}")


def test_alter_into_a_table_it_watches_is_refused(table: DB, tmp_path: Path) -> None:
    db = table
    paused_past_scan(db, "feed_t", tmp_path / "out")
    refused(
        db,
        "ALTER CHANGEFEED feed_t INTO 'experimental-sql://t'",
        "22023",
        "a changefeed cannot write into a table it watches",
    )
    assert show(db, "feed_t")["sink_uri"] == f"file://{tmp_path / 'out'}"


def test_a_whole_table_and_a_range_of_another_in_one_statement(db: DB) -> None:
    db.sql("CREATE TABLE a (k INT PRIMARY KEY)")
    db.sql("CREATE TABLE b (k INT PRIMARY KEY)")
    db.sql("INSERT INTO a VALUES (1), (2)")
    db.sql("INSERT INTO b VALUES (1), (2), (3)")
    result = db.sql(
        "EXPERIMENTAL CHANGEFEED FOR TABLE a, TABLE b VALUES FROM (2) TO (3) "
        "WITH initial_scan = 'only'"
    )
    assert isinstance(result, FeedResult)
    assert sorted((t, json.loads(k)) for t, k, _v in result if t is not None) == [
        ("a", [1]),
        ("a", [2]),
        ("b", [2]),
    ]
