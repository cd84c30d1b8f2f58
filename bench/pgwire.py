"""`feedkv bench pgwire`: pgbench against feedkv's SQL port and against PostgreSQL, side by
side in one run.

The workload is kv0 as a pgbench custom script: single-row upserts of a 100-byte value
at a random key of 100k (`INSERT ... ON CONFLICT (k) DO UPDATE`), `-n`, 32 clients,
`-M prepared`, for `--seconds` each. `--workload tpcb` runs pgbench's built-in
TPC-B-like script instead (BEGIN, three point UPDATEs, a point SELECT, an INSERT, END)
over 32 branches, 320 tellers and 100k accounts; its serialization failures (40001,
which pgbench does not retry) are counted under ``failed``. Both servers commit durably
and speak plaintext on loopback: feedkv is a `feedkv start --insecure` subprocess (fsync
on commit; initdb's PostgreSQL has no TLS either), PostgreSQL runs with
synchronous_commit on, started as an unprivileged user (`runuser -u nobody` when run as
root, since PostgreSQL refuses root); without PostgreSQL or pgbench the row says why.

`--rounds N` alternates the two servers N times: on a shared machine the load moves
between runs, so each round's ratio compares runs made close together, and the
medians are reported (each round's rows are kept under ``rounds``).

Prints one JSON object: TPS, latency p50/p99 per server (from pgbench's per-transaction
log), feedkv's node CPU per transaction (user and system time of the node process, from
/proc, over the pgbench run) and its threads' context switches per transaction (a
statement's hand-offs between threads and its waits for the GIL), the machine's load
average, the ratios and the issue's targets (feedkv >= 0.6x PostgreSQL's TPS, p99 <= 2x).

``--mode simple`` runs pgbench's default protocol (each statement a Query message, its
values written into the text) instead of ``-M prepared``.

Where a TPC-B transaction goes (pgb39, 32 clients, load 13-22 on 2 cores): the node
spends 3.8-4.2 ms of CPU a transaction under ``-M prepared`` (2.2 ms with one client and
no fsync: the rest is the contention on the branch rows, waits for their locks, pushes
and wake-ups, about 100-110 voluntary context switches a transaction); 0.002 restarts
and no aborts a transaction (the node's ``txn_restarts_count``, ``txn_aborts``), no
40001 reaches pgbench. Of one client's transaction (cProfile, no fsync) the KV client,
commit and resolution take about two thirds, SQL execution (plans kept per session)
about a fifth, pgwire's messages, parameters and replies the rest (~15%). ``-M simple``
cost 9.4 ms a transaction (7.1 ms with one client, no fsync): each new text was parsed
(sqlglot, ~0.5 ms a statement) and planned again, and its SELECT described again after
it ran; with integer literals lifted into parameters (feedkv.sql.literal_lifting) it
is 4.2-5.0 ms (2.9 ms with one client), and kv0's 232-271 us against 1,206-1,209
(prepared: 213-246). What is left between simple and prepared is mostly the SELECT's description,
made anew after each run.

Where a kv0 statement goes (perf39, 32 clients, load 5-18 on 2 cores): the node spends
about 180-200 us of CPU a statement (user 140-150, system 45-55), yet holds the GIL only
~30-45% of the run (py-spy --gil: 970 samples of 3000 in 15 s): a cycle is one group
commit (~23 statements, its fsync 2-4 ms with the GIL free) and then the statements'
round trips, serialized on the GIL (~3.5 ms), which the next group waits for. Of the
GIL's time: the statement's KV client (txn, router, store, submit) 16%, SQL (plan
lookup, the UPSERT's row encoding, coercion) 15%, the session's statement path 9%,
pgwire decode, parameters, dispatch and replies 14%, socket recv/send 6%, the commit
thread's evaluation (KV command, MVCC, LMDB) 13% and its gathering, commit and
completions 15% (half of it a futex wake per caller, with the GIL held), waking from a
wait 7%; activity marking, time zone and metrics 3% together. A prototype serving
pgwire from a second process (sessions over gRPC to the node) gave 0.9-1.6x the TPS
in five alternating pairs at load 9-14, for 1.5-1.6x the CPU a statement (node ~100
us, gateway ~200-250 us): not a gain a 2-core machine shared with pgbench can count on.

Tried and left out (wire39c, kv0, 32 clients, load 17-40 on 2 cores, node CPU per
statement 255-326 us throughout): connection threads under Linux's SCHED_BATCH (so a woken
one does not preempt the GIL's holder on its core) cut the involuntary context switches
from 1.8-2.3 to 1.0-1.5 a statement, but no gain showed: switched on and off in place (7
alternating pairs) the CPU was lower in 6 and the TPS higher in 4; against the parent
commit (6 pairs, later) the TPS was lower in 6 and the CPU higher in 5 (the commit thread a
batch thread too: TPS lower in 3 of 3); the commit thread's range descriptor (one LMDB get a
command) remembered for the rest of its group: no difference in 3 pairs; a GIL switch
interval of 20 ms: none in 2; the group's completions (a futex wake a caller, GIL held; a
third of the commit thread's GIL time) moved to a completer thread that ran them during
the fsync: kept a day, then taken out as it cost embedded sessions a fifth of their
commits (feedkv.storage.lmdb_engine).

The ceiling on two cores (2026-11-30, kv0, 32 clients): PostgreSQL 15 ran 27,451
transactions/s on a quiet machine, pgbench's own work included: about 73 us of the
machine's two cores a transaction. For 0.6x (16.5k/s) the node would need well under 120
us of CPU a transaction for pgwire, SQL, KV and the commit together, while it spends 219 us
(user 123, system 96) and an embedded INSERT alone, with no wire protocol, costs 75-90 us
of process CPU (issue 46's figures). The system time is thread hand-offs: counted with
``perf stat -e 'syscalls:sys_enter_*'`` on the node over 29,832 transactions, 11.7 futex
calls, 8.8 context switches, one recvfrom, one sendto and one poll a transaction, one
fdatasync per 14: a connection thread blocks twice a transaction (its socket, then its
commit), and every wake-up takes the GIL from another of 30-odd threads. Fewer hand-offs
need the statement not to block its thread while its commit is made durable (an event
loop running statements as continuations), which the synchronous SQL and KV layers do not
allow today.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import psycopg

from feedkv.testing.benches import bench_module
from feedkv.testing.node_process import NodeProcess
from feedkv.testing.waiting import wait_until

KEYS = 100_000
VALUE = "v" * 100
SCRIPT = (
    f"\\set k random(1, {KEYS})\n"
    f"INSERT INTO kv (k, v) VALUES (:k, '{VALUE}') ON CONFLICT (k) DO UPDATE SET v = excluded.v;\n"
)
TARGETS = {"tps_ratio_vs_postgresql": 0.6, "p99_ratio_vs_postgresql": 2.0}


class Workload(NamedTuple):
    """A pgbench script and what it needs: ``prepare(url, server)`` creates the schema
    (``server``: "feedkv" or "postgresql") before the run; ``after(url)``, if given, adds
    what it reads back to the run's row. (A NamedTuple: a dataclass needs its module in
    ``sys.modules``, and benchmarks are loaded as files.)"""

    name: str
    script: str
    prepare: Callable[[str, str], None]
    after: Callable[[str], dict[str, Any]] | None = None


def _kv_table(url: str, server: str) -> None:
    statement = {
        "feedkv": "CREATE TABLE kv (k INT PRIMARY KEY, v STRING)",
        "postgresql": "CREATE TABLE kv (k BIGINT PRIMARY KEY, v TEXT)",
    }[server]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(statement)


KV0 = Workload("kv0", SCRIPT, _kv_table)

# pgbench's built-in TPC-B-like script, with branches and tellers as at scale 32 (so 32
# clients do not all queue on one branch row) and the accounts of scale 1.
TPCB_BRANCHES, TPCB_ACCOUNTS = 32, 100_000


def tpcb_script(branches: int = TPCB_BRANCHES, accounts: int = TPCB_ACCOUNTS) -> str:
    """pgbench's TPC-B-like transaction over ``branches`` branches (ten tellers each)
    and ``accounts`` accounts."""
    return (
        f"\\set aid random(1, {accounts})\n"
        f"\\set bid random(1, {branches})\n"
        f"\\set tid random(1, {10 * branches})\n"
        "\\set delta random(-5000, 5000)\n"
        "BEGIN;\n"
        "UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;\n"
        "SELECT abalance FROM pgbench_accounts WHERE aid = :aid;\n"
        "UPDATE pgbench_tellers SET tbalance = tbalance + :delta WHERE tid = :tid;\n"
        "UPDATE pgbench_branches SET bbalance = bbalance + :delta WHERE bid = :bid;\n"
        "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) "
        "VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);\n"
        "END;\n"
    )


def tpcb_tables(
    url: str, server: str, branches: int = TPCB_BRANCHES, accounts: int = TPCB_ACCOUNTS
) -> None:
    """pgbench's four tables (as ``pgbench -i`` makes them, with primary keys), loaded
    by COPY, every balance 0."""
    integer, text = {"feedkv": ("INT", "STRING"), "postgresql": ("BIGINT", "TEXT")}[server]
    tables = {
        "pgbench_branches": ("bid", "bbalance", branches),
        "pgbench_tellers": ("tid", "tbalance", 10 * branches),
        "pgbench_accounts": ("aid", "abalance", accounts),
    }
    with psycopg.connect(url, autocommit=True) as conn:
        for table, (key, balance, rows) in tables.items():
            branch = "" if key == "bid" else "bid, "
            conn.execute(
                f"CREATE TABLE {table} ({key} {integer} PRIMARY KEY, "
                f"{branch.replace(',', f' {integer},')}{balance} {integer}, filler {text})"
            )
            with conn.cursor().copy(f"COPY {table} ({key}, {branch}{balance}) FROM STDIN") as copy:
                for row in range(1, rows + 1):
                    owner = (row - 1) * branches // rows + 1
                    copy.write_row((row, 0) if key == "bid" else (row, owner, 0))
        conn.execute(
            f"CREATE TABLE pgbench_history (tid {integer}, bid {integer}, aid {integer}, "
            f"delta {integer}, mtime TIMESTAMP, filler {text})"
        )


TPCB = Workload("tpcb", tpcb_script(), tpcb_tables)
WORKLOADS = {"kv0": KV0, "tpcb": TPCB}


def pgbench(
    url: str,
    script_text: str,
    clients: int,
    seconds: float,
    workdir: Path,
    mode: str = "prepared",
) -> dict[str, Any]:
    """One pgbench run of ``script_text`` against ``url`` in query ``mode`` (pgbench's
    ``-M``: simple, extended or prepared): TPS and latency percentiles."""
    script = workdir / "script.sql"
    script.write_text(script_text)
    prefix = workdir / "txlog"
    done = subprocess.run(
        [
            "pgbench", "-n", "-f", str(script), "-c", str(clients), "-j", "2",
            "-T", str(max(1, round(seconds))), "-M", mode, "-l",
            "--log-prefix", str(prefix), url,
        ],
        capture_output=True,
        text=True,
        timeout=seconds + 120,
        check=False,
    )  # fmt: skip
    if done.returncode != 0:
        return {"error": done.stderr[-2000:]}
    tps = re.search(r"tps = ([\d.]+)", done.stdout)
    failed = re.search(r"number of failed transactions: (\d+)", done.stdout)
    # NB: a failed transaction (a serialization failure pgbench did not retry) logs
    # "failed" for its time: counted under "failed", not as a latency
    latencies = sorted(
        int(fields[2]) / 1000.0
        for log in workdir.glob("txlog.*")
        for fields in map(str.split, log.read_text().splitlines())
        if len(fields) > 2 and fields[2].isdigit()
    )

    def pct(p: float) -> float:
        if not latencies:
            return float("nan")
        return round(latencies[min(len(latencies) - 1, int(p * len(latencies)))], 2)

    return {
        "tps": float(tps.group(1)) if tps else None,
        "transactions": len(latencies),
        "failed": int(failed.group(1)) if failed else None,
        "p50_ms": pct(0.50),
        "p99_ms": pct(0.99),
    }


def _run(
    workload: Workload,
    url: str,
    server: str,
    clients: int,
    seconds: float,
    workdir: Path,
    pid: int | None = None,
    mode: str = "prepared",
) -> dict[str, Any]:
    """One pgbench run in query ``mode``; ``pid``: a process whose CPU time over the run
    is reported per transaction."""
    workload.prepare(url, server)
    settled = wait_quiet(pid) if pid is not None else None
    before = _cpu_s(pid) if pid is not None else None
    switches = SwitchCounter(pid) if pid is not None else None
    if switches is not None:
        switches.start()
    try:
        row = pgbench(url, workload.script, clients, seconds, workdir, mode)
    finally:
        if switches is not None:
            switches.stop()
    if before is not None and pid is not None and row.get("transactions"):
        user, system = (after - start for after, start in zip(_cpu_s(pid), before, strict=True))
        row["node_cpu_us_per_transaction"] = {
            "user": round(user / row["transactions"] * 1e6, 1),
            "system": round(system / row["transactions"] * 1e6, 1),
            "total": round((user + system) / row["transactions"] * 1e6, 1),
        }
    if switches is not None and row.get("transactions"):
        voluntary, involuntary = switches.counted()
        row["node_context_switches_per_transaction"] = {
            "voluntary": round(voluntary / row["transactions"], 2),
            "involuntary": round(involuntary / row["transactions"], 2),
        }
    if settled is not None:
        row["node_settled_after_load_s"] = settled
    if workload.after is not None:
        row.update(workload.after(url))
    return row


def wait_quiet(
    pid: int, *, window_s: float = 0.5, share: float = 0.05, timeout_s: float = 60.0
) -> float | None:
    """Wait until process ``pid`` uses less than ``share`` of a core over ``window_s``,
    and return how long that took (``None``: not within ``timeout_s``). A node's work
    after the load (the columnar copy of the accounts that their COPY asks for, 0.3 s
    of CPU) then no longer counts in the run's CPU per transaction."""
    started = time.monotonic()
    last = [started, sum(_cpu_s(pid))]

    def quiet() -> bool:
        now = time.monotonic()
        if now - last[0] < window_s:
            return False
        cpu = sum(_cpu_s(pid))
        rate = (cpu - last[1]) / (now - last[0])
        last[:] = [now, cpu]
        return rate < share

    try:
        wait_until(quiet, timeout_s=timeout_s, poll_s=0.05, what="the node to settle")
    except TimeoutError:
        return None
    return round(time.monotonic() - started, 2)


