"""`feedkv bench kv_calls`: the Python calls a kv0 commit costs, by thread.

Counts, not time: every thread of the process is profiled (``threading.setprofile``
before the node starts its threads, ``sys.setprofile`` here), and each Python function
call is counted against the thread that made it. On a machine shared with other work,
CPU time per commit moves with the load by more than a change of a few calls costs;
these counts do not (they move only with the size of the group commits: a group's own
calls are shared by its commits). A gRPC run serves the node from this process and
connects a client to it, so the node's threads (stream reader, call pool, commit
thread) and the client's show side by side.

Prints one JSON object: per mode, the calls per commit of all threads and of each
(threads named alike, as a pool's, are summed), with the commit thread's calls per
group. ``--top N`` adds each thread's N most called functions.
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import re
import sys
import tempfile
import threading
from pathlib import Path
from types import FrameType
from typing import Any

import feedkv
from feedkv.kv.store import StoreConfig

KEYS = 100_000
VALUE = b"v" * 100
CLIENT = "kv0-client"


class CallCounter:
    """Counts Python calls per thread while :attr:`on`; install before the threads it
    should see start."""

    def __init__(self) -> None:
        self.on = False
        self.names: dict[int | None, str] = {}  # of threads that may end before the count
        self.calls: dict[int, collections.Counter[str]] = collections.defaultdict(
            collections.Counter
        )

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if self.on and event == "call":
            code = frame.f_code
            where = f"{Path(code.co_filename).name}:{code.co_name}"
            self.calls[threading.get_ident()][where] += 1

    def install(self) -> None:
        threading.setprofile(self.profile)
        sys.setprofile(self.profile)

    def uninstall(self) -> None:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]

    def by_thread(self) -> dict[str, collections.Counter[str]]:
        """The counts of each thread name (a pool's threads, numbered, summed)."""
        names = {thread.ident: thread.name for thread in threading.enumerate()} | self.names
        merged: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
        for ident, counts in self.calls.items():
            merged[_family(names.get(ident, "(ended)"))].update(counts)
        return merged


def _family(name: str) -> str:
    """``feedkv-rpc_3`` -> ``feedkv-rpc``; ``Thread-7 (_run)`` -> ``(_run)``."""
    name = re.sub(r"^Thread-\d+ ", "", name)
    return re.sub(r"[-_]\d+$", "", name)


def count(mode: str, clients: int, puts: int, top: int, *, sync: bool = True) -> dict[str, Any]:
    """Calls per commit of ``puts`` upserts from ``clients`` threads (after as many
    unprofiled ones), embedded or over gRPC; ``sync=False``: without fsyncs (the same
    calls, in less time for the node's periodic work to add its own)."""
    counter = CallCounter()
    counter.install()
    try:
        with tempfile.TemporaryDirectory(prefix="feedkv-bench-kv-calls-") as tmp:
            node = feedkv.connect(Path(tmp) / "store", config=StoreConfig(sync=sync))
            db = node if mode == "embedded" else feedkv.connect(node.serving_url())
            try:
                engine = node.node.store.engine if node.node is not None else None
                _drive(db, _keys(clients, puts, 0), counter)  # warm: caches, stream, pools
                keys = _keys(clients, puts, 1)  # NB: drawn first: the counts are the puts'
                groups = engine.stats.groups if engine is not None else 0
                counter.on = True
                _drive(db, keys, counter)
                counter.on = False
                groups = (engine.stats.groups if engine is not None else 0) - groups
                threads = counter.by_thread()
            finally:
                if db is not node:
                    db.close()
                node.close()
    finally:
        counter.uninstall()
    row: dict[str, Any] = {
        "calls_per_commit": round(sum(sum(c.values()) for c in threads.values()) / puts, 1),
        "threads": {
            name: round(sum(c.values()) / puts, 1)
            for name, c in sorted(threads.items(), key=lambda item: -sum(item[1].values()))
            if sum(c.values()) >= puts / 20
        },
        "commits_per_group": round(puts / max(groups, 1), 1),
    }
    if top:
        row["top"] = {
            name: {where: round(n / puts, 2) for where, n in c.most_common(top)}
            for name, c in threads.items()
            if sum(c.values()) >= puts
        }
    return row


def _keys(clients: int, puts: int, seed: int) -> list[list[bytes]]:
    """Each client's keys to put, drawn at random."""
    rng = random.Random(seed)
    return [
        [b"kv0/%08d" % rng.randrange(KEYS) for _ in range(puts // clients)] for _ in range(clients)
    ]


def _drive(db: feedkv.DB, keys: list[list[bytes]], counter: CallCounter) -> None:
    """A client thread per list of ``keys`` puts them."""

    def client(mine: list[bytes]) -> None:
        for key in mine:
            db.put(key, VALUE)

    threads = [
        threading.Thread(target=client, args=(mine,), name=f"{CLIENT}-{n}")
        for n, mine in enumerate(keys)
    ]
    for thread in threads:
        thread.start()
        counter.names[thread.ident] = thread.name
    for thread in threads:
        thread.join()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="feedkv bench kv_calls", description=__doc__)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--puts", type=int, default=2000)
    parser.add_argument("--modes", default="embedded,grpc")
    parser.add_argument("--top", type=int, default=0, help="the most called functions")
    args = parser.parse_args(argv)
    puts = args.puts - args.puts % args.clients
    result: dict[str, Any] = {
        "benchmark": "kv_calls",
        "clients": args.clients,
        "puts": puts,
    }
    for mode in args.modes.split(","):
        result[mode] = count(mode, args.clients, puts, args.top)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
