"""The lake sinks (``delta://``, ``iceberg://``): one commit per window and table,
exactly-once across replays, consistent across tables, schema changes; read back with
the ``deltalake`` and ``pyiceberg`` readers and compared with ``AS OF SYSTEM TIME``."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pyarrow as pa
import pytest
from deltalake import DeltaTable

import feedkv.lake
from feedkv import DB
from feedkv.changefeed.changefeed import Changefeed, ChangefeedSpec
from feedkv.changefeed.file_formats import PARQUET_META, ROWS_KEY, ROWS_VERSION
from feedkv.changefeed.options import parse_options
from feedkv.changefeed.rows import Target
from feedkv.changefeed.sink import SinkError, SinkURI, parse_sink_uri, sink_defaults
from feedkv.changefeed.sinks import lake
from feedkv.changefeed.sinks.lake_tables import RESOLVED_KEY, LakeTables, Marker, TableChange
from feedkv.errors import SQLError
from feedkv.sql import catalog
from feedkv.testing.iceberg_rest import IcebergRestServer
from feedkv.testing.lake_rows import crash_mid_window, lake_rows, logical_now
from feedkv.testing.node_process import NodeProcess
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import Timestamp

FAST = "min_checkpoint_frequency='0s'"
T0 = Timestamp(1_700_000_000_000_000_000, 0)


def ts(n: int) -> Timestamp:
    return Timestamp(T0.wall + n * 1_000_000, 0)


@pytest.fixture(params=["delta", "iceberg", "iceberg-rest"])
def lake_uri(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A lake: a Delta directory, an Iceberg SQL catalog, or an Iceberg REST catalog
    (served on loopback, with OAuth2 client credentials)."""
    if request.param == "delta":
        yield f"delta://{tmp_path}/lake"
    elif request.param == "iceberg":
        yield f"iceberg://cat/feeds?warehouse={tmp_path}/warehouse"
    else:
        with IcebergRestServer(str(tmp_path / "rest"), credential="feedkv:s3cret") as server:
            yield f"iceberg://cat/feeds?catalog_uri={server.url}&credential=feedkv:s3cret"


def parse(uri: str, *options: tuple[str, str | None]) -> SinkURI:
    parsed = parse_options(options, now=T0)
    return parse_sink_uri(uri, sink_defaults(uri, parsed))


rows = lake_rows


def table_rows(tables: dict[str, pa.Table], name: str) -> list[dict[str, Any]]:
    return sorted(tables[name].to_pylist(), key=lambda r: r["k"])


def commit(uri: str, window: Timestamp, *batches: tuple[str, pa.RecordBatch]) -> None:
    """One run of the sink: ``batches`` committed as the window ending at ``window``."""
    sink = lake.make(parse(uri), parse_options((), now=T0))
    try:
        sink.emit_batches(batches)
        sink.commit_window(window, ["a", "b"])
    finally:
        sink.close()


# The sink on its own.


def test_a_window_is_one_commit_per_table_and_the_marker_names_them(lake_uri: str) -> None:
    commit(lake_uri, ts(10), ("a", rows((1, "x", "c", ts(5)))), ("b", rows((7, "y", "c", ts(6)))))
    first = feedkv.lake.read_consistent(lake_uri)
    commit(lake_uri, ts(20), ("a", rows((1, "x2", "u", ts(15)), (2, "z", "c", ts(16)))))
    second = feedkv.lake.read_consistent(lake_uri)

    assert first is not None and second is not None
    assert (first.resolved, second.resolved) == (ts(10), ts(20))
    assert second.versions["b"] == first.versions["b"]  # an idle table takes no commit
    assert second.versions["a"] != first.versions["a"]
    now = feedkv.lake.read_tables(lake_uri, second)
    assert table_rows(now, "a") == [{"k": 1, "v": "x2"}, {"k": 2, "v": "z"}]
    then = feedkv.lake.read_tables(lake_uri, first)
    assert table_rows(then, "a") == [{"k": 1, "v": "x"}]


def test_mirror_applies_the_last_change_of_each_key_in_a_window(lake_uri: str) -> None:
    commit(lake_uri, ts(10), ("a", rows((1, "x", "c", ts(1)), (2, "y", "c", ts(2)))))
    commit(
        lake_uri,
        ts(20),
        ("a", rows((1, "x1", "u", ts(11)), (1, None, "d", ts(12)), (3, "w", "c", ts(13)))),
        ("a", rows((2, "y1", "u", ts(14)), (2, "y2", "u", ts(15)))),
    )

    tables = feedkv.lake.read_tables(lake_uri)
    assert table_rows(tables, "a") == [{"k": 2, "v": "y2"}, {"k": 3, "v": "w"}]


