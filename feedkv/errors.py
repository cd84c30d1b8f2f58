"""The feedkv error tree.

Every error feedkv raises derives from :class:`FeedKVError`. The tree is shaped by what
the caller should do about the error::

    FeedKVError
    ├── RetryableError                 try again: the state that caused it will change
    │   ├── WriteIntentError           another txn's intent is in the way (push or wait)
    │   ├── WriteTooOldError           a newer committed version exists (retry higher)
    │   ├── TransactionRetryError      the txn must restart (its reads could not refresh)
    │   ├── TransactionAbortedError    the txn was aborted (pushed, expired, rolled back)
    │   ├── PushFailedError            the pushed txn is alive and outranks the pusher
    │   ├── RangeUnavailableError      the range is moving between nodes (wait for it)
    │   └── RangeRoutingError          a request reached the wrong range (stale cache)
    │       ├── RangeKeyMismatchError
    │       ├── RangeNotFoundError
    │       └── NotLeaseHolderError    that replica does not hold the range's lease
    ├── InvalidArgumentError           your mistake: the message names the bad part
    │   ├── TimestampParseError
    │   ├── InvalidKeyError
    │   ├── InvalidSpanError
    │   ├── ValueTooLargeError
    │   ├── InvalidURLError
    │   └── ClientClosedError          the client was closed (open a new one)
    ├── ConditionFailedError           a conditional put found a different value
    ├── LockNotAvailableError          a NOWAIT locking read met a key another txn
    │                                  holds, or a wait for one passed lock_timeout
    │                                  (wait for it, or try again later)
    ├── SQLError                       a SQL statement failed; ``code`` is its SQLSTATE
    │   └── SerializationFailure       SQLSTATE 40001: retry the transaction (also
    │                                  a RetryableError)
    ├── BatchTimestampBeforeGCError    the data at that timestamp was garbage collected
    ├── ClockOffsetError               a remote clock is too far ahead to trust
    ├── StoreLockedError               another process owns the store directory
    ├── PermissionDeniedError          not allowed: authenticate as a user who is
    ├── TransactionStatusError         the txn was already committed or rolled back
    ├── ExternalError                  a fault outside feedkv (disk, network, sink)
    │   ├── StorageError
    │   ├── NodeUnavailableError       the node cannot be reached or is shutting down
    │   └── AmbiguousResultError       a commit may or may not have happened
    └── InvariantViolation             a bug in feedkv: an internal promise was broken

``InvalidArgumentError`` is also a :class:`ValueError`, so callers that already catch
``ValueError`` for bad input keep working. Third-party exceptions are translated where
they enter feedkv (``raise StorageError(...) from exc``).

This module is the bottom layer: it imports nothing from feedkv, since every other
module imports it. The errors that carry feedkv values (a
:class:`~feedkv.util.hlc.Timestamp`, a storage :class:`~feedkv.storage.intent.Intent`,
a :class:`~feedkv.kv.range_descriptor.RangeDescriptor`) are generic in the value's type
(bound by a protocol of what their message needs): raising one infers it, and the
value is stored as given.
"""

from __future__ import annotations

from typing import Generic, Protocol, Self, TypeVar

__all__ = [
    "AmbiguousResultError",
    "BatchTimestampBeforeGCError",
    "ClientClosedError",
    "ClockOffsetError",
    "ConditionFailedError",
    "ExternalError",
    "FeedKVError",
    "InvalidArgumentError",
    "InvalidKeyError",
    "InvalidSpanError",
    "InvalidURLError",
    "InvariantViolation",
    "LockNotAvailableError",
    "NodeUnavailableError",
    "NotLeaseHolderError",
    "PermissionDeniedError",
    "PushFailedError",
    "RangeKeyMismatchError",
    "RangeNotFoundError",
    "RangeRoutingError",
    "RangeUnavailableError",
    "RequestCanceledError",
    "RetryableError",
    "SQLError",
    "SerializationFailure",
    "StorageError",
    "StoreLockedError",
    "TimestampParseError",
    "TransactionAbortedError",
    "TransactionRetryError",
    "TransactionStatusError",
    "ValueTooLargeError",
    "WriteIntentError",
    "WriteTooOldError",
]


