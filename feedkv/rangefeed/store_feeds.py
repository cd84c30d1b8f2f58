"""The rangefeeds of one store: processors per range, catch-up scans, and the pusher.

:meth:`StoreFeeds.register` is the server side of a rangefeed. Under the store's apply
lock it finds the range holding the span, starts the range's processor if it has none
(observing the range, scanning its intents and reading its closed timestamp, all at that
one moment), adds the registration, and takes the snapshot its catch-up scan will read.
The scan then runs from a worker thread, which sends a page of history or none itself
and offers longer ones to the consumer (the consumer's thread reads them, a page per
take: see :meth:`~feedkv.rangefeed.stream.EventStream.offer_pages`), while live values
collect in the processor's log behind the registration's cursor; when it is done the
registration goes live and reads them, then its first checkpoint. A scan takes its
snapshot when a worker starts it, under the apply lock, and moves the cursor to the log's
end at that moment: what the log held before is in the snapshot. So scans waiting for a
worker hold no reader of the store, however many registrations arrive at once. A
checkpoint-only registration (``values=False``) has no history to send: it goes live at
once, under the same hold of the lock, with that first checkpoint.

A span that is not inside one range (the caller's range cache is stale) gets an immediate
``RANGE_NOT_FOUND`` error event: the client re-divides and registers again.

Threads: ``catchup_workers`` catch-up scans at once (others queue), and one pusher that
every ``push_interval_s`` pushes transactions older than ``push_age_ns``
(:mod:`feedkv.rangefeed.pusher`) and stops processors left with no registrations.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Hashable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import chain, islice

from feedkv.errors import (
    BatchTimestampBeforeGCError,
    FeedKVError,
    InvalidArgumentError,
    NodeUnavailableError,
    RangeKeyMismatchError,
)
from feedkv.kv.range_descriptor import descriptor_for_key
from feedkv.kv.store import Store
from feedkv.rangefeed.budget import Budget
from feedkv.rangefeed.catchup import PAGE_VALUES, catch_up
from feedkv.rangefeed.event import ErrorReason
from feedkv.rangefeed.processor import Processor
from feedkv.rangefeed.pusher import StorePusher, TxnPusher
from feedkv.rangefeed.registration import Registration
from feedkv.rangefeed.resolved_timestamp import UnresolvedTxn
from feedkv.rangefeed.stream import EventStream
from feedkv.rangefeed.waker import Waker
from feedkv.storage.engine import Snapshot
from feedkv.storage.intent import TxnMeta, TxnStatus
from feedkv.storage.mvcc import scan_intents
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

__all__ = ["FeedConfig", "StoreFeeds"]

log = logging.getLogger(__name__)


_DIFF_WITHOUT_VALUES = (
    "with_diff=True needs values: a checkpoint-only registration (values=False) gets no "
    "values to diff; drop with_diff or keep values"
)


@dataclass(frozen=True, slots=True)
class FeedConfig:
    push_age_ns: int = 10_000_000_000  # push transactions older than this
    push_interval_s: float = 0.25
    per_registration: int = 4096  # events queued per registration before SLOW_CONSUMER
    budget_bytes: int = 128 << 20  # the node's memory for queued events
    catchup_workers: int = 4
    catchup_wait_s: float = 30.0  # how long a catch-up scan waits for a stalled consumer
    catchup_page_values: int = PAGE_VALUES  # values a catch-up scan pushes at a time

    def __post_init__(self) -> None:
        for name in ("per_registration", "budget_bytes", "catchup_workers", "catchup_page_values"):
            if getattr(self, name) < 1:
                raise InvalidArgumentError(f"FeedConfig.{name} must be at least 1")


class StoreFeeds:
    def __init__(
        self, store: Store, config: FeedConfig | None = None, *, pusher: TxnPusher | None = None
    ) -> None:
        self.store = store
        self.config = config or FeedConfig()
        self.budget = Budget(self.config.budget_bytes)
        self._pusher = pusher or StorePusher(store)
        self._processors: dict[int, Processor] = {}
        self._waker = Waker()
        self._group: list[Processor] = []  # the processors given ops in this commit group
        store.engine.on_group_applied(self._group_applied)
        self._lock = store.engine.apply_lock
        # NB: scans take turns a page at a time (a page sent, with what the scan read
        # and skipped to make it, and its first with the choice of index). The engine
        # lets go of the GIL at every entry it reads, so scans reading at once hand it to
        # one another at every entry and spend more time waking than reading: four at
        # once went at 60% of one's pace.
        self._scanning = threading.Lock()
        self._catchups = ThreadPoolExecutor(
            max_workers=self.config.catchup_workers, thread_name_prefix="feedkv-catchup"
        )
        self._stopping = threading.Event()
        self._stopped = threading.Event()  # every processor ended, its errors queued
        self._stats_lock = threading.Lock()
        self.catchup_scan_ns = 0  # time spent in catch-up scans, in all (a metric)
        self._push_thread = threading.Thread(
            target=self._push_loop, name="feedkv-txn-pusher", daemon=True
        )
        self._push_thread.start()

    @property
    def stopped(self) -> bool:
        """Whether :meth:`close` ended every processor: each registration's last event
        (``NODE_SHUTDOWN``) is in its stream."""
        return self._stopped.is_set()

    def local_node(self) -> int:
        return self.store.node_id

    def new_stream(self) -> EventStream:
        """A stream for one consumer, drawing on this node's budget."""
        return EventStream(self.budget, per_registration=self.config.per_registration)

    def rest_end(self, stream: EventStream) -> float:
        """When ``stream``'s consumer may take again, as this node paces it (see
        :mod:`feedkv.rangefeed.waker`)."""
        return self._waker.rest_end(stream)

    def register(
        self,
        tag: Hashable,
        span: Span,
        start_ts: Timestamp,  # exclusive
        with_diff: bool,
        stream: EventStream,
        *,
        values: bool = True,
        timestamp_order: bool = False,
        node_id: int = 0,  # this store's ranges only
    ) -> Registration:
        """Subscribe ``stream`` to ``span`` after ``start_ts``; events arrive tagged ``tag``.
        Without ``values`` only checkpoints are sent (and ``with_diff`` is refused); with
        ``timestamp_order`` the catch-up scan keeps timestamp order across keys (see
        :func:`~feedkv.rangefeed.catchup.catch_up`)."""
        if with_diff and not values:
            raise InvalidArgumentError(_DIFF_WITHOUT_VALUES)
        if self._stopping.is_set():
            raise NodeUnavailableError("the node is shutting down")
        reg = Registration(tag, span, start_ts, with_diff, stream, values=values)
        with self._lock:
            if self._stopping.is_set():
                raise NodeUnavailableError("the node is shutting down")
            with self.store.engine.snapshot() as snap:
                try:
                    desc = descriptor_for_key(snap, span.start)
                except RangeKeyMismatchError:  # another node holds it (it moved)
                    reg.end(ErrorReason.RANGE_NOT_FOUND, f"no range of this node holds {span}")
                    return reg
                if not desc.span.contains(span):
                    reg.end(
                        ErrorReason.RANGE_NOT_FOUND,
                        f"{span} is not inside one range; {desc} holds its start",
                    )
                    return reg
                processor = self._processors.get(desc.range_id)
                if processor is None or processor.ended is not None:
                    processor = self._start_processor(desc.range_id, desc.span, snap)
                processor.register(reg)
            if not values:
                processor.finish_catch_up(reg)
                return reg
        try:
            self._catchups.submit(self._catch_up, processor, reg, timestamp_order)
        except RuntimeError:  # close() shut the workers down after the lock was let go
            self._end(processor, reg, ErrorReason.NODE_SHUTDOWN, "the node is shutting down")
        return reg

    def unregister(self, reg: object) -> None:
        """End ``reg`` (its stream gets ``UNREGISTERED``); idempotent."""
        if not isinstance(reg, Registration):
            raise InvalidArgumentError(f"not a registration of this node: {reg!r}")
        with self._lock:
            reg.end(ErrorReason.UNREGISTERED, "unregistered by the consumer")
            if reg.processor is not None:
                reg.processor.unregister(reg)

    def counts(self) -> tuple[int, int]:
        """How many processors run, and how many registrations they have (for the
        metrics: read without the apply lock, so a moment's count)."""
        # NB: list() copies the dict in one step under the GIL; no lock is taken, so a
        # scrape never waits for a write's application
        processors = [p for p in list(self._processors.values()) if p.ended is None]
        return len(processors), sum(len(p.registry) for p in processors)

    def processor(self, range_id: int) -> Processor | None:
        """The running processor of ``range_id``, if any (for tests and introspection)."""
        with self._lock:
            processor = self._processors.get(range_id)
            return processor if processor is not None and processor.ended is None else None

    def close(self) -> None:
        """Stop the pusher and catch-up scans; the store ends the processors. Idempotent."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        self._push_thread.join()
        self.budget.close()
        with self._lock:
            for processor in self._processors.values():
                processor.end(ErrorReason.NODE_SHUTDOWN, "the node is shutting down")
            self._processors.clear()
        self._catchups.shutdown(wait=True, cancel_futures=True)
        self._waker.close()
        self._stopped.set()

    # Under the apply lock.

    def _group_applied(self) -> None:
        """The commit thread applied a group: its processors take the group's ops
        together, then their consumers are woken."""
        group = self._group[:]
        self._group.clear()
        for processor in group:
            processor.take_group()
        self._waker.flush()

    def _start_processor(self, range_id: int, span: Span, snap: Snapshot) -> Processor:
        processor = Processor(range_id, span, self.budget, self._waker, self._group)
        _desc, observed = self.store.observe(range_id, processor)
        observed.close()  # the caller's snapshot was taken under the same hold of the lock
        intents = scan_intents(snap, span)
        processor.init(
            ((i.txn.id, i.txn.key, i.txn.write_ts) for i in intents),
            self.store.closed_timestamp(range_id),
        )
        self._processors[range_id] = processor
        return processor

    def _sweep(self) -> None:
        for range_id, processor in list(self._processors.items()):
            if processor.ended is not None:
                del self._processors[range_id]
            elif not len(processor.registry):
                self.store.unobserve(range_id, processor)
                processor.end(ErrorReason.UNREGISTERED, "no registrations left")
                del self._processors[range_id]

    # Catch-up scans (worker threads).

    def _catch_up(self, processor: Processor, reg: Registration, timestamp_order: bool) -> None:
        started = time.perf_counter_ns()
        try:
            self._scan(processor, reg, timestamp_order)
        finally:
            elapsed = time.perf_counter_ns() - started
            with self._stats_lock:
                self.catchup_scan_ns += elapsed

    def _scan(self, processor: Processor, reg: Registration, timestamp_order: bool) -> None:
        with self._lock:
            if reg.done:
                processor.unregister(reg)
                return
            # NB: the snapshot is taken now, not at registration, so queued scans hold no
            # reader of the store; the log values it covers are skipped to match.
            snap = self.store.engine.snapshot()
            processor.skip_log(reg)
        try:
            with snap:
                pages = catch_up(
                    snap,
                    reg.span,
                    reg.start_ts,
                    reg.with_diff,
                    page_values=self.config.catchup_page_values,
                    by_key=not timestamp_order,
                )
                # NB: a scan of at most a page (an idle key's: the common case of many
                # registrations at once) is pushed from here, so it is done without
                # waiting for the consumer's takes; a longer one is read by the consumer
                with self._scanning:
                    head = list(islice(pages, 2))
                wait = self.config.catchup_wait_s
                if len(head) < 2:
                    sent = all(reg.stream.push_wait(reg, page, size, wait) for page, size in head)
                else:
                    sent = reg.stream.offer_pages(reg, chain(head, pages), self._scanning, wait)
                if not sent:
                    self._end(processor, reg, ErrorReason.SLOW_CONSUMER, "catch-up stalled")
                    return
        except BatchTimestampBeforeGCError as exc:
            with self._lock:
                reg.end(ErrorReason.GC_THRESHOLD, str(exc), exc.threshold)
                processor.unregister(reg)
            return
        except FeedKVError as exc:
            log.warning("catch-up scan of %s failed: %s", reg, exc)
            self._end(processor, reg, ErrorReason.NODE_SHUTDOWN, f"catch-up failed: {exc}")
            return
        except Exception as exc:
            # NB: a bug; still the stream must end, or its consumer waits for ever
            log.exception("catch-up scan of %s failed", reg)
            self._end(processor, reg, ErrorReason.INVARIANT_VIOLATION, f"catch-up failed: {exc!r}")
            return
        with self._lock:
            processor.finish_catch_up(reg)

    def _end(self, processor: Processor, reg: Registration, reason: ErrorReason, msg: str) -> None:
        with self._lock:
            reg.end(reason, msg)
            processor.unregister(reg)

    # The pusher.

    def _push_loop(self) -> None:
        while not self._stopping.wait(self.config.push_interval_s):
            now = self.store.clock.now()
            older_than = Timestamp(now.wall - self.config.push_age_ns, 0)
            with self._lock:
                self._sweep()
                work = [(p, p.txns_to_push(older_than)) for p in self._processors.values()]
            for processor, txns in work:
                for txn in txns:
                    try:
                        self._push(processor, txn, now)
                    except FeedKVError as exc:
                        if not self._stopping.is_set():
                            log.warning("pushing txn %s failed: %s", txn.txn_id.hex()[:8], exc)

    def _push(self, processor: Processor, txn: UnresolvedTxn, now: Timestamp) -> None:
        record = self._pusher.push(TxnMeta(txn.txn_id, txn.txn_key, 0, txn.ts), now)
        if record is None:
            return
        if record.status is TxnStatus.PENDING:
            with self._lock:
                processor.forward_txn(txn.txn_id, record.meta.write_ts)
        elif record.status is TxnStatus.COMMITTED:
            self._pusher.resolve(processor.span, record.meta, TxnStatus.COMMITTED)
        else:
            self._pusher.resolve(processor.span, record.meta, TxnStatus.ABORTED)
            with self._lock:
                processor.forget_txn(txn.txn_id)
