"""Changefeed jobs on Spark into a file sink stay exactly-once through PAUSE / RESUME,
ALTER CHANGEFEED ADD, and SIGKILLs of the node that drives the Spark query.

Exactly-once is checked against the store: every committed row version after the job's
start (an incremental export of the table) is in the published files once, and nothing
else is."""

from __future__ import annotations

import json
import os
import random
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import feedkv
from feedkv import DB
from feedkv.changefeed.sinks.cloud_storage import file_topic
from feedkv.kv.store import StoreConfig
from feedkv.sql import catalog
from feedkv.sql.row_codec import decode_row_key, table_span
from feedkv.testing.node_process import NodeProcess
from feedkv.testing.sql_workload import BackgroundWriter
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import Timestamp

DEADLINE_S = 240.0  # Spark starts slowly on a loaded machine

# (topic, primary key, updated): one row version as the sink published it.
Version = tuple[str, tuple[Any, ...], Timestamp]


# Reading the sink and the store.


def published(out: Path) -> Counter[Version]:
    """Every row version in the sink's published files, counted (``*.RESOLVED`` are
    markers). The directory holds nothing else but hidden files being written, as a
    loader that copies all of it needs: the job's staging and manifests are beside it
    (``.out.feedkv``)."""
    versions: Counter[Version] = Counter()
    stray = []
    for path in sorted(out.rglob("*")):
        relative = path.relative_to(out)
        if not path.is_file() or path.name.endswith(".RESOLVED"):
            continue
        if path.name.startswith(".") and path.name.endswith(".tmp"):
            continue  # NB: a file being written, hidden from loaders until renamed
        if not path.name.endswith(".ndjson"):
            stray.append(str(relative))
            continue
        topic = file_topic(path.name)
        for line in path.read_text().splitlines():
            message = json.loads(line)
            versions[(topic, tuple(message["key"]), Timestamp.parse(message["updated"]))] += 1
    assert not stray, f"files in the sink that are neither data nor markers: {stray}"
    return versions


def committed(db: DB, table: str, after: Timestamp) -> set[Version]:
    """Every committed version of ``table``'s rows with a timestamp above ``after``, up to
    now, read from the store (an incremental export)."""
    now = db.now()
    snapshot = catalog.Snapshot(db, now)
    desc = catalog.table_by_name(snapshot, catalog.database_by_name(snapshot, "defaultdb"), table)
    return {
        (table, decode_row_key(desc, version.key)[0], version.ts)
        for version in db.export(table_span(desc.id), after, now)
    }


def assert_exactly_once(out: Path, expected: set[Version]) -> None:
    seen = published(out)
    duplicated = sorted((v, n) for v, n in seen.items() if n > 1)
    missing = sorted(expected - seen.keys())
    extra = sorted(seen.keys() - expected)
    assert not (duplicated or missing or extra), (
        f"{len(expected)} versions expected, {sum(seen.values())} published: "
        f"{len(duplicated)} duplicated {duplicated[:5]}, {len(missing)} missing {missing[:5]}, "
        f"{len(extra)} unexpected {extra[:5]}"
    )


# The job, through SQL.


def show_job(db: DB, job_id: int) -> dict[str, Any]:
    result = db.sql(f"SHOW CHANGEFEED JOB {job_id}")
    [row] = result.rows
    return dict(zip(result.columns, row, strict=True))


def high_water(db: DB, job_id: int) -> Timestamp | None:
    """The job's high-water mark as SHOW CHANGEFEED JOB gives it (``None`` before any);
    a job that ended, or paused on an error, fails the test."""
    job = show_job(db, job_id)
    if job["status"] in ("failed", "canceled", "succeeded") or (
        job["status"] == "paused" and job["error"]
    ):
        raise AssertionError(f"changefeed job {job_id} is {job['status']}: {job['error']}")
    value: Decimal | None = job["high_water_timestamp"]
    return Timestamp.parse(format(value, "f")) if value is not None else None


def wait_for_high_water(db: DB, job_id: int, above: Timestamp | None) -> Timestamp:
    """Wait until the job's high-water mark is at or past ``above`` (past none: set)."""

    def reached() -> Timestamp | None:
        mark = high_water(db, job_id)
        return mark if mark is not None and (above is None or mark >= above) else None

    mark = wait_until(reached, timeout_s=DEADLINE_S, poll_s=0.1, what=f"high water >= {above}")
    assert mark is not None
    return mark


