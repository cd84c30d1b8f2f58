"""The SQL sessions a node serves and the query each runs now: what ``SHOW SESSIONS``,
``SHOW QUERIES`` (``SHOW STATEMENTS``), ``CANCEL QUERY`` and ``CANCEL SESSION`` see, as
CockroachDB has them.

Every session a node opens (over the SQL port or embedded) registers in its node's
:class:`SessionRegistry` while it is open and marks the query it runs. Ids are
CockroachDB's shape, 32 hex digits: the local wall clock when the session or query started
(nanoseconds), then a counter and the node id, so they are unique on the node and sort
by start.

A registry knows its own node's sessions. In a cluster the node gives it its
:class:`Peers`: ``SHOW [CLUSTER] SESSIONS`` then lists every node's (each answering
with :class:`SessionRecord` snapshots of its own), and ``CANCEL QUERY`` of a query
another node runs is sent to that node (an id names its node in its last 32 bits), which
cancels it under the same rules as its own statements would.

Cancelling a query sets its session's interrupt (:mod:`feedkv.sql.interrupt`): the query
stops with 57014 where it next looks. Cancelling a session cancels its query and closes
its connection (an embedded session's next statement fails with 57P01).
"""

from __future__ import annotations

import datetime
import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from feedkv.errors import SQLError

__all__ = [
    "ActiveQuery",
    "ActiveSession",
    "CancelOutcome",
    "Peers",
    "SessionRecord",
    "SessionRegistry",
    "node_of",
]


@dataclass(frozen=True, slots=True)
class ActiveQuery:
    """A query a session runs now: its text, when it started (wall ns) and the low half
    of its id (a counter and the node id). Made when it is asked for (most queries end
    unseen), as is its id."""

    text: str
    started_ns: int
    low: int

    @property
    def id(self) -> str:
        return _hex_id(self.started_ns, self.low)

    @property
    def started(self) -> datetime.datetime:
        return _utc(self.started_ns)


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """A session as ``SHOW SESSIONS`` and ``SHOW QUERIES`` show it, taken at one moment:
    what a node answers another that lists the cluster's sessions."""

    node_id: int | None
    id: str
    user: str
    client_address: str
    application_name: str
    started_ns: int
    last_query: str
    query: ActiveQuery | None

    @property
    def started(self) -> datetime.datetime:
        return _utc(self.started_ns)

    def encode(self) -> dict[str, Any]:
        query = self.query
        return {
            "node": self.node_id,
            "id": self.id,
            "user": self.user,
            "client": self.client_address,
            "app": self.application_name,
            "started_ns": self.started_ns,
            "last": self.last_query,
            "query": None if query is None else [query.text, query.started_ns, query.low],
        }

    @classmethod
    def decode(cls, message: dict[str, Any]) -> SessionRecord:
        query = message["query"]
        return cls(
            message["node"],
            message["id"],
            message["user"],
            message["client"],
            message["app"],
            message["started_ns"],
            message["last"],
            None if query is None else ActiveQuery(*query),
        )


# What a node answers a CANCEL of an id: done, no session or query has it, or the
# canceller may not cancel it (another user's, and the canceller is no admin).
CancelOutcome = Literal["cancelled", "not found", "denied"]


class Peers(Protocol):
    """The other nodes of the registry's cluster, as its node reaches them."""

    def sessions(self) -> list[tuple[int, list[SessionRecord] | str]]:
        """Each other node's sessions, or why they could not be had from it."""
        ...

    def cancel(
        self, node_id: int, target: str, *, sessions: bool, user: str, admin: bool
    ) -> CancelOutcome:
        """:meth:`SessionRegistry.cancel` on node ``node_id``;
        :class:`~feedkv.errors.NodeUnavailableError` when it cannot be asked."""
        ...


def node_of(target: str) -> int | None:
    """The node a session or query id names (its last 32 bits; ``None``: an id of no
    node, or no id of this shape)."""
    if len(target) != 32:
        return None
    try:
        return int(target[-8:], 16) or None
    except ValueError:
        return None


def _hex_id(wall_ns: int, low: int) -> str:
    return f"{wall_ns & (2**64 - 1):016x}{low & (2**64 - 1):016x}"


def _utc(ns: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ns / 1e9, tz=datetime.UTC)


