"""Two job registries (two nodes' runners) over one store: a job's lease is claimed in a
transaction, so only one runs it; when that one stops, the other takes the job over. A
job that ends on a fault outside (a sink down) runs again, and the log says it is retried,
not that it failed."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import feedkv
from feedkv import DB
from feedkv.changefeed.changefeed import ChangefeedSpec
from feedkv.changefeed.jobs import JobRecord, get_job, put_job
from feedkv.changefeed.options import parse_options
from feedkv.changefeed.registry import JobRegistry, RegistrySettings
from feedkv.changefeed.rows import Target
from feedkv.changefeed.sink import SinkError
from feedkv.sql import catalog
from feedkv.testing.waiting import wait_until

DEADLINE_S = 30.0
FAST = RegistrySettings(lease_s=30.0, renew_s=0.05, interval_s=0.05)


class CountedJob:
    """A job that runs until closed, recording which registry ran it."""

    def __init__(self, record: JobRecord, where: str, runs: list[str]) -> None:
        self.spec = record.spec
        self.high_water = record.spec.start
        self._where = where
        self._runs = runs
        self._closed = threading.Event()

    def run(self) -> None:
        self._runs.append(self._where)
        self._closed.wait(DEADLINE_S)

    def close(self) -> None:
        self._closed.set()


@pytest.fixture
def client(tmp_path: Path) -> Iterator[DB]:
    """A client of a node over gRPC: it runs no registry of its own."""
    node = feedkv.connect(tmp_path / "store", listen="127.0.0.1:0", changefeed_runner="thread")
    remote = feedkv.connect(node.serving_url())
    yield remote
    remote.close()
    node.close()


def new_job(db: DB) -> int:
    now = db.now()
    spec = ChangefeedSpec((Target(1),), {1: "t"}, parse_options((), now=now), now)
    record = JobRecord(7, spec, created=now)
    db.run_transaction(lambda txn: put_job(txn, record))
    return record.id


def registry(db: DB, node_id: str, runs: list[str]) -> JobRegistry:
    return JobRegistry(db, node_id, lambda record: CountedJob(record, node_id, runs), FAST)


def lease_owner(db: DB, job_id: int) -> str | None:
    record = get_job(catalog.Snapshot(db, db.now()), job_id)
    assert record is not None
    return record.lease.owner if record.lease is not None else None


def test_only_one_of_two_registries_runs_a_job_and_the_other_takes_it_over(client: DB) -> None:
    job_id = new_job(client)
    runs: list[str] = []
    first, second = registry(client, "n1", runs), registry(client, "n2", runs)
    try:
        claims = [threading.Thread(target=r.adopt, args=(job_id,)) for r in (first, second)]
        for claim in claims:
            claim.start()
        for claim in claims:
            claim.join(DEADLINE_S)
        wait_until(lambda: len(runs) >= 1, timeout_s=DEADLINE_S, what="the job to start")
        owner = lease_owner(client, job_id)
        winner, loser = (first, second) if owner == first.owner else (second, first)
        assert owner == winner.owner
        assert winner.running(job_id) is not None and loser.running(job_id) is None
        assert len(runs) == 1

        winner.close()  # gives the lease back, the job still running
        # NB: and its run begun: the runner is registered before its thread runs the job
        wait_until(
            lambda: loser.running(job_id) is not None and len(runs) == 2,
            timeout_s=DEADLINE_S,
            what="the other registry to take the job over and run it",
        )
        assert lease_owner(client, job_id) == loser.owner
        assert runs == [winner.owner.split("/")[0], loser.owner.split("/")[0]]
    finally:
        first.close()
        second.close()


class FailingOnceJob(CountedJob):
    """A job whose first run ends on a sink that is down."""

    def run(self) -> None:
        if not self._runs:
            self._runs.append(self._where)
            raise SinkError("get 'x' in nodelocal://1/: node n1 is unavailable")
        super().run()


def test_a_job_ended_by_a_sink_down_runs_again_and_the_log_does_not_say_it_failed(
    client: DB, caplog: pytest.LogCaptureFixture
) -> None:
    """It logged "changefeed job N failed: ..." of an error it then retried."""
    job_id = new_job(client)
    runs: list[str] = []
    settings = RegistrySettings(renew_s=0.05, interval_s=0.05, retry_s=0.01)
    retrying = JobRegistry(
        client, "n1", lambda record: FailingOnceJob(record, "n1", runs), settings
    )
    with caplog.at_level(logging.INFO, logger="feedkv.changefeed.registry"):
        retrying.adopt(job_id)
        try:
            wait_until(lambda: len(runs) == 2, timeout_s=DEADLINE_S, what="the job run again")
        finally:
            retrying.close()
    logged = [r.getMessage() for r in caplog.records if r.name == "feedkv.changefeed.registry"]
    assert (
        f"changefeed job {job_id}: retryable error: get 'x' in nodelocal://1/: "
        "node n1 is unavailable" in logged
    )
    assert not any("failed" in message for message in logged), logged
