"""A node killed with SIGKILL under concurrent load loses nothing it acknowledged: every
acknowledged write, every range and every transaction record survives the restart, and
transactions abandoned by the crash are aborted once their records expire. The records
the kills left behind (a commit whose cleanup was cut short) are then collected, each
committed one's intents resolved first: no acknowledged write goes with them."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pytest

import feedkv
from feedkv.errors import FeedKVError
from feedkv.kv.api import BatchRequest, Header, HeartbeatTxn, Put, Transaction
from feedkv.kv.db import LocalTransport
from feedkv.kv.store import StoreConfig
from feedkv.kv.txn_record import records_in
from feedkv.testing.node_process import NodeProcess
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import ZERO_TIMESTAMP
from feedkv.util.keys import KEY_MAX, KEY_MIN, Span

KILLS = 5
WRITERS = 4


class Load:
    """Writers that record what the node acknowledged until the node goes away."""

    def __init__(self, url: str, round_no: int) -> None:
        self.url = url
        self.round = round_no
        self.acked: dict[bytes, bytes] = {}
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._write, args=(n,)) for n in range(WRITERS)]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def join(self) -> None:
        for thread in self.threads:
            thread.join()

    def count(self) -> int:
        with self.lock:
            return len(self.acked)

    def _write(self, n: int) -> None:
        db = feedkv.connect(self.url)
        try:
            for i in range(100_000):
                value = b"r%d-w%d-%d" % (self.round, n, i)
                if i % 3 == 0:
                    # A transaction across the two ranges: two-phase, with a record.
                    keys = (b"a/%d/%d/%d" % (self.round, n, i), b"z/%d/%d/%d" % (self.round, n, i))

                    def both(
                        txn: feedkv.Txn, keys: tuple[bytes, ...] = keys, value: bytes = value
                    ) -> None:
                        for key in keys:
                            txn.put(key, value)

                    db.run_transaction(both, max_attempts=5)
                else:
                    keys = (b"k/%d/%d/%d" % (self.round, n, i),)
                    db.put(keys[0], value)
                with self.lock:
                    self.acked.update(dict.fromkeys(keys, value))
        except FeedKVError:
            return  # the node was killed: whatever was not acknowledged may be lost
        finally:
            db.close()


def abandon_a_transaction(db: feedkv.DB, key: bytes) -> None:
    """Write an intent through a transaction whose coordinator then disappears."""
    # Top priority: only the expiry of its record can let another writer abort it.
    txn = Transaction(b"abandoned-txn-01", key, 0, ZERO_TIMESTAMP, ZERO_TIMESTAMP, 2**31 - 1)
    response = db.transport.send(BatchRequest(Header(txn=txn), (HeartbeatTxn(),)))
    txn = response.txn or txn
    db.transport.send(BatchRequest(Header(txn=txn), (Put(key, b"never committed"),)))


def collect_records_left_behind(store: Path, acked: dict[bytes, bytes]) -> None:
    """Open the killed node's store in this process and run its GC pass with every record
    old enough (a threshold of 0) and every pending one expired: none is left, and no
    acknowledged write went with a committed one (whose intents are resolved first)."""
    config = StoreConfig(txn_liveness_ns=1, txn_cleanup_threshold_ns=0, sync=False)
    with feedkv.connect(store, config=config) as db:
        transport = db.transport
        assert isinstance(transport, LocalTransport)
        transport.store.collect_garbage()
        with transport.store.engine.snapshot() as snap:
            assert records_in(snap, Span(KEY_MIN, KEY_MAX)) == []
        missing = [k for k, v in acked.items() if db.get(k) != v]
        assert not missing, f"{len(missing)} acknowledged writes lost with their records"


@pytest.mark.slow(20)
def test_acknowledged_writes_ranges_and_txn_records_survive_sigkill(tmp_path: Path) -> None:
    store = tmp_path / "store"
    rng = random.Random(20261121)
    node = NodeProcess(store, "--txn-liveness", "2s")
    with feedkv.connect(node.url) as db:
        db.split(b"m")
        abandon_a_transaction(db, b"held")
    ranges_before = None
    acked: dict[bytes, bytes] = {}
    for round_no in range(KILLS):
        with feedkv.connect(node.url) as db:
            ranges_before = [(r.range_id, r.span) for r in db.ranges()]
        load = Load(node.url, round_no)
        load.start()
        target = rng.randint(20, 400)
        wait_until(lambda load=load, target=target: load.count() >= target, timeout_s=60)
        node.kill()
        load.join()
        if round_no == KILLS - 1:
            # NB: before any reader resolves the last round's intents (through records)
            collect_records_left_behind(store, load.acked)
        acked.update(load.acked)

        node = NodeProcess(store, "--txn-liveness", "2s")
        with feedkv.connect(node.url) as db:
            assert [(r.range_id, r.span) for r in db.ranges()] == ranges_before
            missing = [k for k, v in acked.items() if db.get(k) != v]
            assert not missing, f"round {round_no}: {len(missing)} acknowledged writes lost"

    with feedkv.connect(node.url) as db:
        # The abandoned transaction's record expired: a writer aborts it and proceeds.
        db.put(b"held", b"after the crash")
        assert db.get(b"held") == b"after the crash"
    assert node.terminate() == 0
