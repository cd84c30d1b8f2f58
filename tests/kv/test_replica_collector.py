"""The thread that deletes a removed replica's data (:mod:`feedkv.kv.replica_collector`),
on a real engine: a page per transaction, then the record; stopped midway, its
completions fail (none is left pending) and the next collector finishes the record."""

from __future__ import annotations

from pathlib import Path

import pytest

from feedkv.errors import NodeUnavailableError
from feedkv.kv.range_descriptor import META
from feedkv.kv.replica_collector import ReplicaCollector, records, write_record
from feedkv.kv.txn_record import TXN_RECORDS
from feedkv.storage.engine import ReadWriter
from feedkv.storage.lmdb_engine import LMDBEngine
from feedkv.storage.schema import CHANGES, INTENTS, VERSIONS
from feedkv.util.keys import Span

SPAN = Span(b"k", b"l")
DATABASES = [META, VERSIONS, INTENTS, TXN_RECORDS, CHANGES]
DEADLINE_S = 30.0


def _removed_replica(engine: LMDBEngine, range_id: int, entries: int) -> None:
    """Data in SPAN and the record a removal writes for it."""

    def write(rw: ReadWriter) -> None:
        for i in range(entries):
            rw.put(INTENTS, b"k%04d" % i, b"meta")
        write_record(rw, range_id, SPAN)

    engine.write(write)


def _left(engine: LMDBEngine) -> int:
    with engine.snapshot() as snap:
        return sum(1 for _ in snap.scan(INTENTS, SPAN.start, SPAN.end))


def test_a_collection_deletes_a_page_per_transaction_then_its_record(tmp_path: Path) -> None:
    with LMDBEngine(tmp_path / "store", databases=DATABASES) as engine:
        _removed_replica(engine, 7, entries=25)
        collector = ReplicaCollector(engine, node_id=1, page_entries=10)
        try:
            collector.collect(7).result(timeout=DEADLINE_S)
            assert collector.collect(7).result(timeout=DEADLINE_S) is None  # asked twice
        finally:
            collector.stop()
        assert _left(engine) == 0 and collector.pages == 3
        with engine.snapshot() as snap:
            assert records(snap) == {}


def test_stopping_fails_the_collections_not_finished_and_the_next_collector_ends_them(
    tmp_path: Path,
) -> None:
    with LMDBEngine(tmp_path / "store", databases=DATABASES) as engine:
        _removed_replica(engine, 7, entries=5)
        collector = ReplicaCollector(engine, node_id=1)
        collector.pause()
        queued = [collector.collect(7), collector.collect(8)]
        collector.stop()
        after = collector.collect(7)
        for done in (*queued, after):
            with pytest.raises(NodeUnavailableError, match="the store stops"):
                done.result(timeout=DEADLINE_S)
        assert _left(engine) == 5
        with engine.snapshot() as snap:
            assert records(snap) == {7: SPAN}

        again = ReplicaCollector(engine, node_id=1)
        try:
            again.collect(7).result(timeout=DEADLINE_S)
        finally:
            again.stop()
        assert _left(engine) == 0
