"""A range's replica moved off a node and back onto it while writes run, on four
``feedkv start --replicas 3`` processes: the node is decommissioned (its replicas move to
the fourth node), taken back, and the fourth node decommissioned (they move back). The
replica that comes back is a new one, with an id the range never gave before, and no
acknowledged write is lost."""

from __future__ import annotations

import contextlib
import io
import threading
from pathlib import Path

import pytest

from feedkv.cli.node import run_node_decommission, run_node_recommission
from feedkv.db import DB
from feedkv.errors import AmbiguousResultError
from feedkv.kv.range_descriptor import META, descriptor_by_id
from feedkv.storage.lmdb_engine import LMDBEngine
from feedkv.testing.cluster import LocalCluster
from feedkv.testing.waiting import wait_until

pytestmark = pytest.mark.xdist_group("cluster")

DEADLINE_S = 90.0
NODES = (1, 2, 3, 4)


def _replicated(db: DB) -> bool:
    return all(len(r.replicas) == 3 for r in db.ranges())


def _membership(db: DB, node_id: int) -> str:
    return next(n.membership for n in db.nodes() if n.node_id == node_id)


def _on(db: DB, node: int) -> bool:
    return any(node in r.replicas for r in db.ranges())


@pytest.mark.slow(60)
def test_a_replica_moved_off_a_node_and_back_loses_no_acknowledged_write(
    tmp_path: Path,
) -> None:
    with LocalCluster(tmp_path, 4, "--replicas", "3", rebalance_interval="0s") as cluster:
        db = cluster.connect(0)
        wait_until(lambda: _replicated(db), timeout_s=DEADLINE_S, what="three replicas")
        (held,) = [r for r in db.ranges() if r.span.contains_key(b"w/")]
        victim = next(n for n in held.replicas if n != held.lease_holder)
        spare = next(n for n in NODES if n not in held.replicas)
        gateway = next(n for n in NODES if n not in (victim, spare))
        db.close()
        db = cluster.connect(gateway - 1)
        stop = threading.Event()
        acked: list[int] = []
        errors: list[BaseException] = []

        def writer() -> None:
            i = 0
            while not stop.is_set():
                try:
                    with contextlib.suppress(AmbiguousResultError):  # in flight at a move
                        db.put(b"w/%05d" % i, b"v%d" % i)
                        acked.append(i)
                except BaseException as exc:  # the test reports it
                    errors.append(exc)
                    return
                i += 1

        def writes_go_on() -> None:
            before = len(acked)
            wait_until(
                lambda: len(acked) > before + 20 or bool(errors),
                timeout_s=DEADLINE_S,
                what="writes",
            )

        thread = threading.Thread(target=writer)
        thread.start()
        try:
            writes_go_on()
            url = cluster.url(gateway - 1)
            assert run_node_decommission(url, [victim], wait=False, stdout=io.StringIO()) == 0
            wait_until(lambda: not _on(db, victim), timeout_s=DEADLINE_S, what="replicas off")
            writes_go_on()
            assert run_node_recommission(url, [victim], stdout=io.StringIO()) == 0
            wait_until(
                lambda: _membership(db, victim) == "active",
                timeout_s=DEADLINE_S,
                what="the victim taken back",
            )
            code = run_node_decommission(url, [spare], stdout=io.StringIO(), timeout_s=DEADLINE_S)
            assert code == 0
            wait_until(lambda: _replicated(db), timeout_s=DEADLINE_S, what="three replicas")
            writes_go_on()
        finally:
            stop.set()
            thread.join()
        assert not errors, errors
        (back,) = [r for r in db.ranges() if r.span.contains_key(b"w/")]
        assert victim in back.replicas and spare not in back.replicas, back
        assert len(acked) > 60
        stored = {kv.key: kv.value for kv in db.scan(b"w/", b"w0")}
        lost = [i for i in acked if stored.get(b"w/%05d" % i) != b"v%d" % i]
        assert not lost, f"{len(lost)} acknowledged writes lost, first {lost[:5]}"
        db.close()
    # the victim's replica is a new one: its id is above the three the range started
    # with and the one the spare had
    with (
        LMDBEngine(tmp_path / f"n{victim}", databases=[META]) as engine,
        engine.snapshot() as snap,
    ):
        desc = descriptor_by_id(snap, back.range_id)
    assert desc is not None
    mine = desc.replica_of(victim)
    assert mine is not None and mine.replica_id >= 5, desc
    assert desc.replica_of(spare) is None
