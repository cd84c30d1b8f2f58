"""The queue between registrations and one consumer.

A consumer (a client's feed in this process, or a remote client's stream of feeds) owns one
:class:`EventStream`; every registration it makes delivers into it, tagged with the
consumer's tag for that registration, so one stream multiplexes many range feeds.

Events reach a stream in three ways:

- **Readers.** A live server-side registration is *attached*: it reads its processor's
  shared log itself when the consumer takes (:meth:`Reader.read`), so the commit thread
  never copies a value per consumer; it only wakes a waiting consumer (:meth:`wake`).
- **Offered pages.** A catch-up scan of more than a page is read by the consumer itself,
  a page each time it takes (:meth:`offer_pages`, which the scan's worker calls and which
  returns once the consumer has read them all). Made and read on one thread, a page costs
  less than one made on another thread and handed over: a scan on another thread traded
  the GIL with the consumer at every hand-off and forced switch (py-lmdb itself keeps the
  GIL through cursor steps; :mod:`feedkv.storage.lmdb_engine`), and a catch-up feed took
  10-15% less CPU per value read this way.
- **Pushes.** A catch-up scan of a page or none pushes it (:meth:`push_wait`, waiting
  for room); a remote client pushes what arrives for its feeds (:meth:`push`, and
  :meth:`push_wait` when that finds no room). A push that gets no room in time ends the
  registration with ``SLOW_CONSUMER``: nothing is silently skipped. Pushed items count
  against the registration's bound (``per_registration`` values) and the budget. An
  ending :class:`~feedkv.rangefeed.event.Error` is always queued (:meth:`push_final`),
  and wakes a pusher waiting for that registration.

:meth:`take_batches` hands the consumer a page of each offered scan, everything pushed,
then everything its readers have, as ``(tag, item)`` where an item is an event or a
:class:`ValueBatch`; :meth:`take` flattens the batches. A consumer that sends what it
takes (a remote client's stream on the node) may let another thread take and send for it
while it sleeps (:attr:`EventStream.deliver_now`, :meth:`take_now`): it then waits with
:meth:`wait` and takes in turn with that thread. A consumer in an event loop
waits with :meth:`wait_async` (a future the producers resolve), so many feeds iterated
with ``async for`` need no thread each.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import NamedTuple, Protocol

from feedkv.rangefeed.budget import Budget
from feedkv.rangefeed.event import Error, Event, Value
from feedkv.util.hlc import Timestamp

__all__ = ["EventStream", "Queued", "Reader", "StreamItem", "ValueBatch"]


class ValueBatch(NamedTuple):
    """Values of one registration, in order; none is above ``max_ts``. A list, or columns
    (:class:`~feedkv.rangefeed.event.ValueColumns`: a catch-up page, a run off the wire)."""

    values: Sequence[Value]
    max_ts: Timestamp


StreamItem = Event | ValueBatch


class Queued(Protocol):
    """What the stream needs of a registration it queues for: its tag, a count of its
    queued values, and whether it has ended (nothing is queued after its final error)."""

    tag: Hashable
    queued: int
    done: bool


class Reader(Protocol):
    """A registration that reads its events itself when the consumer takes."""

    def has_news(self) -> bool: ...

    def read(self, out: list[tuple[Hashable, StreamItem]]) -> bool:
        """Append what is new to ``out``; ``True`` when the reader is finished."""
        ...


class _Offer:
    """A catch-up scan's pages offered to the consumer (see :meth:`EventStream.offer_pages`).
    ``lock`` is held while a page is read; ``withdrawn`` (set under it) says the scan may
    no longer be read; ``read``, ``finished`` and ``error`` are set under the stream's lock."""

    __slots__ = ("error", "finished", "lock", "pages", "read", "reg", "withdrawn")

    def __init__(
        self, reg: Queued, pages: Iterator[tuple[ValueBatch, int]], lock: threading.Lock
    ) -> None:
        self.reg = reg
        self.pages = pages
        self.lock = lock
        self.withdrawn = False
        self.read = False  # a page was read since the scan's thread last looked
        self.finished = False  # the pages ran out, or raised ``error``
        self.error: Exception | None = None


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _count(item: StreamItem) -> int:
    return len(item.values) if isinstance(item, ValueBatch) else 1