def create_job(db: DB, table: str, out: Path, frequency: str) -> int:
    [(job_id,)] = db.sql(
        f"CREATE CHANGEFEED FOR TABLE {table} INTO 'file://{out}' WITH updated, key_in_value, "
        f"resolved = '{frequency}', min_checkpoint_frequency = '{frequency}'"
    ).rows
    return int(job_id)


def job_start(db: DB, job_id: int) -> Timestamp:
    """Where the job's feed starts (exclusive): the CREATE statement's timestamp."""
    record = db.changefeeds.record(job_id)
    assert record is not None
    return record.spec.start


# 1. Pause, resume and ALTER CHANGEFEED ADD on an embedded store.


def write_rows(db: DB, table: str, ids: range, value: str) -> int:
    """Insert ``ids``, update every other one, delete the last: one version per statement;
    returns how many statements (versions) that was."""
    for i in ids:
        db.sql(f"INSERT INTO {table} VALUES ($1, $2)", i, value)
    for i in ids[::2]:
        db.sql(f"UPDATE {table} SET v = $2 WHERE id = $1", i, value + "'")
    db.sql(f"DELETE FROM {table} WHERE id = $1", ids[-1])
    return len(ids) + len(ids[::2]) + 1


def test_pause_resume_and_alter_add_are_exactly_once(spark: Any, db: DB, tmp_path: Path) -> None:
    """``u`` is added with no scan: only its changes after the high-water mark are sent.
    ``w`` is added ``WITH initial_scan`` (CockroachDB's ALTER CHANGEFEED page: the added
    table is scanned when the changefeed resumes): its rows as of the point the job
    resumes from, once, then its changes; a later pause and resume scans it no more."""
    out = tmp_path / "out"
    db.sql("CREATE TABLE t (id INT PRIMARY KEY, v STRING)")
    db.sql("CREATE TABLE u (id INT PRIMARY KEY, v STRING)")
    db.sql("CREATE TABLE w (id INT PRIMARY KEY, v STRING)")
    job_id = create_job(db, "t", out, "200ms")
    start = job_start(db, job_id)
    written_t = write_rows(db, "t", range(1, 11), "running")
    write_rows(db, "u", range(1, 6), "unwatched")  # before u is a target: never sent
    write_rows(db, "w", range(1, 6), "before")  # 1-4 are there when w is added
    wait_for_high_water(db, job_id, db.now())

    db.sql(f"PAUSE JOB {job_id}")
    wait_until(
        lambda: show_job(db, job_id)["status"] == "paused",
        timeout_s=DEADLINE_S,
        poll_s=0.1,
        what="the job paused",
    )
    written_t += write_rows(db, "t", range(11, 16), "paused")
    write_rows(db, "u", range(6, 11), "paused")
    write_rows(db, "w", range(6, 11), "paused")
    db.sql(f"ALTER CHANGEFEED {job_id} ADD u ADD w WITH initial_scan")
    added_after = high_water(db, job_id)  # u is followed from here, with no scan
    assert added_after is not None
    job = show_job(db, job_id)
    assert job["status"] == "paused"
    assert job["full_table_names"].values == tuple(f"defaultdb.public.{t}" for t in "tuw")
    assert "FOR TABLE defaultdb.public.t, TABLE defaultdb.public.u, TABLE" in job["description"]

    db.sql(f"RESUME JOB {job_id}")
    written_t += write_rows(db, "t", range(16, 21), "resumed")
    write_rows(db, "u", range(11, 16), "resumed")
    write_rows(db, "w", range(11, 16), "resumed")
    wait_for_high_water(db, job_id, db.now())
    assert show_job(db, job_id)["status"] == "running"
    db.sql(f"PAUSE JOB {job_id}")  # the mark moved past the scan: no second one
    wait_until(
        lambda: show_job(db, job_id)["status"] == "paused",
        timeout_s=DEADLINE_S,
        poll_s=0.1,
        what="the job paused again",
    )
    db.sql(f"RESUME JOB {job_id}")
    write_rows(db, "w", range(16, 18), "again")
    wait_for_high_water(db, job_id, db.now())

    expected_t = committed(db, "t", start)
    assert len(expected_t) == written_t  # the store holds what the workload wrote
    expected_u = committed(db, "u", added_after)
    assert {key for _topic, key, _ts in expected_u} >= {(i,) for i in range(6, 16)}
    # w's scan: the rows there before the pause, as of the point the job resumed from
    scanned = {v for v in published(out) if v[0] == "w" and v[1][0] < 6}
    [scanned_at] = {ts for _topic, _key, ts in scanned}
    assert scanned_at >= added_after
    assert {key for _topic, key, _ts in scanned} == {(i,) for i in range(1, 5)}
    expected_w = scanned | committed(db, "w", scanned_at)
    assert {key for _topic, key, _ts in expected_w} >= {(i,) for i in range(6, 18)}
    assert_exactly_once(out, expected_t | expected_u | expected_w)
    db.sql(f"CANCEL JOB {job_id}")


