"""The server side of a client's feeds: many registrations on one stream.

A client opens one stream of feeds per node, a connection to the node's batch port
(:mod:`feedkv.kv.batch_socket`, its hello naming :data:`~feedkv.rangefeed.wire.RANGEFEED`)
rather than a gRPC stream: an event's trip from the commit to the consumer cost twice as
long on gRPC's (``feedkv bench rangefeed``'s watch latency). Each ``RangeFeedRegister``
message registers a span under the client's tag; every event of every registration goes
into one :class:`~feedkv.rangefeed.stream.EventStream`, and the stream's writer sends
what it holds in batches (at most ``MAX_BATCH_EVENTS`` events or about
``MAX_BATCH_BYTES`` per message); a light stream's news is sent by the commit thread as it
flushes its group, when the connection's send buffer takes it without waiting
(:mod:`feedkv.rangefeed.waker`), and what it does not take is left to the writer, which
sends it before anything it takes itself. ``checkpoints_only`` asks for checkpoints without
values. Values go with a timestamp a run of them once a registration on the stream says
its client reads ``ts_runs`` (``timestamp_runs``); else with one a row. When the client
closes the stream, its registrations are unregistered; when the node stops, every
registration's ``NODE_SHUTDOWN`` error is sent before the stream ends. A client that
stops reading holds the writer in its send: the registrations' queues fill, and the
node cuts them off (``SLOW_CONSUMER``) as it cuts off a slow consumer of its own.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from bisect import bisect_left
from collections.abc import Callable, Hashable, Iterator
from itertools import accumulate
from typing import cast

from feedkv.errors import FeedKVError, InvalidArgumentError, PermissionDeniedError
from feedkv.kv.access import ADMIN_USERS, Read, ReadAccess
from feedkv.kv.proto import feedkv_pb2 as pb
from feedkv.kv.wire import parse_messages, span_from_proto, timestamp_from_proto
from feedkv.rangefeed.event import Checkpoint, Error, ErrorReason
from feedkv.rangefeed.registration import Registration, event_size, values_size
from feedkv.rangefeed.store_feeds import StoreFeeds
from feedkv.rangefeed.stream import EventStream, StreamItem, ValueBatch
from feedkv.rangefeed.wire import event_to_proto, values_to_proto
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import KEY_MIN, Span

__all__ = ["MAX_BATCH_BYTES", "MAX_BATCH_EVENTS", "RangeFeedService"]

log = logging.getLogger(__name__)

MAX_BATCH_EVENTS = 1024  # a catch-up page (see catchup.PAGE_VALUES) goes whole
MAX_BATCH_BYTES = 4 << 20
DIRECT_MAX_VALUES = 64  # the most a light stream's take encodes on the commit thread
_POLL_S = 0.2


class RangeFeedService:
    """``access``: on a secure node, what a user other than the nodes and root may
    follow; a registration it refuses ends at once with ``PERMISSION_DENIED`` (the
    node lets such users open a stream of feeds only when it is given, see
    :mod:`feedkv.kv.access`). A registration is checked when it is made, and again at
    each :meth:`recheck`, which ends those their user may no longer read with
    ``PERMISSION_DENIED``: the node calls it when the grants or users change
    (``watch_access(recheck)`` is called once, when a user's first registration is
    made; see :mod:`feedkv.sql.grant_watch`). Cost: nothing per event; a recheck costs
    one check per running registration of a user other than root."""

    def __init__(
        self,
        feeds: StoreFeeds,
        access: ReadAccess | None = None,
        *,
        watch_access: Callable[[Callable[[], None]], None] | None = None,
    ) -> None:
        self.feeds = feeds
        self.access = access
        self._watch_access = watch_access
        self._lock = threading.Lock()
        self._checked: dict[Registration, str] = {}  # a user's running registrations
        self._rechecks = 0  # how many rechecks have started

    def recheck(self) -> None:
        """Check every running registration of a user again; end those refused now.
        Safe from any thread; a check that cannot read the grants leaves its
        registration running (the next change rechecks it)."""
        access = self.access
        if access is None:
            return
        with self._lock:
            self._rechecks += 1
            for ended in [reg for reg in self._checked if reg.done]:
                del self._checked[ended]  # NB: a range's end leaves it on a live stream
            checked = list(self._checked.items())
        for reg, user in checked:
            self._recheck_one(access, reg, user)

    def _recheck_one(self, access: ReadAccess, reg: Registration, user: str) -> None:
        if reg.done:
            return
        try:
            access.check(user, [Read(reg.span)])
        except PermissionDeniedError as exc:
            log.warning("ended a rangefeed of %s to %r: %s", reg.span, user, exc)
            reg.end(ErrorReason.PERMISSION_DENIED, f"{exc} (it was revoked)")
        except FeedKVError as exc:
            log.info("could not recheck a rangefeed of %s to %r: %s", reg.span, user, exc)

    def _forget(self, reg: Registration) -> None:
        with self._lock:
            self._checked.pop(reg, None)

    @contextlib.contextmanager
    def served(self, user: str | None) -> Iterator[_ServedFeeds]:
        """One client's stream of feeds for ``user`` (``None``: a plaintext node), for as
        long as it is entered: its registrations end with it."""
        served = _ServedFeeds(self, user if user is not None and user not in ADMIN_USERS else None)
        try:
            yield served
        finally:
            served.close()

    def unregister(self, reg: Registration) -> None:
        self._forget(reg)
        self.feeds.unregister(reg)

    def register(
        self, msg: pb.RangeFeedRegister, stream: EventStream, user: str | None
    ) -> Registration:
        rechecks = self._rechecks  # NB: read before the check (see below)
        try:
            span = span_from_proto(msg.span)
            start_ts = timestamp_from_proto(msg.start_ts)
        except (InvalidArgumentError, ValueError) as exc:
            return _refused(msg.tag, stream, ErrorReason.INVALID_REQUEST, str(exc))
        if user is not None and self.access is not None:
            try:
                self.access.check(user, [Read(span)])
            except PermissionDeniedError as exc:
                log.warning("refused a rangefeed of %s to %r: %s", span, user, exc)
                return _refused(msg.tag, stream, ErrorReason.PERMISSION_DENIED, str(exc))
            except FeedKVError as exc:  # the grants could not be read: try again later
                return _refused(msg.tag, stream, ErrorReason.NODE_SHUTDOWN, str(exc))
        try:
            reg = self.feeds.register(
                msg.tag,
                span,
                start_ts,
                msg.with_diff,
                stream,
                values=not msg.checkpoints_only,
                timestamp_order=msg.timestamp_order,
            )
        except InvalidArgumentError as exc:
            return _refused(msg.tag, stream, ErrorReason.INVALID_REQUEST, str(exc))
        except FeedKVError as exc:
            return _refused(msg.tag, stream, ErrorReason.NODE_SHUTDOWN, str(exc))
        if user is not None and self.access is not None:
            with self._lock:
                self._checked[reg] = user
                watch, self._watch_access = self._watch_access, None
                missed = self._rechecks != rechecks
            if missed:  # a recheck ran between the check and now, without this one
                self._recheck_one(self.access, reg, user)
            if watch is not None:
                watch(self.recheck)
        return reg


class _ServedFeeds:
    """The node's side of one client's feeds (a :class:`~feedkv.kv.batch_socket.Served`):
    :meth:`read` registers and unregisters as the client asks, every registration's
    events go into one :class:`~feedkv.rangefeed.stream.EventStream`, and
    :meth:`replies` sends what it holds in ``RangeFeedEvents`` messages until the
    client is done or the node's feeds stopped (their registrations ended
    ``NODE_SHUTDOWN`` first). ``user``: each registration is checked for that user
    (``None``: taken)."""

    def __init__(self, service: RangeFeedService, user: str | None) -> None:
        self._service = service
        self._user = user
        self._stream = service.feeds.new_stream()
        self._regs: dict[int, Registration] = {}
        self._ts_runs = False  # the client reads RangeFeedValues.ts_runs
        self._client_done = threading.Event()
        self.end: tuple[str, str] | None = None
        # _sending is held by whoever takes from the stream, until what it took is sent
        # or left for the writer (the three below), so messages leave in the order taken
        self._sending = threading.Lock()
        self._send_now: Callable[[bytes], bool] | None = None
        self._unsent: list[bytes] = []  # messages _deliver_now could not send
        self._held: list[tuple[Hashable, StreamItem]] = []  # and items it did not encode
        self._failed: Exception | None = None  # what _deliver_now met, for replies to raise

    def direct(self, send_now: Callable[[bytes], bool]) -> None:
        """Light streams' news goes through ``send_now`` from the commit thread (see
        :meth:`_deliver_now`) until :meth:`replies` ends."""
        self._send_now = send_now
        self._stream.deliver_now = self._deliver_now

    def _deliver_now(self) -> bool:
        """Take and send what the stream holds on the caller's thread (the commit
        thread's flush, for a light stream), sparing the writer's thread a wake: a
        watched key's value then leaves before its writer is acknowledged rather than
        after. What the connection would not take at once, or a take of more than
        ``DIRECT_MAX_VALUES`` values (not encoded here), is left to the writer, kicked."""
        if not self._sending.acquire(blocking=False):
            return False  # the writer is taking or sending: it finds the news next
        try:
            stream, send_now = self._stream, self._send_now
            if send_now is None or self._unsent or self._held or self._failed is not None:
                return False
            items = stream.take_now()
            if items is None:
                return False
            if _values_in(items) > DIRECT_MAX_VALUES:
                self._held = items
            else:
                messages = [m.SerializeToString() for m in _batches(items, ts_runs=self._ts_runs)]
                while messages and send_now(messages[0]):
                    del messages[0]
                self._unsent = messages
            if self._held or self._unsent:
                stream.kick()
            return True
        except Exception as exc:
            # NB: what it took is gone: the writer raises this, and the connection's end
            # has the client register again from its checkpoints, as when the writer
            # itself fails
            self._failed = exc
            stream.kick()
            return True
        finally:
            self._sending.release()

    def read(self, frames: Iterator[bytes]) -> None:
        """Bytes that are not a request stop the reading, ``malformed``."""
        service, regs = self._service, self._regs
        try:
            for msg in parse_messages(pb.RangeFeedRequest, frames):
                kind = msg.WhichOneof("kind")
                if kind == "register":
                    if msg.register.tag in regs:
                        # NB: its events could not be told from the first registration's
                        raise InvalidArgumentError(
                            f"malformed stream: tag {msg.register.tag} is already registered"
                        )
                    if msg.register.timestamp_runs:
                        self._ts_runs = True
                    regs[msg.register.tag] = service.register(
                        msg.register, self._stream, self._user
                    )
                elif kind == "unregister":
                    reg = regs.pop(msg.unregister.tag, None)
                    if reg is not None:
                        service.unregister(reg)
        except InvalidArgumentError as exc:
            self.end = ("malformed", str(exc))
        finally:
            self._client_done.set()

    def replies(self) -> Iterator[bytes]:
        """Until the client is done (gone, or malformed: nothing more is sent), or the
        node stopped its feeds and every event they queued was sent."""
        stream, feeds = self._stream, self._service.feeds
        try:
            while not self._client_done.is_set():
                stopped = feeds.stopped  # NB: read before the take, which then gets the ends
                stream.wait(_POLL_S)
                with self._sending:
                    if self._failed is not None:
                        raise self._failed
                    unsent, self._unsent = self._unsent, []
                    yield from unsent
                    items, self._held = self._held + stream.take_batches(0), []
                    for message in _batches(items, ts_runs=self._ts_runs):
                        yield message.SerializeToString()
                    if stopped and not (unsent or items):
                        self._send_now = None  # NB: in this hold: nothing is taken after
                        return
                if items:
                    # NB: sending takes long enough that news has come by the next take,
                    # so this loop would never sleep, and a busy feed would go in a
                    # message per commit group: it rests as a sleeping consumer would.
                    stream.rest(feeds.rest_end(stream))
        finally:
            with self._sending:  # the connection's end follows: nothing may come between
                self._send_now = None

    def close(self) -> None:
        for reg in list(self._regs.values()):
            self._service.unregister(reg)
        self._stream.close()


def _values_in(items: list[tuple[Hashable, StreamItem]]) -> int:
    return sum(len(item.values) for _tag, item in items if isinstance(item, ValueBatch))


def _refused(tag: int, stream: EventStream, reason: ErrorReason, message: str) -> Registration:
    """A registration that ends before it starts, so the client hears why."""
    reg = Registration(tag, Span(KEY_MIN, b"\x00"), Timestamp(0, 0), False, stream)
    reg.end(reason, message)
    return reg


class _Run:
    """A value batch and the registrations that read it (see :func:`_shared`)."""

    __slots__ = ("batch", "place", "tags")

    def __init__(self, tag: int, batch: ValueBatch, place: int) -> None:
        self.tags = [tag]
        self.batch = batch
        self.place = place  # its index in what _shared returns


def _batches(
    items: list[tuple[Hashable, StreamItem]], *, ts_runs: bool
) -> Iterator[pb.RangeFeedEvents]:
    """``items`` as messages of at most ``MAX_BATCH_EVENTS`` events or about
    ``MAX_BATCH_BYTES`` (a run is cut where a message fills), a value batch once for every
    registration that read it (see :func:`values_to_proto` for ``ts_runs``)."""
    batch = pb.RangeFeedEvents()
    count = size = 0
    for entry in _shared(items):
        if isinstance(entry, _Run):
            values, max_ts = entry.batch
            if count + len(values) <= MAX_BATCH_EVENTS and (
                size + (run_size := values_size(values)) <= MAX_BATCH_BYTES
            ):  # the run fits the message whole: the usual case, sized without a loop
                values_to_proto(entry.tags, entry.batch, batch.events.add().values, ts_runs=ts_runs)
                count += len(values)
                size += run_size
                if count == MAX_BATCH_EVENTS or size == MAX_BATCH_BYTES:
                    yield batch
                    batch = pb.RangeFeedEvents()
                    count = size = 0
                continue
            ends = list(accumulate(map(event_size, values)))  # ends[i]: bytes of values[: i + 1]
            at = 0
            while at < len(values):
                before = ends[at - 1] if at else 0
                # up to the value that fills the message's bytes (at least one), or its count
                stop = bisect_left(ends, before + MAX_BATCH_BYTES - size, lo=at) + 1
                stop = min(stop, at + MAX_BATCH_EVENTS - count, len(values))
                part = ValueBatch(values[at:stop], max_ts)
                values_to_proto(entry.tags, part, batch.events.add().values, ts_runs=ts_runs)
                count += stop - at
                size += ends[stop - 1] - before
                at = stop
                if count >= MAX_BATCH_EVENTS or size >= MAX_BATCH_BYTES:
                    yield batch
                    batch = pb.RangeFeedEvents()
                    count = size = 0
        else:
            event_to_proto(*entry, batch.events.add())
            count += 1
            size += event_size(entry[1])
            if count >= MAX_BATCH_EVENTS or size >= MAX_BATCH_BYTES:
                yield batch
                batch = pb.RangeFeedEvents()
                count = size = 0
    if batch.events:
        yield batch


def _shared(
    items: list[tuple[Hashable, StreamItem]],
) -> list[_Run | tuple[int, Checkpoint | Error]]:
    """``items`` with the value batches that several registrations read as one list (see
    :meth:`Processor.read_slice`) sent once for them all. Each registration's items keep
    their order: a batch joins an earlier copy only if nothing of its registration was
    placed after that copy."""
    out: list[_Run | tuple[int, Checkpoint | Error]] = []
    runs: dict[int, _Run] = {}  # id of a batch's values -> its newest run
    last: dict[int, int] = {}  # a registration's last place in ``out``
    for hashable, item in items:
        tag = cast(int, hashable)  # the service's tags are the client's wire tags
        if isinstance(item, ValueBatch):
            run = runs.get(id(item.values))
            if run is not None and run.place > last.get(tag, -1):
                run.tags.append(tag)
                if item.max_ts > run.batch.max_ts:  # either bound holds: keep the higher
                    run.batch = item
                last[tag] = run.place
                continue
            run = runs[id(item.values)] = _Run(tag, item, len(out))
            out.append(run)
        else:
            out.append((tag, cast(Checkpoint | Error, item)))  # a single value comes batched
        last[tag] = len(out) - 1
    return out
