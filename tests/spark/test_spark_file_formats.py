"""Changefeed jobs on Spark writing the row file formats (Parquet, CSV): rows travel
from the reading task to the writing task without their descriptor (Parquet rows in
blocks of columns), so these check that every version lands decoded with the right
schema, family by family."""

from __future__ import annotations

import glob
import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from feedkv import DB
from feedkv.changefeed.cockroach_parquet import CockroachParquet
from feedkv.changefeed.file_formats import parquet_bytes
from feedkv.changefeed.rows import RowDecoder, Target
from feedkv.changefeed.sink import Message
from feedkv.sql import catalog
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import Timestamp


def resolved(out: Path) -> Timestamp:
    markers = [
        json.loads(Path(p).read_text())["resolved"] for p in glob.glob(f"{out}/*/*.RESOLVED")
    ]
    return max((Timestamp.parse(m) for m in markers), default=Timestamp(0, 0))


def export(
    db: DB, table: str, out: Path, file_format: str, more: str = "", scan: str = "only"
) -> None:
    """Runs an ``initial_scan = 'only'`` job of ``table`` into ``out`` to its end
    (``more``: further options; ``scan``: another initial_scan, with an end_time)."""
    [(job_id,)] = db.sql(
        f"CREATE CHANGEFEED FOR TABLE {table} INTO 'file://{out}' "
        f"WITH format = {file_format}, initial_scan = '{scan}'{more}"
    ).rows
    assert db.changefeeds.wait(job_id, 120)
    assert db.changefeeds.error(job_id) is None


def test_parquet_files_hold_every_version_per_family_with_the_schema_of_its_time(
    db: DB, tmp_path: Path
) -> None:
    db.sql("CREATE TABLE f (id INT PRIMARY KEY, a STRING, b INT, FAMILY fa (id, a), FAMILY fb (b))")
    db.sql("INSERT INTO f VALUES (1, 'one', 10), (2, 'two', 20)")
    out = tmp_path / "out"
    [(job_id,)] = db.sql(
        f"CREATE CHANGEFEED FOR TABLE f INTO 'file://{out}' WITH format = parquet, diff, "
        "split_column_families, resolved = '200ms', min_checkpoint_frequency = '200ms'"
    ).rows
    db.sql("UPDATE f SET b = 11 WHERE id = 1")
    db.sql("ALTER TABLE f ADD COLUMN c INT NOT NULL DEFAULT 7")
    db.sql("INSERT INTO f (id, a, b, c) VALUES (3, 'three', 30, 33)")
    db.sql("DELETE FROM f WHERE id = 2")
    end = db.now()
    wait_until(
        lambda: resolved(out) >= end or db.changefeeds.error(job_id) is not None,
        timeout_s=120,
        what="the job to resolve past the last change",
    )
    assert db.changefeeds.error(job_id) is None

    rows = []
    for path in sorted(glob.glob(f"{out}/*/*.parquet")):
        family = "fa" if "-f.fa-" in Path(path).name else "fb"
        assert f"-f.{family}-" in Path(path).name
        for row in pq.read_table(path).to_pylist():
            rows.append((family, row))
    seen = {
        (family, row["id"], row["a"] if family == "fa" else row["b"], row["__crdb__event_type"])
        for family, row in rows
    }
    assert {
        ("fa", 1, "one", "c"),  # the initial scan
        ("fa", 2, "two", "c"),
        ("fb", 1, 10, "c"),
        ("fb", 2, 20, "c"),
        ("fb", 1, 11, "u"),  # diff tells an update from an insert
        ("fa", 3, "three", "c"),
        ("fb", 3, 30, "c"),
        ("fa", 2, None, "d"),
        ("fb", 2, None, "d"),
    } <= seen
    # The added column joins the first family: rows decoded after the change carry it,
    # backfilled rows too.
    assert [row["c"] for family, row in rows if family == "fa" and row["id"] == 3] == [33]
    assert 7 in [row.get("c") for family, row in rows if family == "fa" and row["id"] == 1]
    db.changefeeds.cancel(job_id)


def test_a_csv_export_is_the_table_as_of_its_start(db: DB, tmp_path: Path) -> None:
    db.sql("CREATE TABLE e (id INT PRIMARY KEY, name STRING, price DECIMAL(10,2))")
    db.sql("INSERT INTO e VALUES (1, 'a', 1.50), (2, 'b, with comma', NULL), (3, 'c', 3.00)")
    out = tmp_path / "export"
    export(db, "e", out, "csv")
    lines = [
        line
        for p in sorted(glob.glob(f"{out}/*/*.csv"))
        for line in Path(p).read_text().splitlines()
    ]
    assert sorted(lines) == ["1,a,1.50", '2,"b, with comma",', "3,c,3.00"]


def test_a_parquet_scan_in_blocks_writes_what_its_rows_one_by_one_would(
    db: DB, tmp_path: Path
) -> None:
    """Spark tasks pass a scan's rows to the writer in blocks of 8,192 (straight from
    their values); the files hold what the same rows one by one make."""
    db.sql(
        "CREATE TABLE p (k INT PRIMARY KEY, s STRING, f FLOAT, d DECIMAL, b BYTES, ok BOOL, "
        "day DATE, atz TIMESTAMPTZ, u UUID, j JSONB)"
    )
    values = (
        "'s', 1.5, 12.50, x'01ff', true, '2024-05-01', '2024-05-01 10:00:00+02', "
        "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{\"x\": [1, null]}'"
    )
    nulls = ", ".join(["NULL"] * 7)
    db.sql(f"INSERT INTO p VALUES (0, {values}), (1, NULL, 'NaN', {nulls})")
    for start in range(2, 9002, 1000):  # past one block
        db.sql(
            "INSERT INTO p (k, s, f) VALUES "
            + ", ".join(f"({k}, 'r{k}', {k}.25)" for k in range(start, start + 1000))
        )
    out = tmp_path / "scan"
    # NB: a scan at the cursor, then the end: initial_scan='only' refuses updated; a
    # batch every 200 ms (by default every 30 s: the batch that reached the end came
    # 30 s after the scan's)
    since, end = db.now(), db.now()
    more = f", updated, cursor='{since}', end_time='{end}', min_checkpoint_frequency='200ms'"
    export(db, "p", out, "parquet", more, scan="yes")
    got = pa.concat_tables(pq.read_table(p) for p in glob.glob(f"{out}/*/*.parquet"))
    got = got.sort_by("k")
    (scan_ts,) = set(got["__crdb__updated"].to_pylist())
    ts = Timestamp.parse(scan_ts)
    snapshot = catalog.Snapshot(db, ts)
    desc = catalog.table_by_name(snapshot, catalog.database_by_name(snapshot, "defaultdb"), "p")
    target = Target(desc.id)
    messages = [
        Message("p", b"", None, event.mvcc_ts, event.updated, desc.version, event)
        for event in RowDecoder(db, [target], ts).scan_rows(target, ts)
    ]
    layout = CockroachParquet(updated=True)
    want = pq.read_table(io.BytesIO(parquet_bytes(messages, None, layout)))
    assert got.num_rows == want.num_rows == 9002
    assert got.schema.equals(want.schema)
    assert repr(got.to_pylist()) == repr(want.to_pylist())  # NB: NaN != NaN