class _Timestamp(Protocol):
    """What the errors use of :class:`~feedkv.util.hlc.Timestamp`: its successor."""

    def next(self) -> Self: ...


class _TxnMeta(Protocol):
    @property
    def id(self) -> bytes: ...

    @property
    def write_ts(self) -> object: ...


class _Intent(Protocol):
    """What :class:`WriteIntentError` shows of a :class:`~feedkv.storage.intent.Intent`."""

    @property
    def key(self) -> bytes: ...

    @property
    def txn(self) -> _TxnMeta: ...


_TS = TypeVar("_TS", bound=_Timestamp)  # feedkv.util.hlc.Timestamp
_I = TypeVar("_I", bound=_Intent)  # feedkv.storage.intent.Intent
_D = TypeVar("_D")  # feedkv.kv.range_descriptor.RangeDescriptor


class FeedKVError(Exception):
    """Root of every error feedkv raises."""


class RetryableError(FeedKVError):
    """The operation may succeed if retried; the message says what to wait for."""


class WriteIntentError(RetryableError, Generic[_I]):
    """A read or write met intents of other transactions.

    ``intents`` lists every conflicting intent found (a scan reports all of them, so the
    caller can push or wait for each transaction once).
    """

    def __init__(self, intents: list[_I]) -> None:
        self.intents = intents
        shown = ", ".join(
            f"{i.key!r} (txn {i.txn.id.hex()[:8]} at {i.txn.write_ts})" for i in intents[:3]
        )
        more = f" and {len(intents) - 3} more" if len(intents) > 3 else ""
        super().__init__(f"conflicting intents on {shown}{more}")


class WriteTooOldError(RetryableError, Generic[_TS]):
    """A write at ``ts`` met a committed version at or above it.

    Retry the write at ``actual_ts`` (one tick above the newest version).
    """

    def __init__(self, key: bytes, ts: _TS, existing_ts: _TS) -> None:
        self.key = key
        self.ts = ts
        self.existing_ts = existing_ts
        self.actual_ts = existing_ts.next()
        super().__init__(
            f"write of {key!r} at {ts} is too old: a committed version exists at "
            f"{existing_ts}; retry at {self.actual_ts}"
        )


class TransactionRetryError(RetryableError, Generic[_TS]):
    """The transaction must restart at a higher timestamp.

    Its write timestamp moved (a newer write, a read or the closed timestamp pushed it) and
    a read it made could not be refreshed there without seeing a different value.
    ``db.run_transaction`` retries it. ``ts``, when set, is the timestamp the transaction
    must move to (its coordinator refreshes its reads there before giving up).
    """

    def __init__(self, reason: str, message: str, ts: _TS | None = None) -> None:
        self.reason = reason
        self.ts = ts
        # NB: worded as CockroachDB's, which clients and people grep for; the SQL layer
        # puts "restart transaction: " in front (SerializationFailure.restart)
        super().__init__(f"TransactionRetryError: retry txn ({reason} - {message})")


class TransactionAbortedError(RetryableError):
    """The transaction was aborted: a higher-priority txn pushed it, its record expired, or
    it was rolled back. Start again with a new transaction; ``run_transaction`` does. Its
    message starts as CockroachDB's: ``TransactionAbortedError(ABORT_REASON_...): ``."""


class PushFailedError(RetryableError):
    """A push met a live transaction that outranks the pusher: wait for it to finish."""


class RangeUnavailableError(RetryableError):
    """The range cannot serve requests for a moment (it is moving to another node); the
    client waits and resends."""


