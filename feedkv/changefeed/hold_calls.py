"""``HoldHistory``: a stream's hold on its table's history, placed by the node on behalf
of a user who may not write the catalog.

Root writes a :class:`~feedkv.changefeed.jobs.HistoryHold` itself, in a transaction. A
user other than root may not (a secure node's raw KV API only lets it read the tables it
may SELECT), so a Spark stream reading as that user asks the node: the node places,
renews or releases the hold when the user holds ``CHANGEFEED`` on the table (or is an
admin), as CockroachDB protects history only for changefeeds of users allowed to create
them; a user with ``SELECT`` alone streams without a hold, as its sinkless changefeeds
do. This module is the call's message, both sides: :func:`hold_request` for the client,
:class:`HoldRequest` parsed strictly by the node (:mod:`feedkv.server.history_holds`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import grpc
import msgpack

from feedkv.errors import InvalidArgumentError, NodeUnavailableError, PermissionDeniedError
from feedkv.kv.wire import SERVICE
from feedkv.security.tls import call_metadata
from feedkv.util.hlc import Timestamp

__all__ = ["METHOD", "HoldRequest", "call_hold", "hold_request"]

METHOD = "HoldHistory"
_TIMEOUT_S = 10.0
_MAX_ID_CHARS = 64
_MAX_AFTER_NS = 10 * 365 * 24 * 3600 * 1_000_000_000  # ten years: a lapse time, not never


@dataclass(frozen=True, slots=True)
class HoldRequest:
    """Hold table ``table_id``'s history from ``since`` on for ``after_ns`` from the
    node's now (placing or renewing hold ``hold_id``); ``since=None`` releases it."""

    hold_id: str
    table_id: int
    since: Timestamp | None
    after_ns: int = 0

    @classmethod
    def parse(cls, raw: bytes) -> HoldRequest:
        """:class:`InvalidArgumentError` names what is wrong with ``raw``."""
        try:
            msg = msgpack.unpackb(raw)
        except (ValueError, msgpack.UnpackException) as exc:
            raise InvalidArgumentError(f"{METHOD}: not a message: {exc}") from None
        if not isinstance(msg, dict) or set(msg) != {"id", "table", "since", "after_ns"}:
            raise InvalidArgumentError(f"{METHOD}: expected id, table, since and after_ns")
        hold_id, table_id, since, after_ns = msg["id"], msg["table"], msg["since"], msg["after_ns"]
        if not isinstance(hold_id, str) or not 0 < len(hold_id) <= _MAX_ID_CHARS:
            raise InvalidArgumentError(f"{METHOD}: id must be 1 to {_MAX_ID_CHARS} characters")
        if not _int(table_id) or not _int(after_ns) or table_id < 0 or after_ns < 0:
            raise InvalidArgumentError(f"{METHOD}: table and after_ns must be integers >= 0")
        if after_ns > _MAX_AFTER_NS:
            raise InvalidArgumentError(f"{METHOD}: after_ns is at most {_MAX_AFTER_NS} (ten years)")
        if since is not None and not isinstance(since, str):
            raise InvalidArgumentError(f"{METHOD}: since must be a timestamp or nil")
        return cls(hold_id, table_id, Timestamp.parse(since) if since else None, after_ns)


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def hold_request(request: HoldRequest) -> bytes:
    since = str(request.since) if request.since is not None else None
    return msgpack.packb(  # type: ignore[no-any-return]
        {
            "id": request.hold_id,
            "table": request.table_id,
            "since": since,
            "after_ns": request.after_ns,
        }
    )


def call_hold(channel: grpc.Channel, request: HoldRequest) -> None:
    """Ask the node behind ``channel``; :class:`PermissionDeniedError` when it refuses
    the caller, :class:`NodeUnavailableError` when the call fails."""
    stub = channel.unary_unary(f"/{SERVICE}/{METHOD}")
    try:
        stub(hold_request(request), timeout=_TIMEOUT_S, metadata=call_metadata(channel))
    except grpc.RpcError as exc:
        details = str(exc.details() if hasattr(exc, "details") else exc)
        if hasattr(exc, "code") and exc.code() in (
            grpc.StatusCode.PERMISSION_DENIED,
            grpc.StatusCode.UNAUTHENTICATED,
        ):
            raise PermissionDeniedError(details) from None
        if hasattr(exc, "code") and exc.code() == grpc.StatusCode.INVALID_ARGUMENT:
            raise InvalidArgumentError(details) from None
        raise NodeUnavailableError(f"{METHOD} call failed: {details}") from exc