class EventStream:
    def __init__(self, budget: Budget, *, per_registration: int = 4096) -> None:
        self.budget = budget
        self.per_registration = per_registration
        self.lock = threading.Lock()
        self.waiting = False  # the consumer is (about to be) asleep in take_batches
        self.taken = 0  # live values (from readers) the consumer took last time
        self.taken_at = time.monotonic()  # and when: a Waker lets it rest after
        self._cond = threading.Condition(self.lock)  # the consumer waits on it
        # Pushers and catch-up scans wait on this one, for the consumer to take: what it
        # takes while it sleeps (take_now) must not wake it
        self._room = threading.Condition(self.lock)
        self._items: deque[tuple[Queued, StreamItem, int]] = deque()
        self._readers: dict[int, Reader] = {}
        self._offers: list[_Offer] = []
        self._async_waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._closed = False
        # Set by a consumer that can take while it sleeps (see :meth:`take_now`); a
        # :class:`~feedkv.rangefeed.waker.Waker` calls it instead of waking the consumer
        # of a light stream, on the flushing thread (a node's commit thread, under the
        # apply lock), so it must not block: ``True`` if it saw to the news (delivered,
        # or left to the consumer, kicked), ``False`` to have the consumer woken.
        self.deliver_now: Callable[[], bool] | None = None
        self._kicked = False  # see kick

    # Readers (the caller holds ``lock``).

    def attach(self, reader: Reader) -> None:
        if not self._closed:
            self._readers[id(reader)] = reader

    def wake(self) -> None:
        """A reader has news: wake the consumer if it sleeps."""
        with self.lock:
            if self.waiting:
                self._notify()

    def _notify(self) -> None:
        """Wake the consumer, on a thread or in an event loop (the caller holds ``lock``)."""
        self.waiting = False
        self._cond.notify_all()
        self._room.notify_all()  # NB: a pusher may wait for a registration that ended
        for loop, future in self._async_waiters:
            with contextlib.suppress(RuntimeError):  # its loop has closed: nobody waits
                loop.call_soon_threadsafe(_resolve, future)
        self._async_waiters.clear()

    # Pushes.

    def push(self, reg: Queued, item: StreamItem, size: int, *, wake: bool = True) -> bool:
        """Queue ``item`` for ``reg`` without blocking; ``False`` if there is no room.
        Without ``wake`` a sleeping consumer is left asleep: the caller wakes it later
        (through a :class:`~feedkv.rangefeed.waker.Waker`)."""
        with self.lock:
            if not self._accepts(reg):
                return False
            if reg.queued >= self.per_registration or not self.budget.try_acquire(size):
                return False
            self._append(reg, item, size, wake)
            return True

    def push_wait(self, reg: Queued, item: StreamItem, size: int, timeout: float) -> bool:
        """Queue ``item``, waiting up to ``timeout`` seconds in all for room (in the
        registration's bound, then in the budget); ``False`` if the wait ran out, the
        stream closed or the registration ended."""
        deadline = time.monotonic() + timeout
        with self._room:
            if not self._room.wait_for(
                lambda: not self._accepts(reg) or reg.queued < self.per_registration, timeout
            ):
                return False
            if not self._accepts(reg):
                return False
        if not self.budget.acquire(size, max(0.0, deadline - time.monotonic())):
            return False
        with self.lock:
            if not self._accepts(reg):
                self.budget.release(size)
                return False
            self._append(reg, item, size)
            return True

    def offer_pages(
        self,
        reg: Queued,
        pages: Iterator[tuple[ValueBatch, int]],
        lock: threading.Lock,
        timeout: float,
    ) -> bool:
        """Have the consumer read ``pages`` (a catch-up scan's, with their sizes), a page
        for ``reg`` each time it takes, on its own thread; blocks until it has read them
        all (``True``), or read none for ``timeout`` seconds, or the stream closed or the
        registration ended (``False``). An error raised by ``pages`` is raised here.
        ``lock`` is held while a page is read (scans read in turn), and ``pages`` is not
        read once this returns: the caller may close what they read. Pages are handed
        straight to the consumer, so they count against no bound or budget."""
        offer = _Offer(reg, pages, lock)
        with self._room:
            if not self._accepts(reg):
                return False
            self._offers.append(offer)
            if self.waiting:
                self._notify()
            # NB: woken when the pages ran out or the consumer stopped reading them, not
            # at every page read (py-spy put 6% of the consumer's samples in that wake,
            # this thread then taking the GIL from it); it looks at the pages read when
            # the wait runs out
            while not offer.finished and self._accepts(reg):
                offer.read = False
                self._room.wait_for(lambda: offer.finished or not self._accepts(reg), timeout)
                if not offer.read:
                    break
            if offer in self._offers:
                self._offers.remove(offer)
        with lock:  # NB: a page being read is read to its end first
            offer.withdrawn = True
        if offer.error is not None:
            raise offer.error
        return offer.finished

    def push_final(self, reg: Queued, error: Error) -> None:
        """Queue the registration's last event, whatever the bounds (a pusher waiting
        for the registration stops waiting)."""
        with self.lock:
            if not self._closed:
                self._append(reg, error, 0)
                self._room.notify_all()

    def _accepts(self, reg: Queued) -> bool:
        return not self._closed and not reg.done

    def _append(self, reg: Queued, item: StreamItem, size: int, wake: bool = True) -> None:
        reg.queued += _count(item)
        self._items.append((reg, item, size))
        if wake and self.waiting:
            self._notify()

    # Taking.

    def take_batches(self, timeout: float | None = None) -> list[tuple[Hashable, StreamItem]]:
        """A page of each offered scan, everything pushed, then everything the readers
        have, as ``(tag, item)``; waits up to ``timeout`` for the first (an empty list:
        nothing came, or the stream closed)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.lock:
            while True:
                self.waiting = True  # before looking: a producer that saw False came first
                if self._ready():
                    break
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    break
                self._cond.wait(left)
            self.waiting = False
            offers = list(self._offers)
        return self._take(offers)

    def wait(self, timeout: float | None) -> None:
        """Sleep until there is something to take, the consumer is woken or kicked, or
        ``timeout`` runs out (a consumer that lets :attr:`deliver_now` take for it: what
        it was woken for may have been taken meanwhile)."""
        with self.lock:
            self.waiting = True
            if not (self._kicked or self._ready()):
                self._cond.wait(timeout)
            self.waiting = False
            self._kicked = False

    def kick(self) -> None:
        """Wake the consumer, or have its next :meth:`wait` return at once: news it
        finds outside the stream (what :attr:`deliver_now` took and left to it)."""
        with self.lock:
            self._kicked = True
            if self.waiting:
                self._notify()

    def take_now(self) -> list[tuple[Hashable, StreamItem]] | None:
        """What :meth:`take_batches` would return at once, taken on another thread than
        the consumer's while it sleeps (it stays asleep: :attr:`waiting` is left as it
        is); ``None`` while a catch-up scan offers pages, which only the consumer reads.
        The caller keeps what it takes in order with the consumer's takes."""
        with self.lock:
            if self._offers:
                return None
        return self._take([])

    def _take(self, offers: list[_Offer]) -> list[tuple[Hashable, StreamItem]]:
        # NB: read without the stream's lock, which the commit thread takes to wake the
        # consumer; before the registrations' events are taken, so that a page never
        # follows its registration's final error
        out = self._read_offers(offers) if offers else []
        with self.lock:
            items, self._items = self._items, deque()
            pages = len(out)
            released = 0
            for reg, item, size in items:
                reg.queued -= _count(item)
                released += size
                out.append((reg.tag, item))
            for key, reader in list(self._readers.items()):
                if reader.read(out):
                    del self._readers[key]
            if items:
                self._room.notify_all()  # catch-up scans waiting for room
            # NB: a scan's pages and pushed items (a remote client's) do not count: a scan
            # is not paced
            self.taken = sum(
                len(item.values)
                for _tag, item in itertools.islice(out, pages + len(items), None)
                if isinstance(item, ValueBatch)
            )
            self.taken_at = time.monotonic()
        if released:
            self.budget.release(released)
        return out

    def _read_offers(self, offers: list[_Offer]) -> list[tuple[Hashable, StreamItem]]:
        """A page of each offered scan still accepted (the consumer's thread, without
        the stream's lock)."""
        out: list[tuple[Hashable, StreamItem]] = []
        for offer in offers:
            page = None
            with offer.lock:
                readable = not offer.withdrawn and self._accepts(offer.reg)
                if readable:
                    try:
                        page = next(offer.pages, None)
                    except Exception as exc:  # raised in the scan's thread by offer_pages
                        offer.error = exc
            with self.lock:
                offer.read = True
                if page is None:
                    # NB: out of the list at once, or the consumer would find it ready
                    # until the scan's thread takes it out
                    offer.finished = readable
                    if offer in self._offers:
                        self._offers.remove(offer)
                    self._room.notify_all()  # the scan's thread waits for this
            if page is not None:
                out.append((offer.reg.tag, page[0]))
        return out

    def rest(self, until: float) -> None:
        """Wait until ``until`` (``time.monotonic``) whatever comes meanwhile, unless the
        stream closes: a consumer that never sleeps (it finds news each time it takes)
        rests this way, as a Waker rests one that does."""
        with self._cond:
            while not self._closed and (left := until - time.monotonic()) > 0:
                self._cond.wait(left)

    async def wait_async(self, timeout: float | None = None) -> None:
        """Wait in the running event loop, without a thread, until there is something
        to take, the stream closes or ``timeout`` runs out."""
        loop = asyncio.get_running_loop()
        with self.lock:
            self.waiting = True
            if self._ready():
                self.waiting = False
                return
            waiter = (loop, loop.create_future())
            self._async_waiters.append(waiter)
        try:
            await asyncio.wait_for(waiter[1], timeout)
        except TimeoutError:
            pass
        finally:
            with self.lock:
                if waiter in self._async_waiters:
                    self._async_waiters.remove(waiter)

    def take(self, timeout: float | None = None) -> list[tuple[Hashable, Event]]:
        """:meth:`take_batches` with each batch's values as events of their own."""
        out: list[tuple[Hashable, Event]] = []
        for tag, item in self.take_batches(timeout):
            if isinstance(item, ValueBatch):
                out.extend((tag, value) for value in item.values)
            else:
                out.append((tag, item))
        return out

    def _ready(self) -> bool:
        return (
            bool(self._items)
            or bool(self._offers)
            or self._closed
            or any(reader.has_news() for reader in self._readers.values())
        )

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Stop accepting events, drop what is queued, and wake the consumer and any
        waiting pusher (the consumer is going away)."""
        with self.lock:
            self._closed = True
            released = sum(size for _reg, _item, size in self._items)
            self._items.clear()
            self._readers.clear()
            self._offers.clear()
            self._notify()
        self.budget.release(released)
