"""The session as a statement's execution sees it.

An :class:`~feedkv.sql.execution.Execution` runs one statement for a
:class:`~feedkv.sql.session.Session`, which in turn creates executions: the executor
is written against this protocol, not the session, so the two modules do not import
each other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from feedkv.kv.db import KVClient
    from feedkv.sql import catalog
    from feedkv.sql import statements as st
    from feedkv.sql.active_sessions import SessionRegistry
    from feedkv.sql.cursors import Cursors
    from feedkv.sql.descriptor import DatabaseDescriptor, NamedRelation, TableDescriptor
    from feedkv.sql.interrupt import Interrupt
    from feedkv.sql.leases import Lease, Leases
    from feedkv.sql.relation import Relation
    from feedkv.util.hlc import Timestamp

__all__ = ["SequenceState", "SessionContext"]

P = TypeVar("P")
S = TypeVar("S", bound="st.Statement")


@dataclass
class SequenceState:
    """One session's sequence values (:mod:`feedkv.sql.sequences`): the last each
    sequence gave it (``currval``), and the last of all (``lastval``)."""

    values: dict[int, int] = field(default_factory=dict)
    last: int | None = None

    def note(self, sequence_id: int, value: int) -> None:
        self.values[sequence_id] = value
        self.last = value


class SessionContext(Protocol):
    """What an execution uses of its session (see :class:`~feedkv.sql.session.Session`
    for the contracts)."""

    @property
    def db(self) -> KVClient: ...

    @property
    def user(self) -> str: ...

    @property
    def database(self) -> str: ...

    @property
    def leases(self) -> Leases | None: ...

    @property
    def in_transaction(self) -> bool: ...

    @property
    def default_replicas(self) -> int:
        """The default zone's ``num_replicas`` until one is set (the node's flag)."""
        ...

    @property
    def sequences(self) -> SequenceState: ...

    @property
    def interrupt(self) -> Interrupt: ...

    @property
    def transaction_as_of(self) -> Timestamp | None:
        """The time the open transaction reads at, when it began AS OF SYSTEM TIME."""
        ...

    @property
    def lock_timeout_ms(self) -> int:
        """How long a statement may wait for another transaction's lock (the
        ``lock_timeout`` session variable, in ms; 0: as long as it takes)."""
        ...

    @property
    def backend_pid(self) -> int:
        """The session's number for pg_backend_pid(): its SQL client's process id."""
        ...

    @property
    def cursors(self) -> Cursors:
        """The session's SQL cursors (:mod:`feedkv.sql.cursors`)."""
        ...

    def resolve_database(self, reader: catalog.Reader, name: str) -> DatabaseDescriptor: ...

    def resolve_table(
        self, reader: catalog.Reader, database: str | None, name: str
    ) -> TableDescriptor: ...

    def relation_named(
        self, reader: catalog.Reader, database: str | None, name: str
    ) -> NamedRelation: ...

    def leased_table(self, database: str | None, name: str) -> Lease | None: ...

    def transaction_leases(self) -> frozenset[bytes]:
        """The records of the leases the open explicit transaction's statements hold."""
        ...

    def variable(self, name: str) -> str: ...

    def transaction_age_ns(self) -> int:
        """The nanoseconds since the SQL transaction running began: since ``BEGIN`` in an
        explicit one, since the first attempt of an implicit one (its retries included)."""
        ...

    @property
    def registry(self) -> SessionRegistry | None:
        """The node's open sessions (SHOW SESSIONS); ``None``: a session of no node."""
        ...

    def show_jobs(self, source: st.ShowSource) -> Relation:
        """The rows of a SHOW of jobs read as a table (``FROM [SHOW JOBS]``), with
        the privileges of the statement itself."""
        ...

    def forget(self, *, database: str | None = None, table: int | None = None) -> None: ...

    def plan(
        self,
        statement: S,
        desc: TableDescriptor,
        make: Callable[[TableDescriptor, S, str], P],
        database: Callable[[S], str],
    ) -> P: ...
