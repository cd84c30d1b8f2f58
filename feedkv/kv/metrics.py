"""Transaction metrics of a KV client (the gateway of its transactions), as CockroachDB
names them: ``txn_commits``, ``txn_aborts`` (transactions rolled back, on request or
after a failed commit) and ``txn_restarts`` (a histogram: the retries each transaction
run by ``run_transaction`` needed before it committed or gave up)."""

from __future__ import annotations

from functools import cache

from feedkv.util.metrics import Registry

__all__ = ["TxnMetrics", "unregistered_txn_metrics"]

RESTART_BUCKETS = (0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 10.0, 25.0, 100.0)


_COMMITS, _ABORTS = 0, 1  # places in TxnMetrics' tally


class TxnMetrics:
    """A KV client's transaction metrics. A transaction's end is counted in a
    :class:`~feedkv.util.metrics.Tally` that the two counters read at scrape time, and
    a commit's restarts observed in a lean histogram: neither takes a lock."""

    def __init__(self, registry: Registry | None = None) -> None:
        r = registry or Registry()
        self._tally = tally = r.tally(2)
        r.sampled(
            "txn_commits",
            "Number of committed KV transactions",
            lambda: tally.counts()[_COMMITS],
            kind="counter",
        )
        r.sampled(
            "txn_aborts",
            "Number of aborted KV transactions",
            lambda: tally.counts()[_ABORTS],
            kind="counter",
        )
        # NB: observed for each transaction: a lean histogram (see feedkv.util.metrics)
        self.restarts = r.lean_histogram(
            "txn_restarts", "Number of restarted KV transactions", buckets=RESTART_BUCKETS
        )

    def committed(self) -> None:
        """A transaction committed."""
        self._tally.add(_COMMITS)

    def committed_after(self, restarts: int) -> None:
        """A transaction committed after ``restarts`` retries (``run_transaction``'s)."""
        self.restarts.observe_tallied(restarts, self._tally, _COMMITS)

    def aborted(self) -> None:
        """A transaction was rolled back."""
        self._tally.add(_ABORTS)


@cache
def unregistered_txn_metrics() -> TxnMetrics:
    """The metrics of clients that belong to no node (a client of a server): counted
    but not exposed."""
    return TxnMetrics()
