"""The node's side of ``HoldHistory`` (:mod:`feedkv.changefeed.hold_calls`): it places,
renews or releases a stream's hold on its table's history for a caller who holds
``CHANGEFEED`` on the table, or is root, a node or an admin (on an insecure node,
anyone). The hold's lapse time is the node's now plus what the caller asks, so a
caller's clock cannot place it in the far future; a hold of one table cannot be moved
to another."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import grpc

from feedkv.changefeed.hold_calls import HoldRequest
from feedkv.changefeed.jobs import HistoryHold, release_hold
from feedkv.errors import FeedKVError, InvalidArgumentError, PermissionDeniedError
from feedkv.kv.access import ADMIN_USERS
from feedkv.kv.txn import Txn
from feedkv.rangefeed.feed_client import KV
from feedkv.security.tls import peer_user
from feedkv.sql import catalog

__all__ = ["Grants", "apply_hold", "hold_history_handler"]

CHANGEFEED = "CHANGEFEED"


class Grants(Protocol):
    def require(self, user: str, table_id: int, privilege: str) -> None:
        """:class:`PermissionDeniedError` unless ``user`` holds ``privilege``."""
        ...


def apply_hold(db: KV, request: HoldRequest) -> None:
    """Place, renew or release the hold, in one transaction."""

    def change(txn: Txn) -> None:
        raw = txn.get(catalog.hold_key(request.hold_id))
        if raw is not None and HistoryHold.from_json(raw).table_id != request.table_id:
            raise PermissionDeniedError(
                f"hold {request.hold_id} holds another table than {request.table_id}"
            )
        if request.since is None:
            release_hold(txn, request.hold_id)
        else:
            now = db.now()
            hold = HistoryHold.renewed(
                request.hold_id, request.table_id, request.since, now, request.after_ns
            )
            hold.put(txn)

    db.run_transaction(change)


def hold_history_handler(
    db: Callable[[], KV], grants: Callable[[], Grants]
) -> grpc.RpcMethodHandler:
    """The method's handler: ``db()`` writes the holds, ``grants()`` checks callers."""

    def serve(data: bytes, context: Any) -> bytes:
        try:
            request = HoldRequest.parse(data)
            user = peer_user(context)
            if user is not None and user not in ADMIN_USERS:
                grants().require(user, request.table_id, CHANGEFEED)
            apply_hold(db(), request)
        except PermissionDeniedError as exc:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, str(exc))
        except InvalidArgumentError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except FeedKVError as exc:
            context.abort(grpc.StatusCode.UNAVAILABLE, f"{type(exc).__name__}: {exc}")
        return b""

    return grpc.unary_unary_rpc_method_handler(serve)
