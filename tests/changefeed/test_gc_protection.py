"""Garbage collection and changefeed jobs: a job's history is kept while it has not
ended (paused too), and a job that lost it fails saying so.

The store's GC queue runs here by hand (``Store.collect_garbage``) with a TTL of a few
milliseconds, so whatever a job does not protect goes at once."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from decimal import Decimal
from pathlib import Path

import pytest

import feedkv
import feedkv.lake
from feedkv import DB
from feedkv.changefeed.jobs import SHOW_COLUMNS
from feedkv.changefeed.registry import _failure
from feedkv.errors import BatchTimestampBeforeGCError, SQLError
from feedkv.kv.store import Store, StoreConfig
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import Timestamp

FAST = "resolved='0s', min_checkpoint_frequency='0s'"
HIGH_WATER = SHOW_COLUMNS.index("high_water_timestamp")


@pytest.fixture
def db(tmp_path: Path, store_config: StoreConfig) -> Iterator[DB]:
    config = replace(store_config, gc_ttl_ns=1_000_000, gc_interval_s=3600.0)
    database = feedkv.connect(tmp_path / "store", config=config, changefeed_runner="thread")
    yield database
    database.close()


def store_of(db: DB) -> Store:
    assert db.node is not None
    return db.node.store


def updated_rows(out: Path) -> list[tuple[str, int, str]]:
    """Every (updated, k, v) the sink holds, in the order of the rows' timestamps."""
    rows = []
    for path in out.rglob("*.ndjson"):
        for line in path.read_text().splitlines():
            message = json.loads(line)
            if "after" in message:
                rows.append((message["updated"], message["after"]["k"], message["after"]["v"]))
    return sorted(rows)


def updated_values(out: Path) -> list[tuple[int, str]]:
    """Every (k, v) the sink holds, in the order of the rows' timestamps."""
    return [(k, v) for _ts, k, v in updated_rows(out)]


def wait_status(db: DB, job_id: int, status: str) -> None:
    def reached() -> bool:
        return bool(db.sql(f"SHOW CHANGEFEED JOB {job_id}").rows[0][3] == status)

    wait_until(reached, timeout_s=30, what=f"job {job_id} {status}")


def versions_once_past(db: DB, table: str, k: int, start: int, end: int) -> Timestamp:
    """Write versions ``v<start>`` .. ``v<end - 1>`` of row ``k``; returns a time after
    the first and before the others (a read there needs history GC may remove)."""
    db.sql(f"UPSERT INTO {table} VALUES ({k}, 'v{start}')")
    middle = db.now()
    for i in range(start + 1, end):
        db.sql(f"UPSERT INTO {table} VALUES ({k}, 'v{i}')")
    return middle


def wait_closed_past(db: DB, ts: Timestamp) -> None:
    store = store_of(db)
    wait_until(
        lambda: all(store.closed_timestamp(d.range_id) > ts for d in store.descriptors()),
        timeout_s=30,
        what=f"every range closed past {ts}",
    )


def paused_job(db: DB, out: Path) -> int:
    """A job on a new table t whose high-water mark passed t's first row, then was
    paused (so resuming it sends no row twice: the file sink is at-least-once)."""
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    [(job_id,)] = db.sql(f"CREATE CHANGEFEED FOR t INTO 'file://{out}' WITH updated, {FAST}").rows
    db.sql("INSERT INTO t VALUES (1, 'v0')")
    wait_until(lambda: updated_values(out) == [(1, "v0")], timeout_s=30, what="the first row")
    [first] = [Decimal(ts) for ts, _k, _v in updated_rows(out)]

    def past_first_row() -> bool:
        high_water = db.sql(f"SHOW CHANGEFEED JOB {job_id}").rows[0][HIGH_WATER]
        return high_water is not None and high_water >= first

    wait_until(past_first_row, timeout_s=30, what="the high-water mark past the first row")
    db.sql(f"PAUSE JOB {job_id}")
    return int(job_id)


def test_a_paused_job_keeps_its_history_and_unwatched_tables_lose_theirs(
    db: DB, tmp_path: Path
) -> None:
    db.sql("CREATE TABLE u (k INT PRIMARY KEY, v STRING)")
    out = tmp_path / "out"
    job_id = paused_job(db, out)
    middle_t = versions_once_past(db, "t", 1, 1, 4)
    middle_u = versions_once_past(db, "u", 1, 0, 3)
    wait_closed_past(db, db.now())

    assert store_of(db).collect_garbage() > 0
    with pytest.raises(BatchTimestampBeforeGCError):
        db.sql(f"SELECT v FROM u AS OF SYSTEM TIME {middle_u.wall}.{middle_u.logical:010d}")
    # t's versions after the job's high-water mark are all still there.
    assert db.sql(f"SELECT v FROM t AS OF SYSTEM TIME {middle_t.wall}.{middle_t.logical:010d}")

    db.sql(f"RESUME JOB {job_id}")
    want = [(1, f"v{i}") for i in range(4)]
    wait_until(lambda: updated_values(out) == want, timeout_s=30, what="every version of t")


