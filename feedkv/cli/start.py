"""``feedkv start``: run a node in the foreground until SIGTERM or Ctrl-C, then drain."""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from feedkv.db import connect
from feedkv.kv.store import StoreConfig
from feedkv.util.units import parse_duration_ns, parse_size

__all__ = ["run_node", "store_config"]


def store_config(closed_ts_target: str, txn_liveness: str, range_max_bytes: str) -> StoreConfig:
    """The node's settings from its command-line flags (merges start below a quarter of
    the maximum range size)."""
    max_bytes = parse_size(range_max_bytes)
    return StoreConfig(
        closed_ts_target_ns=parse_duration_ns(closed_ts_target),
        txn_liveness_ns=parse_duration_ns(txn_liveness),
        range_max_bytes=max_bytes,
        range_min_bytes=max_bytes // 4,
    )


def run_node(
    store: Path,
    listen: str,
    config: StoreConfig,
    *,
    changefeed_runner: str = "spark",
    spark_master: str | None = None,
) -> int:
    """Serve the store on ``listen`` and run its changefeed jobs until SIGTERM or
    SIGINT; then stop the jobs (they resume at the next start) and drain."""
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    db = connect(
        store,
        listen=listen,
        config=config,
        changefeed_runner=changefeed_runner,
        spark_master=spark_master,
    )
    try:
        db.changefeeds.start()
        print(f"feedkv node listening on {db.serving_url()} (store {store})", flush=True)
        while not stop.wait(3600):
            pass
        print("feedkv node draining", file=sys.stderr, flush=True)
    finally:
        db.close()
    print("feedkv node stopped", file=sys.stderr, flush=True)
    return 0
