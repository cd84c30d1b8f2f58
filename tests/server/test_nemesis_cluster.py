"""The nemesis on three ``feedkv start --replicas 3`` processes: a SQL bank moves money
while two changefeed jobs of its table run (into librdkafka's mock Kafka cluster, read
back by a consumer of the test, and into files), and nodes are SIGKILLed at random
moments (the bank range's lease holder, a follower of it, the node running the Kafka
job) and restarted. Then: no acknowledged transfer lost, the total unchanged, the
balances the replay of what committed, and every changefeed validator passes on what
each sink holds (at least once: a job that restarts sends again what followed its
last checkpoint), with every committed row version in it.

The bounded run (three kills, one of each role) is in the regular suite; the 20-kill run
is a soak test (``pytest --soak``), and so is a run whose jobs are Spark queries (the
nodes' default runner), where the files must hold every version exactly once. Each
prints how long writes took to resume after each kill (``-s``)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest

from feedkv.db import DB
from feedkv.errors import FeedKVError
from feedkv.testing.changefeed_validator import (
    ChangefeedMessage,
    ChangefeedValidator,
    parse_json_message,
)
from feedkv.testing.cluster import LocalCluster
from feedkv.testing.cluster_nemesis import (
    ROLES,
    Bank,
    any_client,
    healthy,
    kill_and_restart,
    plan_kills,
    resume_times,
    summary,
)
from feedkv.testing.kafka_mock import MockKafka, read_topic
from feedkv.testing.sql_workload import cloud_storage_messages, committed, published_files
from feedkv.testing.table_history import TableHistory
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import Timestamp

pytestmark = pytest.mark.xdist_group("cluster")

DEADLINE_S = 120.0  # two busy cores: generous
OPTIONS = "updated, diff, mvcc_timestamp, resolved = '500ms', min_checkpoint_frequency = '500ms'"
Streams = dict[str, list[ChangefeedMessage]]


@pytest.fixture
def kafka() -> Iterator[MockKafka]:
    made = MockKafka()
    yield made
    made.close()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path / "nodes", 3, "--replicas", "3", rebalance_interval="0s") as started:
        yield started


SPARK_ARGS = ("--changefeed-runner", "spark", "--spark-master", "local[1]")


class Job:
    """A changefeed job of table ``bank`` into ``uri``, and what its sink holds."""

    def __init__(self, db: DB, uri: str) -> None:
        [(job_id,)] = db.sql(f"CREATE CHANGEFEED FOR TABLE bank INTO '{uri}' WITH {OPTIONS}").rows
        self.id = int(job_id)
        self.uri = uri
        record = db.changefeeds.record(self.id)
        assert record is not None
        self.start = record.spec.start

    def coordinator(self, cluster: LocalCluster) -> int | None:
        """The index of the node whose lease runs the job now."""
        try:
            with any_client(cluster) as db:
                record = db.changefeeds.record(self.id)
        except (FeedKVError, RuntimeError):
            return None
        if record is None or record.lease is None:
            return None
        return record.lease.coordinator_id - 1

    def failure(self, db: DB) -> str | None:
        return db.changefeeds.error(self.id)

    def streams(self, kafka: MockKafka | None, out: Path | None) -> Streams:
        if kafka is not None:
            return {
                str(partition): [parse_json_message("bank", r.key, r.value) for r in records]
                for partition, records in read_topic(kafka.bootstrap, "bank").items()
            }
        assert out is not None
        names = published_files(out) if out.exists() else []
        return {"": cloud_storage_messages(names, lambda name: (out / name).read_bytes())}


def _lowest_resolved(streams: Streams) -> Timestamp | None:
    marks = [max((m.resolved for m in s if m.resolved), default=None) for s in streams.values()]
    if not marks or any(m is None for m in marks):
        return None
    return min(m for m in marks if m is not None)


def _check_sink(
    db: DB, streams: Streams, history: TableHistory, start: Timestamp, end: Timestamp, what: str
) -> dict[str, int]:
    """Every validator over what a sink holds, and every committed version of ``bank``
    in ``(start, end]`` in it; returns how many row messages it holds, and how many of
    them repeat one held already (at least once allows them)."""
    validator = ChangefeedValidator(history.row_at, history.table_at, partitions=streams.keys())
    validator.note_partitions(streams)
    try:
        validator.check()
    except AssertionError as exc:
        raise AssertionError(f"{what}: {exc}") from None
    rows = [m for s in streams.values() for m in s if m.resolved is None]
    emitted = {(tuple(m.key or ()), m.updated) for m in rows}
    expected = committed(db, start, end, "bank")
    missing = sorted(expected - emitted, key=str)
    assert not missing, f"{what}: {len(missing)} committed versions never emitted: {missing[:5]}"
    return {"rows": len(rows), "repeated": len(rows) - len(emitted)}


def run_nemesis(
    cluster: LocalCluster,
    kafka: MockKafka | None,
    out: Path,
    seed: int,
    kills: int,
    *,
    pause_s: tuple[float, float] = (0.5, 3.0),
    down_s: tuple[float, float] = (0.2, 3.0),
    files_exactly_once: bool = False,
) -> dict[str, object]:
    """The run; see the module docstring. Each kill comes ``pause_s`` (drawn in that
    range) after the cluster is whole again, and leaves its node down ``down_s``.
    ``kafka``: ``None`` runs the files job alone (the coordinator killed is its node).
    ``files_exactly_once``: the files may repeat no version (the Spark runner's
    promise), not only hold each at least once."""
    db = cluster.connect(0)
    wait_until(
        lambda: all(len(r.replicas) == 3 for r in db.ranges()),
        timeout_s=DEADLINE_S,
        what="three replicas",
    )
    bank = Bank(cluster, seed)
    before = db.now()
    bank.create(db)
    span = bank.span(db)
    to_kafka = Job(db, f"kafka://{kafka.bootstrap}") if kafka is not None else None
    to_files = Job(db, f"file://{out}")
    db.close()
    jobs: list[tuple[Job, tuple[MockKafka | None, Path | None]]] = [(to_files, (None, out))]
    if to_kafka is not None:
        jobs.insert(0, (to_kafka, (kafka, None)))
    coordinated = jobs[0][0]
    bank.start()
    try:
        bank.wait_for_more(20)
        done = []
        for step in plan_kills(seed, kills, pause_s=pause_s, down_s=down_s):
            done.append(
                kill_and_restart(cluster, step, span, lambda: coordinated.coordinator(cluster))
            )
            bank.wait_for_more(5)
        wait_until(lambda: healthy(cluster, span), timeout_s=DEADLINE_S, what="a whole cluster")
        bank.wait_for_more(20)
    finally:
        bank.stop()
    db = any_client(cluster)
    try:
        bank.check(db)
        end = db.now()
        for job, sink in jobs:

            def resolved(job: Job = job, sink: tuple[MockKafka | None, Path | None] = sink) -> bool:
                assert job.failure(db) is None, f"job {job.uri} failed: {job.failure(db)}"
                mark = _lowest_resolved(job.streams(*sink))
                return mark is not None and mark >= end

            wait_until(resolved, timeout_s=DEADLINE_S, poll_s=0.5, what=f"{job.uri} past {end}")
        for job, _ in jobs:
            db.sql(f"CANCEL JOB {job.id}")
        figures = summary(done, resume_times([k.killed_at for k in done], bank.writes))
        figures["transfers"] = len(bank.acknowledged)
        figures["unknown_outcome"] = len(bank.unknown)
        figures["errors"] = dict(bank.errors)
        figures["last_errors"] = dict(bank.last_error)
        history = TableHistory(db, "bank", before, end)
        if to_kafka is not None:
            figures["kafka"] = _check_sink(
                db, to_kafka.streams(kafka, None), history, to_kafka.start, end, "kafka"
            )
        files = _check_sink(db, to_files.streams(None, out), history, to_files.start, end, "files")
        figures["files"] = files
        if files_exactly_once:
            assert files["repeated"] == 0, f"the files repeat versions: {figures}"
    finally:
        db.close()
    assert {k.step.role for k in done} == set(ROLES[: min(kills, len(ROLES))])
    assert all(math.isfinite(s) for s in resume_times([k.killed_at for k in done], bank.writes))
    print(json.dumps(figures, indent=1))
    return figures


@pytest.mark.slow(60)
@pytest.mark.timeout(600)
def test_three_kills_one_per_role_lose_nothing_and_the_changefeeds_validate(
    cluster: LocalCluster, kafka: MockKafka, tmp_path: Path
) -> None:
    run_nemesis(
        cluster, kafka, tmp_path / "out", seed=380, kills=3, pause_s=(0.2, 1.0), down_s=(0.2, 1.0)
    )


@pytest.mark.soak
@pytest.mark.timeout(3600)
def test_twenty_kills_at_random_lose_nothing_and_the_changefeeds_validate(
    cluster: LocalCluster, kafka: MockKafka, tmp_path: Path
) -> None:
    run_nemesis(cluster, kafka, tmp_path / "out", seed=3820, kills=20)


@pytest.mark.soak
@pytest.mark.timeout(3600)
def test_kills_under_a_spark_job_leave_its_files_exactly_once(tmp_path: Path) -> None:
    with LocalCluster(
        tmp_path / "nodes", 3, "--replicas", "3", *SPARK_ARGS, rebalance_interval="0s"
    ) as cluster:
        run_nemesis(cluster, None, tmp_path / "out", seed=381, kills=3, files_exactly_once=True)