class ActiveSession:
    """One open session. ``cancel`` stops its running query (from any thread);
    ``terminate``, once a connection attaches, closes the connection."""

    def __init__(
        self,
        registry: SessionRegistry,
        session_id: str,
        user: str,
        cancel: Callable[[], None],
        application_name: Callable[[], str],
    ) -> None:
        self.registry = registry
        self.id = session_id
        self.user = user
        self.started_ns = registry.wall_ns()
        self.client_address = ""
        self.cancel = cancel
        self.terminate: Callable[[], None] | None = None
        self.application_name = application_name
        # The running query's text and start (wall ns). NB: a tuple, set and cleared in
        # one step, so another thread reads one query's two; and not an ActiveQuery,
        # whose making cost every statement a call
        self._running: tuple[str, int] | None = None
        # The low half of the running query's id, with the tuple above it belongs to:
        # drawn when the query is first asked for (see query), under _low_lock
        self._low: tuple[tuple[str, int], int] | None = None
        self._low_lock = threading.Lock()
        self.last_query = ""
        self.terminated = False
        self.cancelled_by_statement = False  # CANCEL QUERY stopped the last query

    def cancel_query(self) -> None:
        """CANCEL QUERY: stop the running query."""
        self.cancelled_by_statement = True
        self.cancel()

    def begin(self, text: str) -> None:
        """Mark ``text`` as the session's active query until :meth:`finish`; 57P01 if
        the session was cancelled (CANCEL SESSION) before. (Two calls, not a context
        manager: a statement takes tens of microseconds, a generator's a few of them.)"""
        if self.terminated:
            raise SQLError("57P01", "terminating connection due to administrator command")
        self.cancelled_by_statement = False
        self._running = (text, self.registry.wall_ns())

    def finish(self) -> bool:
        """The active query ended; whether CANCEL QUERY stopped it (then the session
        must not let the next query see the cancel)."""
        running, self._running = self._running, None
        if running is not None:
            self.last_query = running[0]
        return self.cancelled_by_statement

    @property
    def query(self) -> ActiveQuery | None:
        """The query the session runs now (``None``: it runs none).

        NB: its id's low half (a count) is drawn here, when the query is first asked
        for, not by :meth:`begin`: most queries end unseen, and drawing one cost every
        statement a call. The id still sorts by start (its high half), and stays the
        same for every later ask while the query runs (SHOW QUERIES, then CANCEL
        QUERY)."""
        running = self._running
        if running is None:
            return None
        low = self._low
        if low is None or low[0] is not running:
            with self._low_lock:
                low = self._low
                if low is None or low[0] is not running:
                    low = self._low = (running, self.registry.new_low())
        return ActiveQuery(*running, low[1])

    def record(self) -> SessionRecord:
        return SessionRecord(
            self.registry.node_id(),
            self.id,
            self.user,
            self.client_address,
            self.application_name(),
            self.started_ns,
            self.last_query,
            self.query,
        )

    def end(self) -> None:
        """CANCEL SESSION: stop its query and close its connection."""
        self.terminated = True
        self.cancel()
        if self.terminate is not None:
            self.terminate()


class SessionRegistry:
    """A node's open sessions (thread-safe). ``wall_ns`` is the local clock (read for
    every statement: it must cost no round trip) and ``node_id`` finds the node's id
    (``None`` while it has none; kept once known)."""

    def __init__(self, wall_ns: Callable[[], int], node_id: Callable[[], int | None]) -> None:
        self.wall_ns = wall_ns
        self._find_node_id = node_id
        self._node_id: int | None = None
        self._lock = threading.Lock()
        self._sessions: dict[str, ActiveSession] = {}
        self._counter = itertools.count(1)
        self.peers: Peers | None = None  # the other nodes of its node's cluster, if any

    def node_id(self) -> int | None:
        if self._node_id is None:
            self._node_id = self._find_node_id()
        return self._node_id

    def new_id(self) -> str:
        """A fresh session id (CockroachDB's 128 bits, in hex): the wall time now, then a
        counter and the node id."""
        return _hex_id(self.wall_ns(), self.new_low())

    def new_low(self) -> int:
        """The low half of a fresh id: the next count, then the node id."""
        node_id = self._node_id if self._node_id is not None else self.node_id()
        return (next(self._counter) << 32) | ((node_id or 0) & 0xFFFFFFFF)

    def register(
        self, user: str, cancel: Callable[[], None], application_name: Callable[[], str]
    ) -> ActiveSession:
        session = ActiveSession(self, self.new_id(), user, cancel, application_name)
        with self._lock:
            self._sessions[session.id] = session
        return session

    def remove(self, session: ActiveSession) -> None:
        """The session closed. Idempotent."""
        with self._lock:
            self._sessions.pop(session.id, None)

    def sessions(self) -> list[ActiveSession]:
        """The open sessions, oldest first."""
        with self._lock:
            return sorted(self._sessions.values(), key=lambda s: s.id)

    def by_query(self, query_id: str) -> ActiveSession | None:
        """The session running query ``query_id`` now."""
        for session in self.sessions():
            query = session.query
            if query is not None and query.id == query_id:
                return session
        return None

    def by_id(self, session_id: str) -> ActiveSession | None:
        with self._lock:
            return self._sessions.get(session_id)

    def records(self) -> list[SessionRecord]:
        """The open sessions as they are now, oldest first."""
        return [session.record() for session in self.sessions()]

    def cancel(self, target: str, *, sessions: bool, user: str, admin: bool) -> CancelOutcome:
        """CANCEL SESSION ``target`` (``sessions``) or CANCEL QUERY ``target`` for
        ``user`` (``admin``: one who may cancel anyone's), on this node."""
        session = self.by_id(target) if sessions else self.by_query(target)
        if session is None:
            return "not found"
        if session.user != user and not admin:
            return "denied"
        if sessions:
            session.end()
        else:
            session.cancel_query()
        return "cancelled"
