"""The vectorized path on three ``feedkv start`` processes, a table's ranges on three
nodes: the copy is made by scans routed to each node and brought up to date by
IncrementalScans routed the same way, and answers as the reference does."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest

from feedkv import DB
from feedkv.sql.columnar import cache_for
from feedkv.testing.cluster import LocalCluster
from feedkv.testing.waiting import wait_until

GROUP_BY = "SELECT g, count(*), sum(a), min(s) FROM t GROUP BY g"
JOIN = "SELECT u.r, count(*), sum(t.a) FROM t JOIN u ON t.g = u.id WHERE t.a > 3 GROUP BY u.r"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path_factory.mktemp("cluster"), 3, rebalance_interval="0s") as started:
        yield started


def both(db: DB, query: str) -> tuple[list[Any], list[Any]]:
    """The vectorized answer (which it must give) and the reference's, in one
    transaction, sorted."""
    cache = cache_for(db)
    db.sql("BEGIN")
    try:
        before = cache.built + cache.advanced
        fast = db.sql(query).rows
        assert cache.built + cache.advanced > before
        db.sql("SET vectorize = off")
        reference = db.sql(query).rows
    finally:
        db.sql("SET vectorize = on")
        db.sql("COMMIT")
    return sorted(fast, key=repr), sorted(reference, key=repr)


def test_a_table_on_three_nodes_answers_as_the_reference(cluster: LocalCluster) -> None:
    with cluster.connect(0) as db:
        db.sql("CREATE TABLE t (id INT PRIMARY KEY, g INT, a INT, s STRING)")
        db.sql("CREATE TABLE u (id INT PRIMARY KEY, r STRING)")
        db.sql("INSERT INTO u VALUES (0, 'zero'), (1, 'one'), (2, 'two')")
        db.sql(
            "INSERT INTO t SELECT i, i % 4, i * 3 - 50, chr(97 + i % 7) "
            "FROM generate_series(1, 90) AS g(i)"
        )
        db.sql("INSERT INTO t VALUES (91, NULL, NULL, NULL)")
        db.sql("ALTER TABLE t SPLIT AT VALUES (30), (60)")
        db.sql("ALTER TABLE t RELOCATE VALUES (ARRAY[2], 30), (ARRAY[3], 60)")

        def holders() -> list[int]:
            rows = db.sql("SHOW RANGES FROM TABLE t").rows
            return [lease_holder for _s, _e, _id, _gen, lease_holder, _r in rows]

        wait_until(lambda: holders()[1:] == [2, 3], timeout_s=60, what="t's ranges placed")
        for query in (GROUP_BY, JOIN):
            fast, reference = both(db, query)
            assert fast == reference
        cache = cache_for(db)
        advanced = cache.advanced
        # the ranges move on: the changes since the copy are read where they are now (a
        # snapshot brings a range's time index along)
        db.sql("UPDATE t SET a = a + 1 WHERE id IN (31, 61)")
        db.sql("ALTER TABLE t RELOCATE VALUES (ARRAY[3], 30), (ARRAY[1], 60)")
        wait_until(lambda: holders()[1:] == [3, 1], timeout_s=60, what="t's ranges moved")
        db.sql("UPDATE t SET a = a + 1000 WHERE id IN (5, 35, 65)")
        db.sql("DELETE FROM t WHERE id IN (6, 36, 66)")
        db.sql("INSERT INTO t VALUES (92, 2, 7, 'new')")
        for query in (GROUP_BY, JOIN):
            fast, reference = both(db, query)
            assert fast == reference
        assert cache.advanced > advanced  # the changes read from every node's ranges
        values = {i: i * 3 - 50 for i in range(1, 91)}
        values[31] += 1
        values[61] += 1
        for i in (5, 35, 65):
            values[i] += 1000
        for i in (6, 36, 66):
            del values[i]
        values[92] = 7
        total = db.sql("SELECT count(*), sum(a) FROM t").rows
        assert total == [(len(values) + 1, Decimal(sum(values.values())))]
