"""Transaction metrics of a KV client (the gateway of its transactions), as CockroachDB
names them: ``txn_commits``, ``txn_aborts`` (transactions rolled back, on request or
after a failed commit) and ``txn_restarts`` (a histogram: the retries each transaction
run by ``run_transaction`` needed before it committed or gave up)."""

from __future__ import annotations

from functools import cache

from feedkv.util.metrics import Registry

__all__ = ["TxnMetrics", "unregistered_txn_metrics"]

RESTART_BUCKETS = (0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 10.0, 25.0, 100.0)


class TxnMetrics:
    def __init__(self, registry: Registry | None = None) -> None:
        r = registry or Registry()
        self.commits = r.counter("txn_commits", "Number of committed KV transactions")
        self.aborts = r.counter("txn_aborts", "Number of aborted KV transactions")
        # NB: observed for each transaction: a lean histogram (see feedkv.util.metrics)
        self.restarts = r.lean_histogram(
            "txn_restarts", "Number of restarted KV transactions", buckets=RESTART_BUCKETS
        )


@cache
def unregistered_txn_metrics() -> TxnMetrics:
    """The metrics of clients that belong to no node (a client of a server): counted
    but not exposed."""
    return TxnMetrics()
