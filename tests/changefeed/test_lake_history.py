"""Reading lake tables as of an older resolved timestamp (``at=``): the newest retained
marker at or below it, in Delta, an Iceberg SQL catalog and an Iceberg REST catalog; a
clear error when the history no longer reaches it (markers dropped past
``marker_history``, versions vacuumed or snapshots expired)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

import feedkv.lake
from feedkv import DB
from feedkv.changefeed.options import parse_options
from feedkv.changefeed.sink import SinkURI, parse_sink_uri, sink_defaults
from feedkv.changefeed.sinks import lake
from feedkv.changefeed.sinks.iceberg import IcebergPlace
from feedkv.changefeed.sinks.lake_tables import (
    history_name,
    marker_at,
    parse_history_name,
    pruned,
)
from feedkv.errors import BatchTimestampBeforeGCError, SQLError
from feedkv.lake import LakeHistoryError
from feedkv.testing.iceberg_rest import IcebergRestServer
from feedkv.testing.lake_rows import crash_mid_window
from feedkv.testing.lake_rows import lake_rows as rows
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import Timestamp

T0 = Timestamp(1_700_000_000_000_000_000, 0)


def ts(n: int) -> Timestamp:
    return Timestamp(T0.wall + n * 1_000_000, 0)


@pytest.fixture(params=["delta", "iceberg", "iceberg-rest"])
def lake_uri(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "delta":
        yield f"delta://{tmp_path}/lake"
    elif request.param == "iceberg":
        yield f"iceberg://cat/feeds?warehouse={tmp_path}/warehouse"
    else:
        with IcebergRestServer(str(tmp_path / "rest")) as server:
            yield f"iceberg://cat/feeds?catalog_uri={server.url}"


def with_history(uri: str, n: int) -> str:
    return f"{uri}{'&' if '?' in uri else '?'}marker_history={n}"


def parse(uri: str) -> SinkURI:
    return parse_sink_uri(uri, sink_defaults(uri, parse_options((), now=T0)))


def commit(uri: str, window: Timestamp, *batches: tuple[str, pa.RecordBatch]) -> None:
    sink = lake.make(parse(uri), parse_options((), now=T0))
    try:
        sink.emit_batches(batches)
        sink.commit_window(window, ["a", "b"])
    finally:
        sink.close()


def values(tables: dict[str, pa.Table]) -> dict[str, list[tuple[int, str]]]:
    return {
        name: sorted((r["k"], r["v"]) for r in table.to_pylist()) for name, table in tables.items()
    }


def three_windows(uri: str) -> None:
    """Windows ending at 10, 20 and 30; each moves row 1 of a and b to a new value."""
    for n, value in ((10, "x"), (20, "y"), (30, "z")):
        kind = "c" if n == 10 else "u"
        commit(
            uri,
            ts(n),
            ("a", rows((1, value, kind, ts(n - 5)))),
            ("b", rows((1, value, kind, ts(n - 5)))),
        )


# The history's pure parts.


def test_history_names_sort_as_their_timestamps_and_read_back() -> None:
    stamps = [Timestamp(5, 0), Timestamp(5, 3), Timestamp(40, 0), Timestamp(1 << 62, 1)]
    names = [history_name(t) for t in stamps]
    assert sorted(names) == names
    assert [parse_history_name(n) for n in names] == stamps
    assert parse_history_name(f"{names[0]}.a1b2.tmp") is None


def test_a_time_reads_at_the_newest_retained_marker_at_or_below_it() -> None:
    retained = [ts(10), ts(20), ts(30)]
    assert marker_at(retained, ts(25)) == ts(20)
    assert marker_at(retained, ts(20)) == ts(20)
    assert marker_at(retained, ts(99)) == ts(30)
    assert marker_at(retained, ts(9)) is None
    assert pruned(retained, 2) == [ts(10)]
    assert pruned(retained, 5) == []


# Reading as of an older marker.


def test_reading_at_an_older_time_gives_every_table_as_of_the_marker_at_or_below_it(
    lake_uri: str,
) -> None:
    three_windows(lake_uri)

    at_25 = feedkv.lake.read_consistent(lake_uri, at=ts(25))
    assert at_25 is not None and at_25.resolved == ts(20)
    assert values(feedkv.lake.read_tables(lake_uri, at_25)) == {
        "a": [(1, "y")],
        "b": [(1, "y")],
    }
    assert values(feedkv.lake.read_tables(lake_uri, at=ts(10))) == {
        "a": [(1, "x")],
        "b": [(1, "x")],
    }
    newest = feedkv.lake.read_consistent(lake_uri)
    assert feedkv.lake.read_consistent(lake_uri, at=ts(99)) == newest
    assert newest is not None and newest.resolved == ts(30)
    # the forms at= takes: decimal text and Decimal (AS OF SYSTEM TIME's), datetime
    assert feedkv.lake.read_consistent(lake_uri, at=str(ts(25))) == at_25
    assert feedkv.lake.read_consistent(lake_uri, at=Decimal(str(ts(25)))) == at_25
    when = datetime.fromtimestamp(ts(25).wall / 1e9, UTC)
    assert feedkv.lake.read_consistent(lake_uri, at=when) == at_25
    assert values(feedkv.lake.snapshot(lake_uri, ["b"], at=ts(25))) == {"b": [(1, "y")]}


def test_reading_before_the_oldest_retained_marker_is_refused_naming_it(lake_uri: str) -> None:
    uri = with_history(lake_uri, 2)
    three_windows(uri)

    with pytest.raises(LakeHistoryError, match=f"oldest marker .* retains is at {ts(20)}") as err:
        feedkv.lake.read_consistent(uri, at=ts(15))
    assert err.value.readable_from == ts(20)
    assert isinstance(err.value, BatchTimestampBeforeGCError)  # the tree's "history removed"
    at_20 = feedkv.lake.read_consistent(uri, at=ts(20))
    assert at_20 is not None and at_20.resolved == ts(20)
    tables = lake.lake_tables(parse(uri))
    try:
        assert tables.marker_history() == [ts(20), ts(30)]
    finally:
        tables.close()


def test_before_the_first_window_there_is_nothing_to_read(lake_uri: str) -> None:
    assert feedkv.lake.read_consistent(lake_uri, at=ts(5)) is None
    assert feedkv.lake.read_tables(lake_uri, at=ts(5)) == {}


def test_a_time_a_crash_left_half_committed_reads_at_the_marker_before_it(lake_uri: str) -> None:
    commit(lake_uri, ts(10), ("a", rows((1, "a0", "c", ts(1)))), ("b", rows((1, "b0", "c", ts(1)))))
    # A transaction at ts(15) moved a value from a to b; table a took the window ending
    # at 20, then the node died before b did.
    window = [("a", rows((1, "a1", "u", ts(15)))), ("b", rows((1, "b1", "u", ts(15))))]
    crash_mid_window(lake.lake_tables(parse(lake_uri)), window, ts(20), "b")
    # The restart commits one larger window: 20 is never a marker.
    commit(lake_uri, ts(30), *window)

    at_20 = feedkv.lake.read_consistent(lake_uri, at=ts(20))
    assert at_20 is not None and at_20.resolved == ts(10)
    assert values(feedkv.lake.read_tables(lake_uri, at_20)) == {
        "a": [(1, "a0")],
        "b": [(1, "b0")],
    }
    assert values(feedkv.lake.read_tables(lake_uri, at=ts(30))) == {
        "a": [(1, "a1")],
        "b": [(1, "b1")],
    }


def vacuum_or_expire(uri: str, table: str, version: int) -> None:
    """Remove ``table``'s history up to ``version``: Delta's VACUUM with no retention
    (the files older versions alone use), or expiring the Iceberg snapshot."""
    if uri.startswith("delta://"):
        DeltaTable(f"{parse(uri).path}/{table}").vacuum(
            retention_hours=0, enforce_retention_duration=False, dry_run=False
        )
        return
    catalog = IcebergPlace.of(parse(uri)).open()
    try:
        tbl = catalog.load_table(("feeds", table))
        tbl.maintenance.expire_snapshots().by_id(version).commit()
    finally:
        close = getattr(catalog, "close", None)
        if close is not None:
            close()
        engine = getattr(catalog, "engine", None)
        if engine is not None:
            engine.dispose()


def test_a_marker_whose_versions_were_vacuumed_or_expired_is_refused_naming_the_oldest_readable(
    lake_uri: str,
) -> None:
    three_windows(lake_uri)
    first = feedkv.lake.read_consistent(lake_uri, at=ts(10))
    assert first is not None
    vacuum_or_expire(lake_uri, "a", first.versions["a"])

    with pytest.raises(LakeHistoryError, match=r"table a's version .* vacuumed or expired") as err:
        feedkv.lake.read_tables(lake_uri, at=ts(15))
    # VACUUM without retention removes every file the newest version does not use; the
    # expired Iceberg snapshot is the first one only
    oldest = ts(30) if lake_uri.startswith("delta") else ts(20)
    assert err.value.readable_from == oldest
    assert f"read at or after {oldest}" in str(err.value)
    assert values(feedkv.lake.read_tables(lake_uri, at=oldest)) == {
        "a": [(1, "z" if oldest == ts(30) else "y")],
        "b": [(1, "z" if oldest == ts(30) else "y")],
    }


def test_a_bad_marker_history_is_refused_at_create(db: DB, tmp_path: Path) -> None:
    db.sql("CREATE TABLE a (k INT PRIMARY KEY, v STRING)")
    for bad in ("0", "-1", "lots"):
        with pytest.raises(SQLError, match=r"marker_history=.* must be a whole number"):
            db.sql(
                f"CREATE CHANGEFEED FOR TABLE a INTO 'delta://{tmp_path}/l?marker_history={bad}'"
            )


# A changefeed into a lake, read at times between its markers.


def test_every_time_between_a_changefeeds_markers_reads_as_its_source_did(
    db: DB, lake_uri: str
) -> None:
    db.sql("CREATE TABLE a (k INT PRIMARY KEY, v INT)")
    db.sql("CREATE TABLE b (k INT PRIMARY KEY, v INT)")
    db.sql("INSERT INTO a VALUES (1, 100)")
    db.sql("INSERT INTO b VALUES (1, 100)")
    [(job_id,)] = db.sql(
        f"CREATE CHANGEFEED FOR TABLE a, b INTO '{lake_uri}' WITH min_checkpoint_frequency='0s'"
    ).rows

    def reached(past: Decimal) -> bool:
        error = db.changefeeds.error(job_id)
        if error is not None:
            raise AssertionError(f"the changefeed failed: {error}")
        marker = feedkv.lake.read_consistent(lake_uri)
        return marker is not None and Decimal(str(marker.resolved)) >= past

    def now() -> Decimal:
        [(value,)] = db.sql("SELECT cluster_logical_timestamp()").rows
        assert isinstance(value, Decimal)
        return value

    start = now()
    wait_until(lambda: reached(start), timeout_s=60, what="the lake's first marker")
    times: list[Decimal] = []
    for step in range(1, 5):
        session = db.session()
        try:  # a bank transfer across the two tables: the total stays 200
            session.execute("BEGIN")
            session.execute(f"UPDATE a SET v = v - {step} WHERE k = 1")
            session.execute(f"UPDATE b SET v = v + {step} WHERE k = 1")
            session.execute("COMMIT")
        finally:
            session.close()
        times.append(now())
        wait_until(lambda: reached(times[-1]), timeout_s=60, what="the lake's marker past it")
    db.sql(f"CANCEL JOB {job_id}")

    chosen = []
    for at in times:  # each time is read at the newest marker at or below it
        marker = feedkv.lake.read_consistent(lake_uri, at=at)
        assert marker is not None and Decimal(str(marker.resolved)) <= at
        chosen.append(marker.resolved)
        tables = feedkv.lake.read_tables(lake_uri, marker)
        for name in ("a", "b"):
            result = db.sql(f"SELECT k, v FROM {name} AS OF SYSTEM TIME {marker.resolved}")
            source = sorted(tuple(r) for r in result.rows)
            assert sorted((r["k"], r["v"]) for r in tables[name].to_pylist()) == source
        assert sum(r["v"] for t in tables.values() for r in t.to_pylist() if r["k"] == 1) == 200
    assert chosen == sorted(set(chosen))  # a marker of its own for each transfer
