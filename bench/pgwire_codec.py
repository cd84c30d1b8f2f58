"""`feedkv bench pgwire_codec`: the CPU one statement costs in the PostgreSQL protocol
layer, apart from the SQL it runs.

A :class:`~feedkv.pgwire.connection.Connection` (no socket) is fed the bytes pgbench
sends per kv0 transaction in ``-M prepared`` mode (Bind, Execute, Sync on a statement
parsed once), and answers through a real session on an embedded node (no fsync). The
session's ``execute_all`` is timed apart, so the protocol layer's share is the rest:
decoding the messages, the portal, encoding CommandComplete and ReadyForQuery. Both are
thread CPU time (``time.thread_time``), so other processes on the machine do not count;
the process's CPU time (every thread: the engine's commit thread too) is given beside.

Prints one JSON object: statements, CPU per statement in the protocol layer and in the
session (µs), and the protocol's share: what a codec written in C could save at most.
"""

from __future__ import annotations

import argparse
import json
import random
import struct
import tempfile
import time
from pathlib import Path
from typing import Any

import feedkv
from feedkv.kv.store import StoreConfig
from feedkv.pgwire.auth import LoopbackTrust
from feedkv.pgwire.connection import Connection
from feedkv.sql.session import Session
from feedkv.testing.pgwire_client import bind, frontend, parse, startup

KEYS = 100_000
VALUE = "v" * 100
STATEMENT = "INSERT INTO kv (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = excluded.v"


class _TimedSession(Session):
    """A session that keeps the thread CPU time its statements took."""

    sql_s = 0.0

    def execute_all(self, text: str, params: Any = ()) -> Any:
        started = time.thread_time()
        try:
            return super().execute_all(text, params)
        finally:
            _TimedSession.sql_s += time.thread_time() - started


def run(statements: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        db = feedkv.connect(Path(tmp) / "store", config=StoreConfig(sync=False))
        try:
            db.sql("CREATE TABLE kv (k INT PRIMARY KEY, v STRING)")
            conn = Connection(
                # NB: with the node's descriptor leases, as its SQL port's sessions
                # have them: a statement then reads no descriptor
                lambda user, database: _TimedSession(
                    db, user=user, database=database, leases=db.leases
                ),
                LoopbackTrust(),
                process_id=1,
                secret=1,
                peer_host="127.0.0.1",
                on_cancel=lambda _pid, _secret: None,
            )
            conn.receive(startup())
            conn.receive(parse("kv0", STATEMENT, (20, 25)) + frontend(b"S"))
            execute = frontend(b"E", b"\0" + struct.pack("!i", 0)) + frontend(b"S")
            rng = random.Random(1)
            batches = [
                bind("", "kv0", [str(rng.randint(1, KEYS)).encode(), VALUE.encode()]) + execute
                for _ in range(statements)
            ]
            for data in batches[:200]:  # warm the plan cache and the store
                conn.receive(data)
            _TimedSession.sql_s = 0.0
            started = time.thread_time()
            process_started = time.process_time()
            for data in batches:
                out = conn.receive(data)
                if b"INSERT 0 1" not in out:
                    raise RuntimeError(f"unexpected answer: {out[:200]!r}")
            total_s = time.thread_time() - started
            process_s = time.process_time() - process_started
        finally:
            db.close()
    sql_s = _TimedSession.sql_s
    protocol_s = total_s - sql_s
    return {
        "benchmark": "pgwire_codec",
        "statements": statements,
        "cpu_us_per_statement": round(total_s / statements * 1e6, 1),
        "protocol_us_per_statement": round(protocol_s / statements * 1e6, 1),
        "session_us_per_statement": round(sql_s / statements * 1e6, 1),
        "protocol_share": round(protocol_s / total_s, 3),
        "process_cpu_us_per_statement": round(process_s / statements * 1e6, 1),
        "note": (
            "protocol = decoding Bind/Execute/Sync, the portal, CommandComplete and "
            "ReadyForQuery; session = planning and running the statement (SQL, KV, "
            "storage in this thread). A protocol codec in C saves at most the protocol "
            "share of the statement's CPU. process_cpu: every thread of the process "
            "(the engine's commit thread, which evaluates and writes each batch, and "
            "the node's side loops too)."
        ),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="feedkv bench pgwire_codec", description=__doc__)
    parser.add_argument("--statements", type=int, default=5000)
    args = parser.parse_args(argv)
    print(json.dumps(run(args.statements), indent=2))
    return 0