class RangeRoutingError(RetryableError):
    """A request named a range that no longer holds its keys; the client refreshes its range
    cache and resends. Users only see this when routing keeps failing."""


class RangeKeyMismatchError(RangeRoutingError, Generic[_D]):
    """The range exists but no longer covers every key of the request (split or merged).

    ``descriptors`` are the node's current descriptors for the request's keys.
    """

    def __init__(self, message: str, descriptors: list[_D]) -> None:
        self.descriptors = descriptors
        super().__init__(message)


class RangeNotFoundError(RangeRoutingError, Generic[_D]):
    """The range id is unknown to the node (its replica there was removed, or the range
    merged away). ``descriptor``: where the node knows the request's keys are now (the
    range's current descriptor, or the range it merged into), newer than the request's,
    so the client need not look it up; ``None`` when it knows nothing newer."""

    def __init__(self, range_id: int, descriptor: _D | None = None) -> None:
        self.range_id = range_id
        self.descriptor = descriptor
        super().__init__(f"range r{range_id} is not on this node (merged away?)")


class NotLeaseHolderError(RangeRoutingError, Generic[_D]):
    """The replica asked does not hold the range's lease (it is not its Raft leader, or
    has not yet applied what earlier leaders committed). ``lease_holder`` is the replica
    id it believes leads, or 0 when it knows of none; the client resends there.
    ``descriptor``: the range's descriptor as that replica holds it (its lease holder
    first when known), as CockroachDB's error carries the lease and the descriptor, so
    a client whose cache misses replicas the range gained learns them without a
    lookup; ``None`` when not known."""

    def __init__(
        self, range_id: int, replica_id: int, lease_holder: int, descriptor: _D | None = None
    ) -> None:
        self.range_id = range_id
        self.lease_holder = lease_holder
        self.descriptor = descriptor
        hint = f"; try replica {lease_holder}" if lease_holder else ""
        super().__init__(f"replica {replica_id} of range r{range_id} does not hold its lease{hint}")


class InvalidArgumentError(FeedKVError, ValueError):
    """The caller passed something malformed; the message names the bad part."""


class TimestampParseError(InvalidArgumentError):
    """A timestamp string did not have the form ``<wall ns>.<logical, 10 digits>``."""


class InvalidKeyError(InvalidArgumentError):
    """A key is empty, too long, or outside the user keyspace."""


class InvalidSpanError(InvalidArgumentError):
    """A span is not a pair of byte keys, or is empty or inverted (its end must sort
    after its start)."""


class ValueTooLargeError(InvalidArgumentError):
    """A value is larger than the store accepts."""


class InvalidURLError(InvalidArgumentError):
    """A connection target is neither a store path nor a ``feedkv://host:port`` URL."""


class ClientClosedError(InvalidArgumentError):
    """The client was used after ``close()`` (as Python's files raise ValueError then)."""


class ConditionFailedError(FeedKVError):
    """A conditional put expected one value and found another (``actual``, ``None`` if
    absent); with ``exists`` it expected any value and found none."""

    def __init__(
        self, key: bytes, expected: bytes | None, actual: bytes | None, *, exists: bool = False
    ) -> None:
        self.key = key
        self.expected = expected  # NB: unused when ``exists``
        self.actual = actual
        self.exists = exists
        wanted = "a value" if exists else _show(expected)
        super().__init__(f"condition failed for {key!r}: expected {wanted}, found {_show(actual)}")


class LockNotAvailableError(FeedKVError):
    """A locking read that was not to wait (``nowait``) met ``key`` held by another
    transaction: its lock, or its intent while it is pending; or (``reason``
    :data:`LOCK_TIMEOUT`) a batch waited for such a key longer than its header's
    ``lock_timeout_ms``. Not retried by feedkv: the caller asked not to wait, or not for
    long (SQL's ``FOR UPDATE NOWAIT`` and ``lock_timeout``, SQLSTATE 55P03)."""

    NOWAIT = "nowait"
    LOCK_TIMEOUT = "lock_timeout"

    def __init__(self, key: bytes, reason: str = NOWAIT) -> None:
        self.key = key
        self.reason = reason
        if reason == self.LOCK_TIMEOUT:
            super().__init__(f"lock timeout: waited too long for the lock on key {key!r}")
        else:
            super().__init__(f"could not obtain lock on key {key!r}: another transaction holds it")


