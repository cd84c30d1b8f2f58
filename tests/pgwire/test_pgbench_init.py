"""``pgbench -i`` unchanged against feedkv (its storage parameters, COPY, VACUUM and the
primary keys it adds after loading), then its default TPC-B-like script, after which
the balances of accounts, tellers, branches and history agree."""

from __future__ import annotations

import shutil
import subprocess

import psycopg
import pytest
from psycopg import errors

PGBENCH = shutil.which("pgbench")
CLIENTS = 4
TRANSACTIONS = 15


def pgbench(*args: str) -> subprocess.CompletedProcess[str]:
    assert PGBENCH is not None, "pgbench is missing: `make` installs Debian's postgresql"
    return subprocess.run(
        [PGBENCH, *args], capture_output=True, text=True, timeout=600, check=False
    )


@pytest.mark.slow(70)
def test_pgbench_initialises_at_scale_1_and_its_tpcb_script_keeps_the_balances(
    pg_url: str,
) -> None:
    done = pgbench("-i", "-s", "1", pg_url)
    assert done.returncode == 0, done.stderr[-2000:]
    assert 'NOTICE:  storage parameter "fillfactor" is ignored' in done.stderr
    assert "creating primary keys..." in done.stderr
    with psycopg.connect(pg_url, autocommit=True) as conn:
        counts = [
            conn.execute(f"SELECT count(*) FROM pgbench_{table}").fetchone()
            for table in ("branches", "tellers", "accounts", "history")
        ]
        assert counts == [(1,), (10,), (100_000,), (0,)]
        with pytest.raises(errors.UniqueViolation):  # the key pgbench added
            conn.execute("INSERT INTO pgbench_accounts (aid, bid, abalance) VALUES (7, 1, 0)")
        assert conn.execute("SELECT bid FROM pgbench_accounts WHERE aid = 99999").fetchone() == (1,)
    # The built-in script, vacuum (a no-op) and all; serialization failures are retried
    # as pgbench 15 does with --max-tries.
    done = pgbench("-c", str(CLIENTS), "-t", str(TRANSACTIONS), "--max-tries=100", pg_url)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "number of failed transactions: 0 (0.000%)" in done.stdout
    with psycopg.connect(pg_url, autocommit=True) as conn:
        sums = conn.execute(
            "SELECT (SELECT sum(abalance) FROM pgbench_accounts), "
            "(SELECT sum(tbalance) FROM pgbench_tellers), "
            "(SELECT sum(bbalance) FROM pgbench_branches), "
            "(SELECT sum(delta) FROM pgbench_history), "
            "(SELECT count(*) FROM pgbench_history)"
        ).fetchone()
    assert sums is not None
    assert sums[0] == sums[1] == sums[2] == sums[3]
    assert sums[4] == CLIENTS * TRANSACTIONS


@pytest.mark.parametrize("prepare", [False, True], ids=["unnamed", "prepared"])
def test_notices_reach_psycopg_for_unnamed_and_prepared_statements(
    pg_url: str, prepare: bool
) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        notices: list[str] = []
        conn.add_notice_handler(lambda diag: notices.append(diag.message_primary or ""))
        conn.execute("CREATE TABLE t (k INT) WITH (fillfactor = 90)", prepare=prepare)
        assert conn.execute("VACUUM t", prepare=prepare).statusmessage == "VACUUM"
    assert notices == [
        'storage parameter "fillfactor" is ignored',
        "VACUUM does nothing in feedkv: MVCC garbage collection reclaims space",
    ]