def test_a_canceled_job_no_longer_holds_history_back(db: DB, tmp_path: Path) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    [(job_id,)] = db.sql(
        f"CREATE CHANGEFEED FOR t INTO 'file://{tmp_path / 'out'}' WITH {FAST}"
    ).rows
    db.sql(f"PAUSE JOB {job_id}")
    middle = versions_once_past(db, "t", 1, 0, 3)
    wait_closed_past(db, db.now())
    store_of(db).collect_garbage()
    assert db.sql(f"SELECT v FROM t AS OF SYSTEM TIME {middle.wall}.{middle.logical:010d}")

    db.sql(f"CANCEL JOB {job_id}")
    store_of(db).collect_garbage()
    with pytest.raises(BatchTimestampBeforeGCError):
        db.sql(f"SELECT v FROM t AS OF SYSTEM TIME {middle.wall}.{middle.logical:010d}")


def test_a_cursor_older_than_the_gc_threshold_is_refused(db: DB, tmp_path: Path) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    middle = versions_once_past(db, "t", 1, 0, 3)
    wait_closed_past(db, db.now())
    store_of(db).collect_garbage()
    cursor = f"{middle.wall}.{middle.logical:010d}"
    with pytest.raises(SQLError) as raised:
        db.sql(f"CREATE CHANGEFEED FOR t INTO 'file://{tmp_path / 'out'}' WITH cursor='{cursor}'")
    assert raised.value.code == "22023"
    assert "too old" in raised.value.message and "garbage collected" in raised.value.message
    assert not db.sql("SHOW CHANGEFEED JOBS").rows


def test_a_job_whose_history_was_collected_fails_saying_so(db: DB, tmp_path: Path) -> None:
    out = tmp_path / "out"
    job_id = paused_job(db, out)
    versions_once_past(db, "t", 1, 1, 4)
    wait_closed_past(db, db.now())
    store = store_of(db)
    protected = store.protected
    store.protected = list  # the protection is lost (as if it had expired)
    store.collect_garbage()
    store.protected = protected

    db.sql(f"RESUME JOB {job_id}")
    wait_status(db, job_id, "failed")
    error = db.sql(f"SHOW CHANGEFEED JOB {job_id}").rows[0][SHOW_COLUMNS.index("error")]
    assert "fell behind the garbage-collection threshold" in error
    assert "create a new changefeed" in error


def test_the_failure_message_names_gc_even_as_text_from_spark() -> None:
    cause = BatchTimestampBeforeGCError(Timestamp(5, 0), Timestamp(9, 0), "export")
    assert "fell behind the garbage-collection threshold" in _failure(cause)
    from_spark = RuntimeError(f"Job aborted ... feedkv.errors.BatchTimestampBeforeGCError: {cause}")
    assert "fell behind the garbage-collection threshold" in _failure(from_spark)
    assert _failure(RuntimeError("sink down")) == "sink down"


def test_a_lake_job_keeps_the_history_its_lake_tables_have_not_taken(
    db: DB, tmp_path: Path
) -> None:
    """A lake job's high-water mark moves only once a window is committed into its lake
    tables, so while the lake refuses commits GC keeps the versions it has not taken,
    and each lands once when the lake is back."""
    lake = tmp_path / "lake"
    uri = f"delta://{lake}"
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    [(job_id,)] = db.sql(
        f"CREATE CHANGEFEED FOR t INTO '{uri}' WITH lake_mode = 'changelog', {FAST}"
    ).rows
    db.sql("INSERT INTO t VALUES (1, 'v0')")

    def changelog() -> list[str]:
        tables = feedkv.lake.read_tables(uri)
        rows = tables["t"].to_pylist() if "t" in tables else []
        return sorted(r["v"] for r in rows if r["_change_type"] in ("insert", "update_postimage"))

    wait_until(lambda: changelog() == ["v0"], timeout_s=30, what="the first row in the lake")
    # The Delta table taken away: every commit into it fails, and is retried.
    (lake / "t").rename(lake / "t.away")
    (lake / "t").write_text("not a Delta table")
    middle = versions_once_past(db, "t", 1, 1, 4)
    wait_closed_past(db, db.now())

    store_of(db).collect_garbage()
    assert db.sql(f"SELECT v FROM t AS OF SYSTEM TIME {middle.wall}.{middle.logical:010d}")

    (lake / "t").unlink()
    (lake / "t.away").rename(lake / "t")
    want = [f"v{i}" for i in range(4)]

    def landed() -> bool:
        error = db.sql(f"SHOW CHANGEFEED JOB {job_id}").rows[0][SHOW_COLUMNS.index("error")]
        if error:
            raise AssertionError(f"the changefeed failed: {error}")
        return changelog() == want

    wait_until(landed, timeout_s=60, what="every version of t in the lake, once")
