"""pgbench, unchanged, running a custom script against the SQL port in each of its
query modes: every update lands, none fails."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import psycopg
import pytest

from feedkv.testing.waiting import wait_until

PGBENCH = shutil.which("pgbench")
SCRIPT = """\\set k random(1, 10)
UPDATE kv SET v = v + 1 WHERE k = :k;
SELECT v FROM kv WHERE k = :k;
"""
CLIENTS = 4
TRANSACTIONS = 25


@pytest.mark.parametrize("mode", ["simple", "extended", "prepared"])
def test_pgbench_updates_land_once_each_in_every_query_mode(
    pg_url: str, mode: str, tmp_path: Path
) -> None:
    assert PGBENCH is not None, "pgbench is missing: `make` installs Debian's postgresql"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE kv (k INT PRIMARY KEY, v INT)")
        conn.execute("INSERT INTO kv VALUES " + ", ".join(f"({k}, 0)" for k in range(1, 11)))
    script = tmp_path / "kv.sql"
    script.write_text(SCRIPT)
    done = subprocess.run(
        [
            PGBENCH,
            "-n",
            "-f",
            script,
            "-c",
            str(CLIENTS),
            "-t",
            str(TRANSACTIONS),
            "-M",
            mode,
            pg_url,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "number of failed transactions: 0 (0.000%)" in done.stdout
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT sum(v) FROM kv").fetchone() == (CLIENTS * TRANSACTIONS,)


def test_the_pgwire_benchmark_measures_a_pgbench_run(pg_url: str, tmp_path: Path) -> None:
    """bench/pgwire.py's measurement (TPS, latency percentiles from pgbench's
    per-transaction log), on a short run against the fixture's node."""
    import importlib.util

    bench = Path(__file__).resolve().parents[2] / "bench" / "pgwire.py"
    spec = importlib.util.spec_from_file_location("bench_pgwire", bench)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE kv (k INT PRIMARY KEY, v STRING)")
    row = module.pgbench(pg_url, module.SCRIPT, 2, 1.0, tmp_path)
    assert row["failed"] == 0 and row["transactions"] > 0 and row["tps"] > 0
    assert 0 < row["p50_ms"] <= row["p99_ms"]
    with psycopg.connect(pg_url) as conn:
        (count,) = conn.execute("SELECT count(*) FROM kv").fetchone() or (0,)
    assert 0 < count <= row["transactions"]


def test_the_pgwire_benchmark_counts_the_switches_of_threads_that_ended() -> None:
    """bench/pgwire.py's context switches of a process are its threads' summed, a
    thread that ended before the count too (as a connection's does with pgbench's
    run): one that blocks ten times (a wait that times out) adds ten voluntary ones."""
    import importlib.util
    import os
    import threading

    bench = Path(__file__).resolve().parents[2] / "bench" / "pgwire.py"
    spec = importlib.util.spec_from_file_location("bench_pgwire_switches", bench)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    never, may_end = threading.Event(), threading.Event()

    def other() -> None:
        for _ in range(10):
            never.wait(0.001)  # NB: nothing sets it: each wait blocks, then times out
        may_end.wait(10)

    counter = module.SwitchCounter(os.getpid(), every_s=0.01)
    counter.start()
    thread = threading.Thread(target=other)
    thread.start()
    try:
        wait_until(
            lambda: counter._last.get(thread.native_id, (0, 0))[0] >= 10,
            what="the counter to read the thread's ten waits",
        )
    finally:
        may_end.set()
        thread.join(timeout=10)
    wait_until(  # NB: the OS thread outlives join() for a moment
        lambda: thread.native_id not in module.thread_switches(os.getpid()),
        what="the thread to end",
    )
    counter.stop()
    assert counter.by_thread()[thread.native_id][0] >= 10
    counts = counter.by_thread().values()
    assert counter.counted() == (sum(v for v, _ in counts), sum(i for _, i in counts))


def test_the_pgwire_benchmark_reports_the_medians_of_its_rounds() -> None:
    """With ``--rounds``, each numeric field (nested ones too) is the median of the
    rounds', the others are the first round's, and each round's ratio pairs its own runs."""
    import importlib.util

    bench = Path(__file__).resolve().parents[2] / "bench" / "pgwire.py"
    spec = importlib.util.spec_from_file_location("bench_pgwire_rounds", bench)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rows = [
        {"tps": 100.0, "p99_ms": 9.0, "server": "a", "cpu": {"total": 300.0}},
        {"tps": 300.0, "p99_ms": 3.0, "server": "b", "cpu": {"total": 100.0}},
        {"tps": 200.0, "p99_ms": 5.0, "server": "c", "cpu": {"total": 200.0}},
    ]
    assert module._medians(rows) == {
        "tps": 200.0,
        "p99_ms": 5.0,
        "server": "a",
        "cpu": {"total": 200.0},
    }
    assert module._ratio({"tps": 50.0, "p99_ms": 10.0}, {"tps": 200.0, "p99_ms": 4.0}) == {
        "tps": 0.25,
        "p99": 2.5,
    }
    assert module._ratio({"tps": 50.0}, {"skipped": "--skip-postgresql"}) is None


def test_the_tpcb_workload_keeps_every_balance_equal_to_the_history(
    pg_url: str, tmp_path: Path
) -> None:
    """pgbench's TPC-B-like script from bench/pgwire.py, eight clients on two branches:
    the accounts, the tellers, the branches and the history add up to the same sum (each
    transaction committed whole or not at all), and none failed with 40001: each UPDATE
    locks its row as it reads it (enable_implicit_select_for_update), so the writers of
    a branch take turns, and they lock in one order (account, teller, branch), so no
    two deadlock."""
    import importlib.util

    bench = Path(__file__).resolve().parents[2] / "bench" / "pgwire.py"
    spec = importlib.util.spec_from_file_location("bench_pgwire_tpcb", bench)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.tpcb_tables(pg_url, "feedkv", branches=2, accounts=200)
    row = module.pgbench(pg_url, module.tpcb_script(2, 200), 8, 2.0, tmp_path)
    assert row["transactions"] > 0
    assert row["failed"] == 0
    with psycopg.connect(pg_url) as conn:
        sums = [
            conn.execute(f"SELECT count(*), sum({column}) FROM {table}").fetchone()
            for table, column in (
                ("pgbench_history", "delta"),
                ("pgbench_accounts", "abalance"),
                ("pgbench_tellers", "tbalance"),
                ("pgbench_branches", "bbalance"),
            )
        ]
    assert sums[0] is not None and sums[0][0] == row["transactions"]
    assert len({total for _count, total in sums}) == 1