# 2. SIGKILL the node driving the Spark query: once, and again and again in the soak run.


class Writer(BackgroundWriter):
    """Inserts, updates and deletes rows of ``t``; ``done`` counts the statements."""

    pace_s = 0.01

    def __init__(self, url: str, phase: int, rng: random.Random) -> None:
        super().__init__(url, f"writer-{phase}")
        self._next_id = phase * 1_000_000
        self._rng = random.Random(rng.random())
        self._ids: list[int] = []

    def step(self, db: DB) -> int:
        choice, ids = self._rng.random(), self._ids
        if choice < 0.5 or len(ids) < 5:
            self._next_id += 1
            ids.append(self._next_id)
            db.sql("INSERT INTO t VALUES ($1, $2)", self._next_id, 0)
        elif choice < 0.9:
            db.sql("UPDATE t SET v = v + 1 WHERE id = $1", self._rng.choice(ids))
        else:
            db.sql("DELETE FROM t WHERE id = $1", ids.pop(self._rng.randrange(5)))
        return 1


NODE_ARGS = ("--spark-master", "local[2]", "--closed-ts-target", "200ms")


def kill_the_driver(tmp_path: Path, nodes: list[NodeProcess], kills: int) -> None:
    """SIGKILL the node driving the job ``kills`` times, each time a node started again
    on the store, while a writer changes ``t``: every version is published once."""
    store, out = tmp_path / "store", tmp_path / "out"
    rng = random.Random(20260311)
    nodes.append(NodeProcess(store, *NODE_ARGS))
    with feedkv.connect(nodes[-1].url) as client:
        client.sql("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
        job_id = create_job(client, "t", out, "200ms")
        start = job_start(client, job_id)
    orphans: list[int] = []
    for phase in range(kills):
        node = nodes[-1]
        with feedkv.connect(node.url) as client, Writer(node.url, phase, rng) as writer:
            # Kill once batches were committed since this start (the mark moved), a few
            # writes later: by then the next batches are in flight.
            mark = high_water(client, job_id)
            wait_for_high_water(client, job_id, mark.next() if mark else None)
            writer.wait_for(rng.randint(1, 20))
            orphans += node.kill_all()
        nodes.append(NodeProcess(store, *NODE_ARGS))

    with feedkv.connect(nodes[-1].url) as client:
        with Writer(nodes[-1].url, kills, rng) as writer:
            mark = high_water(client, job_id)
            wait_for_high_water(client, job_id, mark.next() if mark else None)
            writer.wait_for(20)
        assert writer.failure is None
        wait_for_high_water(client, job_id, client.now())
        assert show_job(client, job_id)["status"] == "running"
        expected = committed(client, "t", start)
        assert_exactly_once(out, expected)
        client.sql(f"CANCEL JOB {job_id}")
    assert nodes[-1].terminate(timeout_s=120) == 0
    assert not orphans, f"processes outlived their killed node: {orphans}"


@pytest.mark.slow(110)
@pytest.mark.timeout(900)
def test_killing_the_driver_loses_and_duplicates_nothing(
    tmp_path: Path, nodes: list[NodeProcess]
) -> None:
    kill_the_driver(tmp_path, nodes, kills=1)


@pytest.mark.soak  # NB: each kill starts a Spark driver again (~50 s): one runs above
@pytest.mark.timeout(1800)
def test_killing_the_driver_repeatedly_loses_and_duplicates_nothing(
    tmp_path: Path, nodes: list[NodeProcess]
) -> None:
    kill_the_driver(tmp_path, nodes, kills=5)


@pytest.mark.slow(50)
def test_a_job_whose_spark_driver_cannot_start_runs_once_a_node_can_start_it(
    tmp_path: Path, nodes: list[NodeProcess], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, out = tmp_path / "store", tmp_path / "out"
    # A Spark whose launcher dies as a gRPC-forked child does (SIGABRT before exec).
    broken = tmp_path / "broken-spark"
    (broken / "bin").mkdir(parents=True)
    (broken / "bin" / "spark-submit").write_text("#!/bin/sh\nkill -ABRT $$\n")
    (broken / "bin" / "spark-submit").chmod(0o755)
    spark_home = os.environ.get("SPARK_HOME")
    monkeypatch.setenv("SPARK_HOME", str(broken))
    nodes.append(NodeProcess(store, *NODE_ARGS))
    with feedkv.connect(nodes[-1].url) as client:
        client.sql("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
        job_id = create_job(client, "t", out, "200ms")
        start = job_start(client, job_id)

        def launch_failed() -> bool:
            job = show_job(client, job_id)
            return "JAVA_GATEWAY_EXITED" in job["error"] + job["running_status"]

        wait_until(launch_failed, timeout_s=DEADLINE_S, poll_s=0.1, what="a failed launch")
        for i in range(10):
            client.sql("INSERT INTO t VALUES ($1, $2)", i, i)
    assert nodes[-1].terminate(timeout_s=120) == 0

    if spark_home is None:
        monkeypatch.delenv("SPARK_HOME")
    else:
        monkeypatch.setenv("SPARK_HOME", spark_home)
    nodes.append(NodeProcess(store, *NODE_ARGS))
    with feedkv.connect(nodes[-1].url) as client:
        wait_for_high_water(client, job_id, client.now())
        assert_exactly_once(out, committed(client, "t", start))
        client.sql(f"CANCEL JOB {job_id}")
    assert nodes[-1].terminate(timeout_s=120) == 0


# 4. A failing sink, as SHOW CHANGEFEED JOB reports it (issue 43, item 1).


def test_a_failing_sink_shows_its_retryable_error_and_a_terminal_one_fails_the_job(
    spark: Any, db: DB, tmp_path: Path
) -> None:
    """As on the thread runner (tests/changefeed/test_sink_failures.py, with CockroachDB's
    behaviour cited there): a sink that refuses connections keeps the job running with
    the error and its time in ``running_status`` (cockroachdb/cockroach#61906); a sink
    directory that is no longer one fails the job (a terminal error)."""
    import socket

    db.sql("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    db.sql("INSERT INTO t VALUES (1, 1)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    [(webhook_job,)] = db.sql(
        f"CREATE CHANGEFEED FOR TABLE t INTO 'webhook-http://{dead}/x' WITH "
        """webhook_sink_config='{"Retry": {"Max": 1, "Backoff": "10ms"}}'"""
    ).rows

    def retrying() -> dict[str, Any] | None:
        job = show_job(db, webhook_job)
        return job if job["running_status"].startswith("running: retryable error at ") else None

    job = wait_until(retrying, timeout_s=DEADLINE_S, poll_s=0.1, what="the retryable error")
    assert (job["status"], job["error"]) == ("running", "")
    assert f"cannot post a batch of 1 message of t to http://{dead}/x" in job["running_status"]
    db.sql(f"CANCEL JOB {webhook_job}")

    out = tmp_path / "out"
    file_job = create_job(db, "t", out, "200ms")
    wait_for_high_water(db, file_job, None)
    # NB: moved aside in one step: the job may be writing in it (removing its files
    # one by one raced with a manifest being written: "Directory not empty")
    out.rename(tmp_path / "moved aside")
    out.write_text("a file where the directory was")
    db.sql("INSERT INTO t VALUES (2, 2)")

    def failed() -> dict[str, Any] | None:
        job = show_job(db, file_job)
        return job if job["status"] == "failed" else None

    job = wait_until(failed, timeout_s=DEADLINE_S, poll_s=0.1, what="the job failed")
    assert str(out) in job["error"]


# 5. A script that ends without closing its store (issue 43, item 5).

SCRIPT = """
import sys
from pathlib import Path

import feedkv
from feedkv.kv.store import StoreConfig
from feedkv.testing.waiting import wait_until

store, out, ended = sys.argv[1:]
config = StoreConfig(sync=False, closed_ts_target_ns=200_000_000, closed_ts_interval_s=0.05)
db = feedkv.connect(store, config=config, spark_master="local[2]")
db.sql("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
db.sql("INSERT INTO t VALUES (1, 1)")
[(job_id,)] = db.sql(
    f"CREATE CHANGEFEED FOR TABLE t INTO 'file://{out}' WITH updated, key_in_value, "
    "resolved = '200ms', min_checkpoint_frequency = '200ms'"
).rows
wait_until(
    lambda: db.sql(f"SHOW CHANGEFEED JOB {job_id}").rows[0][6] is not None,
    timeout_s=240,
    what="the job's first high-water mark",
)
Path(ended).write_text(str(job_id))
raise SystemExit("the script ends here, without db.close()")
"""


@pytest.mark.slow(90)
def test_a_script_that_ends_without_close_exits_and_its_spark_job_resumes_at_the_next_open(
    spark: Any, tmp_path: Path
) -> None:
    """The script raises at its end with a Spark job running and its store open: the
    process must exit (its jobs stopped, their records still ``running``), and the job
    must run again when the store is opened again. Stopping the job prints nothing
    alarming (issue 43, item 23: no stack traces of the tasks a stop cancels)."""
    import subprocess
    import sys

    store, out, ended = tmp_path / "store", tmp_path / "out", tmp_path / "ended"
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    with (tmp_path / "stderr").open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, str(script), str(store), str(out), str(ended)], stderr=stderr
        )
        try:
            wait_until(ended.exists, timeout_s=DEADLINE_S, poll_s=0.1, what="the script's end")
            assert process.wait(timeout=60) == 1  # SystemExit with a message
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    printed = (tmp_path / "stderr").read_text()
    assert "the script ends here" in printed
    for alarming in ("TaskKilledException", "Traceback", "EOFError"):
        assert alarming not in printed
    job_id = int(ended.read_text())

    config = StoreConfig(sync=False, closed_ts_target_ns=200_000_000, closed_ts_interval_s=0.05)
    with feedkv.connect(store, config=config) as db:
        db.serving_url()
        assert show_job(db, job_id)["status"] == "running"
        db.sql("INSERT INTO t VALUES (2, 2)")
        wait_until(
            lambda: any(key == (2,) for _, key, _ in published(out)),
            timeout_s=DEADLINE_S,
            poll_s=0.1,
            what="the row written after the restart",
        )
        db.sql(f"CANCEL JOB {job_id}")


def test_set_cursor_back_on_a_paused_spark_job_emits_every_change_after_it_again(
    spark: Any, db: DB, tmp_path: Path
) -> None:
    """``ALTER CHANGEFEED <name> SET cursor`` on the Spark runner: resumed, the job emits
    every change after the cursor, though its query's checkpoint ends at the old
    high-water mark (it emitted nothing before), and none before it."""
    out = tmp_path / "out"
    db.sql("CREATE TABLE t (id INT PRIMARY KEY, v STRING)")
    db.sql(
        f"CREATE CHANGEFEED feed_t FOR TABLE t INTO 'file://{out}' WITH updated, key_in_value, "
        "resolved = '200ms', min_checkpoint_frequency = '200ms'"
    )
    [(job_id,)] = db.sql("SELECT job_id FROM [SHOW CHANGEFEED JOBS] WHERE name = 'feed_t'").rows
    start = job_start(db, job_id)
    write_rows(db, "t", range(1, 6), "before")
    early = db.now()
    write_rows(db, "t", range(6, 11), "after")
    wait_for_high_water(db, job_id, db.now())
    db.sql("PAUSE CHANGEFEED feed_t")
    wait_until(
        lambda: show_job(db, job_id)["status"] == "paused",
        timeout_s=DEADLINE_S,
        poll_s=0.1,
        what="the job paused",
    )
    assert_exactly_once(out, committed(db, "t", start))

    db.sql(f"ALTER CHANGEFEED feed_t SET cursor = '{early}'")
    db.sql("RESUME CHANGEFEED feed_t")
    wait_for_high_water(db, job_id, db.now())

    seen = published(out)
    moved = committed(db, "t", early)
    assert moved and all(seen[v] == 2 for v in moved), sorted(seen.items())
    assert all(seen[v] == 1 for v in committed(db, "t", start) - moved)
