"""``num_replicas`` zone configurations on three ``feedkv start`` processes: the lease
holders add or remove replicas, one at a time, until each range has what its zone asks
(the default zone's, or its table's), and ``SHOW ZONE CONFIGURATION`` says so. The
cluster is started as CockroachDB's users start one: every node with one ``--join``
list, then ``feedkv init``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from feedkv.db import DB
from feedkv.testing.cluster import LocalCluster
from feedkv.testing.waiting import wait_until
from feedkv.util.keys import Span

pytestmark = pytest.mark.xdist_group("cluster")

DEADLINE_S = 60.0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path, 3, rebalance_interval="0s", init=True) as started:
        yield started


def _factors(db: DB, span: Span | None = None) -> list[int]:
    return [len(r.replicas) for r in db.ranges() if span is None or r.span.overlaps(span)]


@pytest.mark.slow(30)
def test_the_default_zone_and_a_tables_zone_set_each_ranges_replicas(
    cluster: LocalCluster,
) -> None:
    db = cluster.connect(0)
    db.sql("CREATE TABLE kv (k INT PRIMARY KEY, v STRING)")
    db.sql("INSERT INTO kv VALUES (1, 'one'), (2, 'two')")
    assert set(_factors(db)) == {1}  # the nodes' --replicas: 1

    db.sql("ALTER RANGE default CONFIGURE ZONE USING num_replicas = 3")
    wait_until(lambda: set(_factors(db)) == {3}, timeout_s=DEADLINE_S, what="3 replicas")
    shown = db.sql("SHOW ZONE CONFIGURATION FOR RANGE default").rows
    assert [tuple(r) for r in shown] == [
        (
            "RANGE default",
            "ALTER RANGE default CONFIGURE ZONE USING\n\tgc.ttlseconds = 14400,"
            "\n\tnum_replicas = 3",
        )
    ]

    db.sql("ALTER TABLE kv CONFIGURE ZONE USING num_replicas = 1")
    table = db.sql("SHOW RANGES FROM TABLE kv").rows
    table_span = next(r.span for r in db.ranges() if r.range_id == table[0][2])
    wait_until(lambda: _factors(db, table_span) == [1], timeout_s=DEADLINE_S, what="kv down to 1")
    others = [len(r.replicas) for r in db.ranges() if not r.span.overlaps(table_span)]
    assert others and set(others) == {3}
    shown = db.sql("SHOW ZONE CONFIGURATION FOR TABLE kv").rows
    assert [tuple(r) for r in shown] == [
        (
            "TABLE defaultdb.public.kv",
            "ALTER TABLE defaultdb.public.kv CONFIGURE ZONE USING\n\tgc.ttlseconds = 14400,"
            "\n\tnum_replicas = 1",
        )
    ]
    db.sql("INSERT INTO kv VALUES (3, 'three')")
    rows = db.sql("SELECT k, v FROM kv ORDER BY k").rows
    assert [tuple(r) for r in rows] == [(1, "one"), (2, "two"), (3, "three")]

    db.sql("ALTER TABLE kv CONFIGURE ZONE DISCARD")  # back to the default zone's 3
    wait_until(lambda: set(_factors(db)) == {3}, timeout_s=DEADLINE_S, what="kv back to 3")
    db.close()