class RequestCanceledError(FeedKVError):
    """The batch's caller gave up (its statement was cancelled, or ran past its
    ``statement_timeout``) while the batch waited for another transaction's lock or
    intent. Nothing of the batch was applied."""


class SQLError(FeedKVError):
    """A SQL statement failed. ``code`` is the PostgreSQL SQLSTATE (``42P01``: unknown
    table, ``23505``: duplicate key, ...); ``position`` is the 1-based character offset
    of the problem in the statement when one is known (syntax errors); ``detail`` is
    PostgreSQL's DETAIL field, the specifics kept out of the message (a duplicate key's
    ``Key (k)=(1) already exists.``). ``str()`` shows both, as psql does."""

    def __init__(
        self, code: str, message: str, *, position: int | None = None, detail: str | None = None
    ) -> None:
        self.code = code
        self.message = message
        self.position = position
        self.detail = detail
        super().__init__(message if detail is None else f"{message}\nDETAIL: {detail}")


class SerializationFailure(SQLError, RetryableError):
    """SQLSTATE 40001: the transaction conflicted with another and must be retried from
    its start (``session.run_transaction`` does that)."""

    def __init__(self, message: str) -> None:
        super().__init__("40001", message)

    @classmethod
    def restart(cls, exc: RetryableError) -> SerializationFailure:
        """``exc`` as the 40001 a SQL client gets, worded as CockroachDB's
        (``restart transaction: TransactionRetryWithProtoRefreshError: ...``)."""
        if isinstance(exc, SerializationFailure):
            return exc
        if isinstance(exc, TransactionRetryError | TransactionAbortedError | WriteTooOldError):
            return cls(f"restart transaction: TransactionRetryWithProtoRefreshError: {exc}")
        return cls(f"restart transaction: {exc}")


class BatchTimestampBeforeGCError(FeedKVError, Generic[_TS]):
    """A read or export asked for history older than the garbage-collection threshold."""

    def __init__(self, ts: _TS, threshold: _TS, what: str = "read") -> None:
        self.ts = ts
        self.threshold = threshold
        super().__init__(
            f"{what} at {ts} is below the garbage-collection threshold {threshold}: "
            "that history has been removed; read at or above the threshold"
        )


class ClockOffsetError(FeedKVError):
    """A remote timestamp is further ahead of the local clock than the max offset allows."""


class StoreLockedError(FeedKVError):
    """The store directory is already open in another process."""


class PermissionDeniedError(FeedKVError):
    """The caller is not allowed to do this (a secure node's raw KV API is for nodes and
    the root client certificate), or could not prove who it is."""


class TransactionStatusError(FeedKVError):
    """The transaction was already committed or rolled back; it cannot be used again."""


class ExternalError(FeedKVError):
    """A fault outside feedkv: disk, network, or a sink."""


class NodeUnavailableError(ExternalError):
    """The node could not be reached, or it is shutting down. Nothing was applied."""


class AmbiguousResultError(ExternalError):
    """The connection failed after a write was sent: it may or may not have been applied.

    Read the key back before retrying a write that is not idempotent.
    """


class StorageError(ExternalError):
    """The storage engine failed (disk full, I/O error, corrupt file)."""


class InvariantViolation(FeedKVError):
    """An internal promise was broken. This is a bug in feedkv; please report it."""


def _show(value: bytes | None) -> str:
    if value is None:
        return "no value"
    if len(value) > 32:
        return f"{value[:32]!r}... ({len(value)} bytes)"
    return repr(value)
