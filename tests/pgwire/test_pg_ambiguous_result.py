"""A write whose lease holder dies while it is in flight reaches a psycopg client of
another node as CockroachDB's ``result is ambiguous`` (SQLSTATE 40003): the client
must look before it retries, unlike a 58000 from a node that applied nothing."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import psycopg
import pytest

from feedkv.testing.cluster import LocalCluster
from feedkv.testing.waiting import wait_until

pytestmark = pytest.mark.xdist_group("cluster")

DEADLINE_S = 60.0


@pytest.mark.slow(20)
def test_a_write_in_flight_when_its_lease_holder_dies_is_ambiguous(tmp_path: Path) -> None:
    with LocalCluster(tmp_path, 2, rebalance_interval="0s") as cluster:
        holder, gateway = cluster.processes
        assert holder is not None and gateway is not None
        with (
            psycopg.connect(gateway.sql_url, autocommit=True) as conn,
            psycopg.connect(gateway.sql_url, autocommit=True) as watcher,
        ):
            conn.execute("CREATE TABLE kv (k INT PRIMARY KEY, v STRING)")
            conn.execute("ALTER TABLE kv RELOCATE VALUES (ARRAY[1], 0)")
            ranges = conn.execute("SELECT lease_holder FROM [SHOW RANGES FROM TABLE kv]")
            assert ranges.fetchall() == [(1,)]
            conn.execute("UPSERT INTO kv VALUES (1, 'before')")  # the table's lease taken

            failures: list[BaseException] = []

            def write() -> None:
                try:
                    conn.execute("UPSERT INTO kv VALUES (1, 'in flight')")
                except BaseException as exc:
                    failures.append(exc)

            # NB: stopped, node 1 takes the write into its socket and never answers it
            os.kill(holder.process.pid, signal.SIGSTOP)
            thread = threading.Thread(target=write)
            thread.start()
            try:
                wait_until(
                    lambda: any(
                        "in flight" in str(row)
                        for row in watcher.execute("SHOW QUERIES").fetchall()
                    ),
                    timeout_s=DEADLINE_S,
                    what="the write to be running on node 2",
                )
            finally:
                cluster.kill(0)
                thread.join(DEADLINE_S)
        assert not thread.is_alive()
        [failure] = failures
        assert isinstance(failure, psycopg.Error)
        assert failure.sqlstate == "40003", failure
        assert str(failure).startswith("result is ambiguous: the connection to"), failure
