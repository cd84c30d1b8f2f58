"""``feedkv node drain`` on three secure ``feedkv start --replicas 3`` processes, as
CockroachDB's: the node named hands the leases of its ranges over while a client writes
to them (no write fails), ends its SQL connections and stays up, draining (no lease
returns to it, ``node status`` shows it, ``/health?ready=1`` answers 503, new SQL clients
are told 57P01 and the node lists name no SQL address for it); ``--shutdown`` then stops
it, and a restart takes it back."""

from __future__ import annotations

import itertools
import threading
from collections import Counter
from pathlib import Path

import httpx
import psycopg
import pytest

from feedkv.changefeed.jobs import JobRecord, get_job
from feedkv.cli.main import main
from feedkv.db import DB
from feedkv.errors import InvalidArgumentError
from feedkv.testing.cluster import LocalCluster
from feedkv.testing.node_cluster import await_replicas
from feedkv.testing.waiting import wait_until

pytestmark = pytest.mark.xdist_group("cluster")

DEADLINE_S = 60.0
KEYS = (b"a", b"b", b"c")  # each in a range of its own, led by n2
SQL_ADDRESSES = (
    "SELECT node_id, sql_address IS NOT NULL FROM crdb_internal.gossip_nodes ORDER BY node_id"
)


def _lease_holders(db: DB) -> set[int]:
    return {r.lease_holder for r in db.ranges() if any(r.span.contains_key(k) for k in KEYS)}


def _job(db: DB, job_id: int) -> JobRecord:
    record = db.run_transaction(lambda txn: get_job(txn, job_id))
    assert record is not None
    return record


def _n2(db: DB) -> tuple[bool, bool, int | None]:
    """n2 as n1 sees it: live, draining, and the leases it holds."""
    node = next(n for n in db.nodes() if n.node_id == 2)
    return node.live, node.draining, node.leases


@pytest.mark.slow(90)
def test_a_drained_node_keeps_no_lease_stays_up_then_shuts_down_and_restarts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with (
        LocalCluster(tmp_path, 3, "--replicas", "3", rebalance_interval="0s") as cluster,
        cluster.connect(0) as db,
        cluster.connect(0) as writer_db,
    ):
        await_replicas(db, 3, timeout_s=DEADLINE_S)
        for key in KEYS[1:]:
            db.split(key)
        await_replicas(db, 3, timeout_s=DEADLINE_S)
        for key in KEYS:
            db.relocate(key, 2)
        wait_until(lambda: _lease_holders(db) == {2}, timeout_s=DEADLINE_S, what="n2 leads")
        n2 = cluster.processes[1]
        assert n2 is not None
        session = psycopg.connect(n2.sql_url, autocommit=True)
        # a changefeed job made through n2 runs on n2; it records its high-water mark
        # every 100 ms (by default every 30 s, which the wait for it after the drain
        # waited out)
        session.execute("CREATE TABLE t (k INT PRIMARY KEY)")
        out = tmp_path / "out"
        created = session.execute(
            f"CREATE CHANGEFEED FOR t INTO 'file://{out}' "
            "WITH resolved = '0s', min_checkpoint_frequency = '100ms'"
        ).fetchone()
        assert created is not None
        job_id = created[0]
        wait_until(
            lambda: (lease := _job(db, job_id).lease) is not None and lease.node_id == "n2",
            timeout_s=DEADLINE_S,
            what="n2 to run the job",
        )
        outcomes: Counter[str] = Counter()
        done = threading.Event()

        def write() -> None:
            for n in itertools.count():
                if done.is_set():
                    return
                try:
                    writer_db.put(KEYS[n % len(KEYS)] + b"/%d" % n, b"v")
                    outcomes["ok"] += 1
                except Exception as exc:  # the test's to show
                    outcomes[type(exc).__name__] += 1

        writer = threading.Thread(target=write, daemon=True)
        url = ["--url", f"feedkv://{cluster.address(0)}", "--certs-dir", str(cluster.certs_dir)]
        try:
            writer.start()
            wait_until(lambda: outcomes["ok"] >= 100, timeout_s=DEADLINE_S, what="writes")

            assert main(["node", "drain", "2", *url]) == 0

            after = outcomes["ok"]
            wait_until(lambda: outcomes["ok"] >= after + 100, timeout_s=DEADLINE_S, what="more")
        finally:
            done.set()
            writer.join(DEADLINE_S)
        assert set(outcomes) == {"ok"}, outcomes
        assert capsys.readouterr().out.splitlines()[-2:] == [
            "node is draining... remaining: 0 (complete)",
            "drain ok",
        ]
        assert 2 not in _lease_holders(db)
        # its job was given back, and another node runs it on from where it was
        drained_at = db.now()
        wait_until(
            lambda: (
                (job := _job(db, job_id)).lease is not None
                and job.lease.node_id != "n2"
                and job.high_water is not None
                and job.high_water > drained_at
            ),
            timeout_s=DEADLINE_S,
            what="another node to run the job on",
        )
        wait_until(lambda: _n2(db) == (True, True, 0), timeout_s=DEADLINE_S, what="n2 draining")
        assert main(["node", "status", "2", *url, "--format", "csv"]) == 0
        header, row = capsys.readouterr().out.splitlines()[:2]
        assert header.endswith(",is_draining") and row.endswith(",true"), (header, row)
        draining = "SELECT node_id FROM crdb_internal.gossip_liveness WHERE draining"
        assert db.sql(draining).rows == [(2,)]
        # the node lists clients pick SQL nodes from name no SQL address for it
        assert db.sql(SQL_ADDRESSES).rows == [(1, True), (2, False), (3, True)]
        assert header.split(",")[2] == "sql_address" and row.split(",")[2] == "", row
        # its SQL connections ended, and it takes no new ones, saying why
        with pytest.raises(psycopg.OperationalError):
            session.execute("SELECT 1")
        session.close()
        with pytest.raises(psycopg.OperationalError, match="server is not accepting clients"):
            psycopg.connect(n2.sql_url, connect_timeout=5).close()
        ready = httpx.get(f"{n2.http_url}/health?ready=1", verify=n2.http_verify, timeout=10)
        assert ready.status_code == 503 and "draining" in ready.json()["error"]
        assert n2.process.poll() is None  # up
        with pytest.raises(InvalidArgumentError, match="n2 is draining"):
            db.relocate(KEYS[0], 2)

        assert main(["node", "drain", "2", "--shutdown", *url]) == 0

        assert n2.process.wait(timeout=DEADLINE_S) == 0
        cluster.processes[1] = None
        assert "node n2 is shutting down" in capsys.readouterr().out
        cluster.restart(1)
        wait_until(lambda: _n2(db)[:2] == (True, False), timeout_s=DEADLINE_S, what="n2 back")
        wait_until(
            lambda: db.sql(SQL_ADDRESSES).rows == [(1, True), (2, True), (3, True)],
            timeout_s=DEADLINE_S,
            what="n2's SQL address again",
        )
        db.relocate(KEYS[0], 2)  # it takes leases again
        wait_until(lambda: 2 in _lease_holders(db), timeout_s=DEADLINE_S, what="a lease on n2")