def _cpu_s(pid: int) -> tuple[float, float]:
    """The user and system CPU seconds process ``pid`` has used (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def thread_switches(pid: int) -> dict[int, tuple[int, int]]:
    """The voluntary and involuntary context switches of each thread of process
    ``pid`` so far, by thread id (Linux /proc). A statement's hand-offs between the
    node's threads, and its waits for the GIL, are voluntary switches: each costs
    system time and a cold cache."""
    found = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            status = (task / "status").read_text()
        except FileNotFoundError:  # NB: the thread ended since the listing
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        found[int(task.name)] = (
            int(fields["voluntary_ctxt_switches"]),
            int(fields["nonvoluntary_ctxt_switches"]),
        )
    return found


class SwitchCounter:
    """The context switches of process ``pid``'s threads between :meth:`start` and
    :meth:`stop`, those that start and end meanwhile too (a connection's thread ends
    with pgbench's run): each thread's counts are read every ``every_s`` and the last
    read kept, so a thread that ends loses at most its last ``every_s``."""

    def __init__(self, pid: int, every_s: float = 0.2) -> None:
        self.pid = pid
        self.every_s = every_s
        self._first: dict[int, tuple[int, int]] = {}
        self._last: dict[int, tuple[int, int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="switch-counter", daemon=True)

    def start(self) -> None:
        self._first = thread_switches(self.pid)
        self._last = dict(self._first)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self._last.update(thread_switches(self.pid))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._last.update(thread_switches(self.pid))

    def by_thread(self) -> dict[int, tuple[int, int]]:
        """The voluntary and involuntary switches counted, by thread id."""
        return {
            tid: (v - self._first.get(tid, (0, 0))[0], i - self._first.get(tid, (0, 0))[1])
            for tid, (v, i) in self._last.items()
        }

    def counted(self) -> tuple[int, int]:
        """The voluntary and involuntary switches counted, all threads'."""
        counts = self.by_thread().values()
        return sum(v for v, _ in counts), sum(i for _, i in counts)


def run_feedkv(
    workload: Workload, clients: int, seconds: float, mode: str = "prepared"
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"feedkv-bench-{workload.name}-") as tmp:
        # NB: insecure (plaintext, no login) as the PostgreSQL beside it, which initdb
        # makes without TLS and trusting loopback: the same wire on both sides
        node = NodeProcess(Path(tmp) / "store", "--insecure")
        try:
            row = _run(
                workload,
                node.sql_url,
                "feedkv",
                clients,
                seconds,
                Path(tmp),
                pid=node.process.pid,
                mode=mode,
            )
        finally:
            node.process.terminate()
            node.process.wait(timeout=60)
    row["server"] = "feedkv start --insecure (durable commits), SQL port on loopback TCP"
    return row


def run_postgresql(
    workload: Workload, clients: int, seconds: float, mode: str = "prepared"
) -> dict[str, Any]:
    pg_bin = bench_module("kv")._find_pg_bin()
    if pg_bin is None:
        return {"skipped": "PostgreSQL is not installed (apt-get install postgresql)"}
    with tempfile.TemporaryDirectory(prefix=f"feedkv-bench-{workload.name}-pg-") as name:
        tmp = Path(name)
        with bench_module("kv").postgresql(pg_bin, tmp) as url:
            work = tmp / "work"
            work.mkdir()
            row = _run(workload, url, "postgresql", clients, seconds, work, mode=mode)
    row["server"] = f"PostgreSQL from {pg_bin}, synchronous_commit=on, loopback TCP"
    return row


def side_by_side(
    result: dict[str, Any],
    workload: Workload,
    clients: int,
    seconds: float,
    *,
    skip_pg: bool,
    rounds: int = 1,
    mode: str = "prepared",
) -> dict[str, Any] | None:
    """Run ``workload`` on feedkv and (unless ``skip_pg``) on PostgreSQL into ``result``,
    ``rounds`` times, alternating; returns the ratios (with several rounds, the medians
    of the rounds' ratios), or ``None`` when there are none (``result`` then says why
    when pgbench is missing)."""
    if shutil.which("pgbench") is None:
        result["skipped"] = "pgbench is not installed (apt-get install postgresql-contrib)"
        return None
    result["load_average_before"] = [round(x, 2) for x in os.getloadavg()]
    runs = []
    for _ in range(rounds):
        ours = run_feedkv(workload, clients, seconds, mode)
        theirs = (
            {"skipped": "--skip-postgresql"}
            if skip_pg
            else run_postgresql(workload, clients, seconds, mode)
        )
        runs.append({"feedkv": ours, "postgresql": theirs, "ratio": _ratio(ours, theirs)})
    result["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    if rounds == 1:
        result["feedkv"], result["postgresql"] = runs[0]["feedkv"], runs[0]["postgresql"]
        ratio = runs[0]["ratio"]
    else:
        result["rounds"] = runs
        result["feedkv"] = _medians([run["feedkv"] for run in runs])
        result["postgresql"] = _medians([run["postgresql"] for run in runs])
        ratios = [run["ratio"] for run in runs if run["ratio"] is not None]
        ratio = _medians(ratios) if ratios else None
    if ratio is None:
        return None
    result["ratio_vs_postgresql"] = ratio
    return ratio


def _ratio(ours: dict[str, Any], theirs: dict[str, Any]) -> dict[str, Any] | None:
    if not (ours.get("tps") and theirs.get("tps")):
        return None
    return {
        "tps": round(ours["tps"] / theirs["tps"], 3),
        "p99": round(ours["p99_ms"] / theirs["p99_ms"], 2) if theirs["p99_ms"] else None,
    }


def _medians(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Each numeric field's median over ``rows`` (a nested dict's fields too); the other
    fields as the first row has them."""
    out: dict[str, Any] = {}
    for name, first in rows[0].items():
        values = [row.get(name) for row in rows]
        if isinstance(first, dict):
            out[name] = _medians([v for v in values if isinstance(v, dict)])
        elif isinstance(first, int | float) and not isinstance(first, bool):
            numbers = [v for v in values if isinstance(v, int | float)]
            out[name] = round(statistics.median(numbers), 3)
        else:
            out[name] = first
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="feedkv bench pgwire", description=__doc__)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--skip-postgresql", action="store_true")
    parser.add_argument(
        "--workload",
        choices=sorted(WORKLOADS),
        default="kv0",
        help="kv0 (single-row upserts, the issue's) or tpcb (pgbench's TPC-B-like script)",
    )
    parser.add_argument(
        "--rounds", type=int, default=1, help="alternate the servers this many times"
    )
    parser.add_argument(
        "--mode",
        choices=["simple", "extended", "prepared"],
        default="prepared",
        help="pgbench's query mode (-M): simple sends each statement as text",
    )
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    workload = WORKLOADS[args.workload]
    described = {
        "kv0": f"kv0 upserts of {len(VALUE)}-byte values over {KEYS} keys",
        "tpcb": f"pgbench's TPC-B-like script, {TPCB_BRANCHES} branches, "
        f"{10 * TPCB_BRANCHES} tellers, {TPCB_ACCOUNTS} accounts",
    }[args.workload]
    result: dict[str, Any] = {
        "benchmark": "pgwire",
        "workload": f"pgbench -n -M {args.mode}, {described}",
        "clients": args.clients,
        "seconds": args.seconds,
        "rounds": args.rounds,
        "cores": os.cpu_count(),
    }
    ratio = side_by_side(
        result,
        workload,
        args.clients,
        args.seconds,
        skip_pg=args.skip_postgresql,
        rounds=args.rounds,
        mode=args.mode,
    )
    if ratio is not None:
        result["targets"] = TARGETS
        result["targets_met"] = {
            "tps_ratio_vs_postgresql": ratio["tps"] >= TARGETS["tps_ratio_vs_postgresql"],
            "p99_ratio_vs_postgresql": ratio["p99"] is not None
            and ratio["p99"] <= TARGETS["p99_ratio_vs_postgresql"],
        }
    print(json.dumps(result, indent=2))
    return 0
