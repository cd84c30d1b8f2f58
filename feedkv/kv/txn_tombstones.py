"""Removed transaction records: the transactions that may not write a record again.

A record is removed once its transaction has finished and its intents are resolved, or
by the GC pass long after (:mod:`feedkv.kv.txn_record`). Its transaction must never
write it again: a heartbeat that arrives late would bring back a pending record of a
transaction that has ended, and one that was aborted (its intents removed meanwhile)
could then commit. CockroachDB answers this from its timestamp cache
(``CanCreateTxnRecord``); a store here keeps the ids of the records it removed, each at
the timestamp it was removed, beside its timestamp cache.

The set lives in memory. A store that opens cannot know what was removed before, so the
set starts with its low water at that moment: a transaction that began at or below the
low water may not create its record (it is aborted, and retried; rare, as a record is
created by its transaction's first write). A replica that takes up its range's lease
does not know what the earlier leaseholder removed: the range is covered up to then, the
same way. When the set overflows it forgets its oldest half and raises its low water to
the newest removal it forgot: answers only ever get more conservative, never wrong.

Not thread-safe: a store touches it only under the engine's ``eval_lock`` (commands).
"""

from __future__ import annotations

from itertools import islice

from feedkv.util.hlc import Timestamp

__all__ = ["TxnTombstones"]


class TxnTombstones:
    def __init__(self, low_water: Timestamp, *, max_entries: int = 100_000) -> None:
        self.low_water = low_water
        self._max_entries = max_entries
        self._removed: dict[bytes, Timestamp] = {}  # txn id -> when, oldest first
        self._covered: dict[int, Timestamp] = {}  # range id -> its lease's start here

    def __len__(self) -> int:
        return len(self._removed)

    def removed(self, txn_id: bytes, ts: Timestamp) -> None:
        """The record of ``txn_id`` was removed at ``ts`` (idempotent)."""
        self._removed.setdefault(txn_id, ts)
        if len(self._removed) > self._max_entries:
            self._forget_oldest()

    def cover(self, range_id: int, ts: Timestamp) -> None:
        """Answer for range ``range_id``'s records as if every one was removed up to
        ``ts`` (its replica here took up the lease: the earlier leaseholder's removals
        are not known here)."""
        self._covered[range_id] = max(self._covered.get(range_id, ts), ts)

    def split(self, left: int, right: int) -> None:
        """Range ``right`` was split off ``left``: it holds records ``left`` held."""
        if left in self._covered:
            self._covered[right] = self._covered[left]

    def merge(self, left: int, right: int) -> None:
        """Range ``right`` merged into ``left``, which now holds its records."""
        if right in self._covered:
            self.cover(left, self._covered.pop(right))

    def was_removed(self, txn_id: bytes) -> bool:
        """Whether this store removed the record of ``txn_id`` (as far as it remembers:
        see :meth:`may_create`)."""
        return txn_id in self._removed

    def may_create(self, txn_id: bytes, start_ts: Timestamp, range_id: int) -> bool:
        """Whether a transaction that began at ``start_ts`` may create its record on
        range ``range_id``: it was never removed, and the transaction began after every
        removal forgotten or not known here."""
        if txn_id in self._removed or start_ts <= self.low_water:
            return False
        covered = self._covered.get(range_id)
        return covered is None or start_ts > covered

    def _forget_oldest(self) -> None:
        removed = self._removed
        doomed = list(islice(removed, len(removed) // 2))
        self.low_water = max([self.low_water, *(removed[txn_id] for txn_id in doomed)])
        for txn_id in doomed:
            del removed[txn_id]