def test_changelog_appends_every_change_with_its_type_and_timestamps(
    tmp_path: Path, lake_uri: str
) -> None:
    uri = lake_uri
    sink = lake.make(parse(uri), parse_options((("lake_mode", "changelog"),), now=T0))
    sink.emit_batches([("a", rows((1, "x", "c", ts(1)), (1, "x1", "u", ts(2))))])
    sink.commit_window(ts(10), ["a"])
    sink.emit_batches([("a", rows((1, None, "d", ts(11))))])
    sink.commit_window(ts(20), ["a"])
    sink.close()

    changes = feedkv.lake.read_tables(uri)["a"].to_pylist()
    got = sorted(
        (Timestamp.parse(r["_feedkv_updated"]), r["_change_type"], r["k"], r["v"]) for r in changes
    )
    assert got == [
        (ts(1), "insert", 1, "x"),
        (ts(2), "update_postimage", 1, "x1"),
        (ts(11), "delete", 1, None),
    ]
    assert all(r["_feedkv_mvcc_timestamp"] == r["_feedkv_updated"] for r in changes)
    # Delta Change Data Feed's columns, as its readers order changes by them
    for r in changes:
        wall = Timestamp.parse(r["_feedkv_updated"]).wall
        assert r["_commit_version"] == wall
        assert r["_commit_timestamp"] == datetime.fromtimestamp(wall // 1000 / 1e6, UTC)


def test_each_changelog_row_carries_its_own_commit_when_a_window_holds_many(
    lake_uri: str,
) -> None:
    # rows come by key (a batch per range), not in time: each keeps its commit's columns
    sink = lake.make(parse(lake_uri), parse_options((("lake_mode", "changelog"),), now=T0))
    sink.emit_batches([("a", rows((1, "late", "u", ts(3)), (9, "early", "u", ts(2))))])
    sink.emit_batches([("a", rows((5, "first", "c", ts(1))))])
    sink.commit_window(ts(10), ["a"])
    sink.close()

    changes = feedkv.lake.read_tables(lake_uri)["a"].to_pylist()
    assert sorted((r["_commit_version"], r["k"]) for r in changes) == [
        (ts(1).wall, 5),
        (ts(2).wall, 9),
        (ts(3).wall, 1),
    ]
    for r in changes:
        wall = Timestamp.parse(r["_feedkv_updated"]).wall
        assert r["_commit_version"] == wall
        assert r["_commit_timestamp"] == datetime.fromtimestamp(wall // 1000 / 1e6, UTC)


def test_rows_above_a_window_wait_for_their_own(lake_uri: str) -> None:
    # The feed emits a value before a checkpoint covers it: a window's commit finds it.
    sink = lake.make(parse(lake_uri), parse_options((), now=T0))
    sink.emit_batches([("a", rows((1, "x", "c", ts(5)), (2, "y", "c", ts(15))))])
    sink.commit_window(ts(10), ["a"])
    early = feedkv.lake.read_tables(lake_uri)
    sink.commit_window(ts(20), ["a"])
    sink.close()

    assert table_rows(early, "a") == [{"k": 1, "v": "x"}]
    assert table_rows(feedkv.lake.read_tables(lake_uri), "a") == [
        {"k": 1, "v": "x"},
        {"k": 2, "v": "y"},
    ]


def test_replaying_a_window_commits_nothing_new(lake_uri: str) -> None:
    window = [("a", rows((1, "x", "c", ts(1)))), ("b", rows((2, "y", "c", ts(2))))]
    commit(lake_uri, ts(10), *window)
    before = feedkv.lake.read_consistent(lake_uri)
    commit(lake_uri, ts(10), *window)  # a restart commits the same window again
    # ... or a wider one from an older high-water mark: only its rows above are new
    commit(lake_uri, ts(20), *window, ("a", rows((3, "z", "c", ts(15)))))
    after = feedkv.lake.read_consistent(lake_uri)

    assert before is not None and after is not None
    assert after.versions["b"] == before.versions["b"]
    tables = feedkv.lake.read_tables(lake_uri, after)
    assert table_rows(tables, "a") == [{"k": 1, "v": "x"}, {"k": 3, "v": "z"}]
    assert table_rows(tables, "b") == [{"k": 2, "v": "y"}]


def test_replaying_a_changelog_window_appends_no_duplicates(lake_uri: str) -> None:
    options = parse_options((("lake_mode", "changelog"),), now=T0)
    for _run in range(2):
        sink = lake.make(parse(lake_uri), options)
        sink.emit_batches([("a", rows((1, "x", "c", ts(1)), (1, "x1", "u", ts(2))))])
        sink.commit_window(ts(10), ["a"])
        sink.close()

    assert len(feedkv.lake.read_tables(lake_uri)["a"]) == 2


def test_a_crash_between_two_tables_commits_is_repaired_on_restart(lake_uri: str) -> None:
    commit(lake_uri, ts(10), ("a", rows((1, "a0", "c", ts(1)))), ("b", rows((1, "b0", "c", ts(1)))))
    # A transaction at ts(15) moved a row's value from a to b.
    window = [("a", rows((1, "a1", "u", ts(15)))), ("b", rows((1, "b1", "u", ts(15))))]
    crash_mid_window(lake.lake_tables(parse(lake_uri)), window, ts(20), "b")

    half = feedkv.lake.read_consistent(lake_uri)
    assert half is not None and half.resolved == ts(10)
    tables = feedkv.lake.read_tables(lake_uri, half)
    assert (table_rows(tables, "a"), table_rows(tables, "b")) == (
        [{"k": 1, "v": "a0"}],
        [{"k": 1, "v": "b0"}],
    )

    # The restart resumes from an older high-water mark in smaller windows: the first
    # ends before the transaction, which table a holds already.
    commit(lake_uri, ts(12))
    before = feedkv.lake.read_consistent(lake_uri)
    assert before is not None and before.resolved == ts(12)
    tables = feedkv.lake.read_tables(lake_uri, before)
    assert (table_rows(tables, "a"), table_rows(tables, "b")) == (
        [{"k": 1, "v": "a0"}],
        [{"k": 1, "v": "b0"}],
    )
    commit(lake_uri, ts(20), *window)

    whole = feedkv.lake.read_consistent(lake_uri)
    assert whole is not None and whole.resolved == ts(20)
    tables = feedkv.lake.read_tables(lake_uri, whole)
    assert (table_rows(tables, "a"), table_rows(tables, "b")) == (
        [{"k": 1, "v": "a1"}],
        [{"k": 1, "v": "b1"}],
    )


def test_a_marker_does_not_go_back_when_an_older_window_is_replayed(lake_uri: str) -> None:
    commit(lake_uri, ts(20), ("a", rows((1, "x", "c", ts(15)))))
    commit(lake_uri, ts(10), ("a", rows((1, "old", "c", ts(5)))))

    marker = feedkv.lake.read_consistent(lake_uri)
    assert marker is not None and marker.resolved == ts(20)
    assert table_rows(feedkv.lake.read_tables(lake_uri), "a") == [{"k": 1, "v": "x"}]


def test_a_marker_reads_back_as_written() -> None:
    marker = Marker(ts(3), {"a": 4, "b": 5})
    assert Marker.from_json(marker.to_json()) == marker


# Bad URIs and options, refused at CREATE.


@pytest.mark.parametrize(
    ("uri", "options", "message"),
    [
        ("delta://", "", "needs a directory"),
        ("delta://host/dir", "", "names a local directory"),
        ("delta:///proc/self/lake", "", "cannot use"),
        ("delta:///tmp/x?file_size=1", "", "unknown delta sink parameter"),
        ("delta:///tmp/x", "format=json", "incompatible with format=json: the delta sink"),
        ("delta:///tmp/x", "lake_mode='mirorr'", "did you mean 'mirror'"),
        ("delta:///tmp/x", "split_column_families", "keeps whole rows"),
        ("iceberg:///feeds?warehouse=/tmp/w", "", "names no catalog"),
        ("iceberg://cat?warehouse=/tmp/w", "", "names no single namespace"),
        ("iceberg://cat/feeds", "", "'cat' is not in pyiceberg's configuration"),
        ("iceberg://cat/feeds?warehouse=/tmp/w&token=t", "", "token is for a REST catalog"),
        ("iceberg://cat/feeds?warehouse=rel/dir", "", "needs warehouse="),
        ("iceberg://cat/feeds?warehouse=/tmp/w&catalog_uri=nope://x", "", "Iceberg catalog"),
        ("file:///tmp/x", "lake_mode='changelog'", "not usable with the cloud storage sink"),
    ],
)
def test_bad_lake_uris_and_options_are_refused_at_create(
    db: DB, uri: str, options: str, message: str
) -> None:
    db.sql("CREATE TABLE a (k INT PRIMARY KEY, v STRING)")
    with_clause = f" WITH {options}" if options else ""
    with pytest.raises(SQLError, match=message):
        db.sql(f"CREATE CHANGEFEED FOR TABLE a INTO '{uri}'{with_clause}")


def test_a_lake_changefeed_takes_tables_not_a_query(db: DB, tmp_path: Path) -> None:
    db.sql("CREATE TABLE a (k INT PRIMARY KEY, v STRING)")
    with pytest.raises(SQLError, match="takes tables, not a query"):
        db.sql(f"CREATE CHANGEFEED INTO 'delta://{tmp_path}/lake' AS SELECT k FROM a")


# Changefeeds into lakes (the thread runner).


def wait_marker_past(db: DB, uri: str, job_id: int, past: Decimal) -> Marker:
    def reached() -> Marker | None:
        result = db.sql(f"SHOW CHANGEFEED JOB {job_id}")
        error = dict(zip(result.columns, result.rows[0], strict=True))["error"]
        if error:
            raise AssertionError(f"the changefeed failed: {error}")
        marker = feedkv.lake.read_consistent(uri)
        return marker if marker is not None and Decimal(str(marker.resolved)) >= past else None

    marker = wait_until(reached, timeout_s=60, what=f"the lake's marker past {past}")
    assert marker is not None
    return marker


def as_of(db: DB, table: str, at: Timestamp) -> list[dict[str, Any]]:
    result = db.sql(f"SELECT * FROM {table} AS OF SYSTEM TIME {at} ORDER BY k")
    return [dict(zip(result.columns, row, strict=True)) for row in result.rows]


def bank(db: DB, step: int) -> None:
    """Move money between the two tables in one transaction (the total stays 200),
    and insert and delete rows of a."""
    session = db.session()
    try:
        session.execute("BEGIN")
        session.execute(f"UPDATE a SET v = v - {step} WHERE k = 1")
        session.execute(f"UPDATE b SET v = v + {step} WHERE k = 1")
        session.execute(f"INSERT INTO a VALUES ({10 + step}, {step})")
        session.execute("COMMIT")
    finally:
        session.close()
    if step % 2:
        db.sql(f"DELETE FROM a WHERE k = {10 + step - 1}")


def test_a_mirror_equals_its_source_as_of_each_resolved_timestamp(db: DB, lake_uri: str) -> None:
    db.sql("CREATE TABLE a (k INT PRIMARY KEY, v INT)")
    db.sql("CREATE TABLE b (k INT PRIMARY KEY, v INT)")
    db.sql("INSERT INTO a VALUES (1, 100)")
    db.sql("INSERT INTO b VALUES (1, 100)")
    [(job_id,)] = db.sql(f"CREATE CHANGEFEED FOR TABLE a, b INTO '{lake_uri}' WITH {FAST}").rows
    seen: list[Marker] = []
    for step in range(1, 5):
        bank(db, step)
        marker = wait_marker_past(db, lake_uri, job_id, logical_now(db))
        seen.append(marker)
        tables = feedkv.lake.read_tables(lake_uri, marker)
        for name in ("a", "b"):
            assert table_rows(tables, name) == as_of(db, name, marker.resolved), name
        balances = [r["v"] for t in ("a", "b") for r in table_rows(tables, t) if r["k"] == 1]
        assert sum(balances) == 200
    for marker in seen:  # every recorded timestamp still reads as it was
        tables = feedkv.lake.read_tables(lake_uri, marker)
        assert table_rows(tables, "a") == as_of(db, "a", marker.resolved)
    duck = feedkv.lake.duckdb_connect()
    for name in ("a", "b"):  # and so does every commit, read by the library's own reader
        recorded = recorded_versions(lake_uri, name)
        assert len(recorded) >= 2
        for at, version, table in recorded:
            source = as_of(db, name, at)
            assert sorted(table.to_pylist(), key=lambda r: r["k"]) == source
            # ... and by DuckDB, an independent reader
            scan = feedkv.lake.duckdb_scan(lake_uri, name, version)
            assert duckdb_rows(duck, f"SELECT * FROM {scan} ORDER BY k") == source
    for marker in seen:  # the bank's total at every common timestamp, read by DuckDB
        scans = [feedkv.lake.duckdb_scan(lake_uri, t, marker.versions[t]) for t in ("a", "b")]
        balances = [f"(SELECT v FROM {scan} WHERE k = 1)" for scan in scans]
        assert duckdb_rows(duck, f"SELECT {' + '.join(balances)} AS total") == [{"total": 200}]
    duck.close()


def duckdb_rows(duck: Any, query: str) -> list[dict[str, Any]]:
    result = duck.execute(query)
    names = [d[0] for d in result.description]
    return [dict(zip(names, row, strict=True)) for row in result.fetchall()]


def recorded_versions(uri: str, table: str) -> list[tuple[Timestamp, int, pa.Table]]:
    """Every version of ``table`` a window's commit made, read with deltalake or
    pyiceberg (the last snapshot of each Iceberg commit), with the timestamp it records
    and its version (snapshot id)."""
    if uri.startswith("delta://"):
        path = f"{uri.removeprefix('delta://')}/{table}"
        return [
            (
                Timestamp.parse(c[RESOLVED_KEY]),
                c["version"],
                DeltaTable(path, version=c["version"]).to_pyarrow_table(),
            )
            for c in DeltaTable(path).history()
            if RESOLVED_KEY in c
        ]
    tbl = iceberg_catalog(uri).load_table(("feeds", table))
    last: dict[str, int] = {}
    for snapshot in tbl.snapshots():
        last[snapshot.summary[RESOLVED_KEY]] = snapshot.snapshot_id
    return [(Timestamp.parse(r), i, tbl.scan(snapshot_id=i).to_arrow()) for r, i in last.items()]


def iceberg_catalog(uri: str) -> Any:
    """The catalog of an ``iceberg://cat/...`` URI, opened by pyiceberg on its own: a
    SQL catalog in the warehouse, or the REST catalog at ``catalog_uri``."""
    params = dict(parse_qsl(urlsplit(uri).query))
    if "catalog_uri" in params:
        from pyiceberg.catalog.rest import RestCatalog

        token_uri = f"{params['catalog_uri']}/v1/oauth/tokens"
        properties = {"credential": params["credential"], "oauth2-server-uri": token_uri}
        return RestCatalog("cat", uri=params["catalog_uri"], **properties)
    from pyiceberg.catalog.sql import SqlCatalog

    warehouse = params["warehouse"]
    return SqlCatalog("cat", uri=f"sqlite:///{warehouse}/cat.db", warehouse=f"file://{warehouse}")


_IMAGES = {"update_preimage": 0, "update_postimage": 1}


def changelog(uri: str) -> list[tuple[str, int, int | None]]:
    """Table a's changelog in commit order (an update's row before it, then after)."""
    changes = sorted(
        feedkv.lake.read_tables(uri)["a"].to_pylist(),
        key=lambda r: (
            Timestamp.parse(r["_feedkv_updated"]),
            r["k"],
            _IMAGES.get(r["_change_type"], 0),
        ),
    )
    return [(r["_change_type"], r["k"], r["v"]) for r in changes]


def test_a_changelog_holds_every_committed_version(db: DB, lake_uri: str) -> None:
    db.sql("CREATE TABLE a (k INT PRIMARY KEY, v INT)")
    db.sql("INSERT INTO a VALUES (1, 0)")
    [(job_id,)] = db.sql(
        f"CREATE CHANGEFEED FOR TABLE a INTO '{lake_uri}' WITH lake_mode='changelog', {FAST}"
    ).rows
    for v in range(1, 4):
        db.sql(f"UPDATE a SET v = {v} WHERE k = 1")
    db.sql("INSERT INTO a VALUES (2, 20)")
    db.sql("DELETE FROM a WHERE k = 1")
    wait_marker_past(db, lake_uri, job_id, logical_now(db))

    assert changelog(lake_uri) == [
        ("insert", 1, 0),  # the initial scan
        ("update_preimage", 1, 0),
        ("update_postimage", 1, 1),
        ("update_preimage", 1, 1),
        ("update_postimage", 1, 2),
        ("update_preimage", 1, 2),
        ("update_postimage", 1, 3),
        ("insert", 2, 20),
        ("delete", 1, 3),  # the deleted row, as Delta's Change Data Feed has it
    ]


def test_add_and_drop_column_change_the_lake_tables_schema(db: DB, lake_uri: str) -> None:
    db.sql("CREATE TABLE a (k INT PRIMARY KEY, v INT, gone STRING)")
    db.sql("INSERT INTO a VALUES (1, 10, 'x')")
    [(job_id,)] = db.sql(f"CREATE CHANGEFEED FOR TABLE a INTO '{lake_uri}' WITH {FAST}").rows
    before = wait_marker_past(db, lake_uri, job_id, logical_now(db))
    db.sql("ALTER TABLE a ADD COLUMN w INT DEFAULT 7")
    db.sql("INSERT INTO a VALUES (2, 20, 'y', 8)")
    added = wait_marker_past(db, lake_uri, job_id, logical_now(db))
    db.sql("ALTER TABLE a DROP COLUMN gone")
    db.sql("INSERT INTO a VALUES (3, 30, 9)")
    dropped = wait_marker_past(db, lake_uri, job_id, logical_now(db))

    assert table_rows(feedkv.lake.read_tables(lake_uri, before), "a") == [
        {"k": 1, "v": 10, "gone": "x"}
    ]
    assert table_rows(feedkv.lake.read_tables(lake_uri, added), "a") == as_of(
        db, "a", added.resolved
    )
    # the drop leaves the table's schema; older versions keep the column (time travel)
    assert table_rows(feedkv.lake.read_tables(lake_uri, dropped), "a") == as_of(
        db, "a", dropped.resolved
    )
    assert current_columns(lake_uri, "a") == ["k", "v", "w"]
    duck = feedkv.lake.duckdb_connect()
    for marker in (before, added, dropped):  # as an independent reader sees each version
        scan = feedkv.lake.duckdb_scan(lake_uri, "a", marker.versions["a"])
        source = as_of(db, "a", marker.resolved)
        assert duckdb_rows(duck, f"SELECT * FROM {scan} ORDER BY k") == source
    duck.close()
    if lake_uri.startswith("delta"):  # every commit is a window's, schema changes included
        history = DeltaTable(lake_uri.removeprefix("delta://") + "/a").history()
        assert all(RESOLVED_KEY in commit for commit in history)


def test_a_changelog_keeps_its_rows_without_a_dropped_column(db: DB, lake_uri: str) -> None:
    db.sql("CREATE TABLE a (k INT PRIMARY KEY, v INT, gone STRING)")
    db.sql("INSERT INTO a VALUES (1, 10, 'x'), (2, 20, 'y')")
    [(job_id,)] = db.sql(
        f"CREATE CHANGEFEED FOR TABLE a INTO '{lake_uri}' WITH lake_mode='changelog', {FAST}"
    ).rows
    db.sql("UPDATE a SET v = 11 WHERE k = 1")
    before = wait_marker_past(db, lake_uri, job_id, logical_now(db))
    db.sql("ALTER TABLE a DROP COLUMN gone")
    db.sql("INSERT INTO a VALUES (3, 30)")
    db.sql("DELETE FROM a WHERE k = 2")
    dropped = wait_marker_past(db, lake_uri, job_id, logical_now(db))

    then = feedkv.lake.read_tables(lake_uri, before)["a"]
    now = feedkv.lake.read_tables(lake_uri, dropped)["a"]
    assert "gone" in then.column_names and "gone" not in now.column_names
    assert current_columns(lake_uri, "a")[:2] == ["k", "v"]
    assert "gone" not in current_columns(lake_uri, "a")

    def changes(table: pa.Table) -> list[tuple[str, int, int | None, str]]:
        return sorted(
            (r["_change_type"], r["k"], r["v"], r["_feedkv_updated"]) for r in table.to_pylist()
        )

    earlier = changes(then)
    assert [(c, k, v) for c, k, v, _ in earlier] == sorted(
        [
            ("insert", 1, 10),
            ("insert", 2, 20),
            ("update_preimage", 1, 10),
            ("update_postimage", 1, 11),
        ]
    )
    latest = changes(now)
    # every change before the drop is still there, without the column; then the
    # drop's backfill of each row, the insert and the delete
    assert set(earlier) < set(latest)
    later = [(c, k, v) for c, k, v, _ in latest if (c, k, v, _) not in set(earlier)]
    assert ("insert", 3, 30) in later and ("delete", 2, 20) in later
    assert [r["gone"] for r in then.to_pylist() if r["k"] == 1 and r["v"] == 10] == ["x", "x"]


def current_columns(uri: str, table: str) -> list[str]:
    """The columns of ``table``'s newest version, as deltalake or pyiceberg reads them."""
    if uri.startswith("delta://"):
        path = f"{uri.removeprefix('delta://')}/{table}"
        return [f.name for f in DeltaTable(path).schema().fields]
    names: list[str] = iceberg_catalog(uri).load_table(("feeds", table)).schema().column_names
    return names


def test_a_window_that_drops_a_column_keeps_the_rows_it_does_not_change(lake_uri: str) -> None:
    """Two windows, the second of a descriptor version without ``gone`` (under
    ``nobackfill``, only the rows changed since come again): the table loses the
    column, its other rows stay, and the version before still reads it."""

    def window(
        *changes: tuple[int, str, str | None, str, Timestamp], version: int
    ) -> pa.RecordBatch:
        schema = pa.schema(
            [
                ("k", pa.int64()),
                ("j", pa.string()),
                *([("gone", pa.string())] if version == 1 else []),
                *((m, pa.string()) for m in PARQUET_META),
            ],
            metadata={ROWS_KEY: json.dumps(["k", "j"]), ROWS_VERSION: str(version)},
        )
        records = [
            (k, j, *([gone] if version == 1 else []), kind, str(t), str(t))
            for k, j, gone, kind, t in changes
        ]
        return pa.RecordBatch.from_pylist(
            [dict(zip(schema.names, r, strict=True)) for r in records], schema=schema
        )

    commit(
        lake_uri,
        ts(10),
        (
            "a",
            window(
                (1, "p", "x", "c", ts(1)),
                (1, "q", "y", "c", ts(2)),
                (2, "p", "z", "c", ts(3)),
                version=1,
            ),
        ),
    )
    first = feedkv.lake.read_consistent(lake_uri)
    commit(
        lake_uri,
        ts(20),
        ("a", window((1, "q", None, "d", ts(11)), (3, "p", None, "c", ts(12)), version=2)),
    )
    second = feedkv.lake.read_consistent(lake_uri)

    assert first is not None and second is not None
    rows_now = sorted(
        feedkv.lake.read_tables(lake_uri, second)["a"].to_pylist(), key=lambda r: (r["k"], r["j"])
    )
    assert rows_now == [{"k": 1, "j": "p"}, {"k": 2, "j": "p"}, {"k": 3, "j": "p"}]
    assert current_columns(lake_uri, "a") == ["k", "j"]
    rows_then = sorted(
        feedkv.lake.read_tables(lake_uri, first)["a"].to_pylist(), key=lambda r: (r["k"], r["j"])
    )
    assert rows_then == [
        {"k": 1, "j": "p", "gone": "x"},
        {"k": 1, "j": "q", "gone": "y"},
        {"k": 2, "j": "p", "gone": "z"},
    ]
    # a replay of the window commits nothing new
    commit(
        lake_uri,
        ts(20),
        ("a", window((1, "q", None, "d", ts(11)), (3, "p", None, "c", ts(12)), version=2)),
    )
    assert feedkv.lake.read_consistent(lake_uri) == second


@pytest.fixture
def nodes() -> Iterator[list[NodeProcess]]:
    """Nodes started in turn on one store; those still running are stopped at the end."""
    started: list[NodeProcess] = []
    yield started
    for node in started:
        if node.process.poll() is None:
            node.terminate()


NODE_ARGS = ("--changefeed-runner", "thread", "--closed-ts-target", "100ms")


@pytest.mark.slow(20)
def test_a_killed_node_resumes_its_lake_changelog_exactly_once(
    tmp_path: Path, lake_uri: str, nodes: list[NodeProcess]
) -> None:
    store = tmp_path / "store"
    nodes.append(NodeProcess(store, *NODE_ARGS))
    expected: list[tuple[str, int, int | None]] = [("insert", 1, 0)]
    with feedkv.connect(nodes[0].url) as db:
        db.sql("CREATE TABLE a (k INT PRIMARY KEY, v INT)")
        db.sql("INSERT INTO a VALUES (1, 0)")
        [(job_id,)] = db.sql(
            f"CREATE CHANGEFEED FOR TABLE a INTO '{lake_uri}' WITH lake_mode='changelog', {FAST}"
        ).rows
        for v in range(1, 4):
            db.sql(f"UPDATE a SET v = {v} WHERE k = 1")
            expected += [("update_preimage", 1, v - 1), ("update_postimage", 1, v)]
        wait_marker_past(db, lake_uri, job_id, logical_now(db))
        for v in range(4, 8):  # acknowledged, some maybe committed into the lake before the kill
            db.sql(f"UPDATE a SET v = {v} WHERE k = 1")
            expected += [("update_preimage", 1, v - 1), ("update_postimage", 1, v)]
    nodes[0].kill()

    nodes.append(NodeProcess(store, *NODE_ARGS))
    with feedkv.connect(nodes[1].url) as db:
        db.sql("INSERT INTO a VALUES (2, 20)")
        expected.append(("insert", 2, 20))
        wait_marker_past(db, lake_uri, job_id, logical_now(db))

    assert changelog(lake_uri) == expected


def test_altering_a_lake_job_keeps_its_defaults_and_refuses_a_new_mode(
    db: DB, tmp_path: Path
) -> None:
    uri = f"delta://{tmp_path}/lake"
    db.sql("CREATE TABLE a (k INT PRIMARY KEY, v INT)")
    [(job_id,)] = db.sql(
        f"CREATE CHANGEFEED FOR TABLE a INTO '{uri}' WITH lake_mode='changelog', {FAST}"
    ).rows
    db.sql(f"PAUSE JOB {job_id}")
    with pytest.raises(SQLError, match="lake_mode says what the lake tables hold"):
        db.sql(f"ALTER CHANGEFEED {job_id} SET lake_mode = 'mirror'")
    db.sql(f"ALTER CHANGEFEED {job_id} SET resolved = '1s'")
    db.sql(f"RESUME JOB {job_id}")
    db.sql("INSERT INTO a VALUES (1, 10)")
    db.sql("UPDATE a SET v = 11 WHERE k = 1")
    wait_marker_past(db, uri, job_id, logical_now(db))

    assert changelog(uri) == [
        ("insert", 1, 10),
        ("update_preimage", 1, 10),
        ("update_postimage", 1, 11),
    ]


def test_a_tables_version_at_an_old_window_is_found_past_its_newest_commits(
    lake_uri: str,
) -> None:
    sink = lake.make(parse(lake_uri), parse_options((), now=T0))
    for n in range(1, 21):
        sink.emit_batches([("a", rows((n, "x", "c", ts(10 * n - 5))))])
        sink.commit_window(ts(10 * n), ["a"])
    sink.close()
    tables = lake.lake_tables(parse(lake_uri))
    try:
        old = tables.version_at("a", ts(25))
        assert tables.version_at("a", ts(5)) is None
        assert tables.last_resolved("a") == ts(200)
        assert old is not None
        assert sorted(r["k"] for r in tables.read("a", old).to_pylist()) == [1, 2]
    finally:
        tables.close()


class FailingOnce:
    """Tables whose ``nth`` commit into ``table`` fails, after recording what a
    consistent reader saw then (the commits before it in the window have landed)."""

    def __init__(self, tables: LakeTables, uri: str, table: str, nth: int) -> None:
        self.tables = tables
        self.uri = uri
        self.table = table
        self.left = nth
        self.seen: dict[str, pa.Table] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.tables, name)

    def commit(self, change: TableChange) -> None:
        if change.table == self.table:
            self.left -= 1
            if self.left == 0:
                self.seen = feedkv.lake.read_tables(self.uri)
                raise SinkError("the sink died between two tables' commits")
        self.tables.commit(change)


def test_a_changefeed_completes_a_window_a_failure_left_half_committed(
    db: DB, lake_uri: str
) -> None:
    db.sql("CREATE TABLE a (k INT PRIMARY KEY, v INT)")
    db.sql("CREATE TABLE b (k INT PRIMARY KEY, v INT)")
    db.sql("INSERT INTO a VALUES (1, 100)")
    db.sql("INSERT INTO b VALUES (1, 100)")
    start = db.now()
    snapshot = catalog.Snapshot(db, start)
    database = catalog.database_by_name(snapshot, "defaultdb")
    ids = {name: catalog.table_by_name(snapshot, database, name).id for name in ("a", "b")}
    options = parse_options((("min_checkpoint_frequency", "0s"),), now=start)
    options = sink_defaults(lake_uri, options)
    spec = ChangefeedSpec(
        tuple(Target(i) for i in ids.values()),
        {i: name for name, i in ids.items()},
        options,
        start,
        sink_uri=lake_uri,
    )
    tables = FailingOnce(lake.lake_tables(parse(lake_uri)), lake_uri, "b", nth=2)
    feed = Changefeed(db, spec, lake.LakeSink(tables, "mirror"))
    runner = threading.Thread(target=feed.run, daemon=True)
    runner.start()
    try:
        bank(db, 30)  # moves 30 from a to b in one transaction (after the scan's commits)
        end = logical_now(db)
        wait_until(
            lambda: feed.high_water >= Timestamp.parse_decimal(str(end)),
            timeout_s=60,
            what="the changefeed past the transfer",
        )
    finally:
        feed.close()
        runner.join(30)

    assert tables.seen is not None, "the commit into b never failed"
    half = tables.seen  # a had taken the window; the marker still named the one before
    assert table_rows(half, "a")[0]["v"] + table_rows(half, "b")[0]["v"] == 200
    assert table_rows(half, "a")[0]["v"] == 100
    marker = feedkv.lake.read_consistent(lake_uri)
    assert marker is not None
    whole = feedkv.lake.read_tables(lake_uri, marker)
    for name in ("a", "b"):
        assert table_rows(whole, name) == as_of(db, name, marker.resolved)
    assert table_rows(whole, "b")[0]["v"] == 130


def test_an_initial_scan_only_export_is_one_window_at_the_start(db: DB, lake_uri: str) -> None:
    db.sql("CREATE TABLE a (k INT PRIMARY KEY, v INT)")
    db.sql("INSERT INTO a VALUES (1, 10), (2, 20)")
    [(job_id,)] = db.sql(
        f"CREATE CHANGEFEED FOR TABLE a INTO '{lake_uri}' WITH initial_scan = 'only'"
    ).rows
    assert db.changefeeds.wait(job_id, 60)
    assert db.changefeeds.error(job_id) is None

    marker = feedkv.lake.read_consistent(lake_uri)
    assert marker is not None
    tables = feedkv.lake.read_tables(lake_uri, marker)
    assert table_rows(tables, "a") == as_of(db, "a", marker.resolved)
    assert len(recorded_versions(lake_uri, "a")) == 1


def test_a_decimal_with_a_precision_is_a_decimal_in_the_lake(db: DB, lake_uri: str) -> None:
    """DECIMAL(10,2) is the lake's decimal(10,2) (Spark's, DuckDB's), not text; a DECIMAL
    without a precision, which no decimal type of the lakes bounds, stays text."""
    db.sql("CREATE TABLE a (k DECIMAL(10,2) PRIMARY KEY, price DECIMAL(10,2), exact DECIMAL)")
    db.sql("INSERT INTO a VALUES (1.5, 2.25, 1.005), (2, NULL, 12345678901234567890.5)")
    [(job_id,)] = db.sql(f"CREATE CHANGEFEED FOR TABLE a INTO '{lake_uri}' WITH {FAST}").rows
    db.sql("UPDATE a SET price = 99999999.99 WHERE k = 2")
    wait_marker_past(db, lake_uri, job_id, logical_now(db))

    table = feedkv.lake.read_tables(lake_uri)["a"]
    assert table.schema.field("k").type == pa.decimal128(10, 2)
    assert table.schema.field("price").type == pa.decimal128(10, 2)
    assert table.schema.field("exact").type == pa.string()
    assert sorted(table.to_pylist(), key=lambda r: r["k"]) == [
        {"k": Decimal("1.50"), "price": Decimal("2.25"), "exact": "1.005"},
        {"k": Decimal("2.00"), "price": Decimal("99999999.99"), "exact": "12345678901234567890.5"},
    ]
    duck = feedkv.lake.duckdb_connect()
    _at, version, _rows = max(recorded_versions(lake_uri, "a"), key=lambda r: r[0])
    scan = feedkv.lake.duckdb_scan(lake_uri, "a", version)
    assert duckdb_rows(duck, f"SELECT sum(price) AS total FROM {scan}") == [
        {"total": Decimal("100000002.24")}
    ]
    duck.close()


def test_a_nan_in_a_decimal_with_a_precision_fails_the_changefeed_saying_why(
    db: DB, lake_uri: str
) -> None:
    """A typed DECIMAL holds NaN (as CockroachDB's does), the lakes' decimals do not: no
    retry changes that, so the job fails naming the value and what to do."""
    db.sql("CREATE TABLE a (k INT PRIMARY KEY, price DECIMAL(10,2))")
    db.sql("INSERT INTO a VALUES (1, 'NaN')")
    [(job_id,)] = db.sql(f"CREATE CHANGEFEED FOR TABLE a INTO '{lake_uri}' WITH {FAST}").rows
    result = db.sql(f"SHOW JOB WHEN COMPLETE {job_id}")
    row = dict(zip(result.columns, result.rows[0], strict=True))
    assert row["status"] == "failed"
    assert row["error"].startswith("DECIMAL(10,2) value NaN has no decimal form")
    assert "DECIMAL without a precision" in row["error"]
