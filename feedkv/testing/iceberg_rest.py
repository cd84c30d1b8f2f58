"""A real, minimal Iceberg REST catalog, served over HTTP on loopback for tests.

:class:`IcebergRestServer` speaks the part of the Iceberg REST catalog API (the
OpenAPI spec of ``/v1``) that pyiceberg's ``RestCatalog`` and other clients use for
namespaces and tables. Every table and namespace lives in a pyiceberg SQL catalog on a
SQLite file (its files under ``warehouse``), so the metadata files it writes are the
same ones a real catalog's tables have, and DuckDB or pyiceberg can read them back.

- ``GET /v1/config``: the endpoints below (a client calls no other); no defaults or
  overrides, but for a server given a ``location`` (the tables' files in an object
  store, e.g. ``s3://bucket/warehouse``): ``warehouse`` and the storage ``properties``
  as overrides, as a catalog hands out its warehouse and storage credentials.
- ``POST /v1/oauth/tokens``: the OAuth2 client-credentials grant, when the server was
  given a ``credential`` (``client_id:client_secret``): a bearer token for it.
- namespaces: ``GET /v1/namespaces`` (``?parent=``), ``POST /v1/namespaces``
  (409 when it exists), ``GET|HEAD|DELETE /v1/namespaces/{ns}`` (404 when it does not;
  409 when it still has tables), ``POST /v1/namespaces/{ns}/properties``
  (``removals``, ``updates``; ``updated``, ``removed``, ``missing``).
- tables: ``GET|POST /v1/namespaces/{ns}/tables`` (list; create, 409 when it
  exists), ``GET|HEAD|DELETE /v1/namespaces/{ns}/tables/{table}``, and ``POST`` to it:
  a commit (``requirements`` and ``updates``). A commit whose requirements the table's
  current metadata does not meet (another writer committed first) is refused with
  409 ``CommitFailedException`` and changes nothing; requests are served one at a time,
  so a requirement checked is a requirement held until the commit lands.

A multi-level namespace is joined by ``%1F`` in paths, as the spec says. Errors are
``{"error": {"message", "type", "code"}}`` with the matching HTTP status. When the server
has a ``credential`` or a ``token``, every request but the token request needs
``Authorization: Bearer <token>`` (401 otherwise).

For outage tests, :meth:`IcebergRestServer.fail_next` answers the next requests with
HTTP 503; :attr:`IcebergRestServer.requests` lists every request received.
"""

from __future__ import annotations

import json
import os
import secrets
import threading
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, cast
from urllib.parse import parse_qs, unquote, urlsplit

from feedkv.errors import FeedKVError
from feedkv.testing.served_http import MethodHandler, ServedHTTP, StateServer

__all__ = ["IcebergRestServer", "RestRequest"]

_SEPARATOR = "\x1f"  # between a namespace's levels in a path (the spec's default)
_ENDPOINTS = (
    "GET /v1/{prefix}/namespaces",
    "POST /v1/{prefix}/namespaces",
    "GET /v1/{prefix}/namespaces/{namespace}",
    "HEAD /v1/{prefix}/namespaces/{namespace}",
    "DELETE /v1/{prefix}/namespaces/{namespace}",
    "POST /v1/{prefix}/namespaces/{namespace}/properties",
    "GET /v1/{prefix}/namespaces/{namespace}/tables",
    "POST /v1/{prefix}/namespaces/{namespace}/tables",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}",
)


@dataclass(frozen=True, slots=True)
class RestRequest:
    """One request the server received: ``path`` percent-decoded, without its query;
    ``status`` is the HTTP status it was answered with."""

    method: str
    path: str
    status: int
    authorization: str | None


class _Error(FeedKVError):
    """An error answer: its HTTP status and the spec's error type."""

    def __init__(self, status: HTTPStatus, kind: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.message = message


class _State:
    """The catalog behind the server, and what tests look at. Requests are served one at a
    time (``lock``)."""

    def __init__(
        self,
        warehouse: str,
        credential: str | None,
        token: str | None,
        location: str | None = None,
        properties: dict[str, str] | None = None,
    ) -> None:
        from pyiceberg.catalog.sql import SqlCatalog

        os.makedirs(warehouse, exist_ok=True)
        self.overrides = {"warehouse": location, **(properties or {})} if location else {}
        self.catalog = SqlCatalog(
            "rest",
            uri=f"sqlite:///{os.path.join(warehouse, 'rest-catalog.db')}",
            warehouse=location or f"file://{warehouse}",
            **(properties or {}),
        )
        self.lock = threading.Lock()
        self.credential = credential
        self.tokens = {token} if token else set()
        self.failures = 0
        self.requests: list[RestRequest] = []

    def close(self) -> None:
        self.catalog.engine.dispose()


def _namespace(text: str) -> tuple[str, ...]:
    return tuple(unquote(text).split(_SEPARATOR))


def _error(exc: Exception) -> _Error:
    """A pyiceberg exception of the catalog behind the server as the spec's answer."""
    from pyiceberg import exceptions as ice

    kind = type(exc).__name__
    statuses: list[tuple[type[Exception], HTTPStatus]] = [
        (ice.NoSuchNamespaceError, HTTPStatus.NOT_FOUND),
        (ice.NoSuchTableError, HTTPStatus.NOT_FOUND),
        (ice.NamespaceAlreadyExistsError, HTTPStatus.CONFLICT),
        (ice.TableAlreadyExistsError, HTTPStatus.CONFLICT),
        (ice.NamespaceNotEmptyError, HTTPStatus.CONFLICT),
        (ice.CommitFailedException, HTTPStatus.CONFLICT),
        (ValueError, HTTPStatus.BAD_REQUEST),
    ]
    for exc_type, status in statuses:
        if isinstance(exc, exc_type):
            return _Error(status, kind, str(exc))
    return _Error(HTTPStatus.INTERNAL_SERVER_ERROR, kind, f"{kind}: {exc}")


def _table_result(table: Any) -> str:
    """A LoadTableResult (the spec's answer to a create, a load and a commit)."""
    from pyiceberg.catalog.rest import TableResponse

    response = TableResponse.model_validate(
        {"metadata-location": table.metadata_location, "metadata": table.metadata}
    )
    return str(response.model_dump_json())


def _json_body(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        raise _Error(
            HTTPStatus.BAD_REQUEST, "BadRequestException", "the body is not JSON"
        ) from None


def _route(state: _State, method: str, parts: list[str], query: dict[str, str], raw: bytes) -> Any:
    """The answer (JSON text, a JSON value, or ``None`` for 204) to one request under
    ``/v1``; raises :class:`_Error`."""
    catalog = state.catalog
    match method, parts:
        case "GET", ["config"]:
            return {"defaults": {}, "overrides": state.overrides, "endpoints": list(_ENDPOINTS)}
        case "GET", ["namespaces"]:
            parent = _namespace(query["parent"]) if query.get("parent") else ()
            return {"namespaces": [list(ns) for ns in catalog.list_namespaces(parent)]}
        case "POST", ["namespaces"]:
            body = _json_body(raw)
            if not isinstance(body, dict) or not isinstance(body.get("namespace"), list):
                raise _Error(HTTPStatus.BAD_REQUEST, "BadRequestException", "no namespace given")
            namespace = tuple(body["namespace"])
            properties = body.get("properties") or {}
            catalog.create_namespace(namespace, properties)
            return {"namespace": list(namespace), "properties": properties}
        case "GET", ["namespaces", ns]:
            properties = catalog.load_namespace_properties(_namespace(ns))
            return {"namespace": list(_namespace(ns)), "properties": properties}
        case "HEAD", ["namespaces", ns]:
            catalog.load_namespace_properties(_namespace(ns))
            return None
        case "DELETE", ["namespaces", ns]:
            catalog.drop_namespace(_namespace(ns))
            return None
        case "POST", ["namespaces", ns, "properties"]:
            body = _json_body(raw) or {}
            summary = catalog.update_namespace_properties(
                _namespace(ns), set(body.get("removals") or ()), body.get("updates") or {}
            )
            return {
                "removed": summary.removed,
                "updated": summary.updated,
                "missing": summary.missing,
            }
        case "GET", ["namespaces", ns, "tables"]:
            names = catalog.list_tables(_namespace(ns))
            return {"identifiers": [{"namespace": list(n[:-1]), "name": n[-1]} for n in names]}
        case "POST", ["namespaces", ns, "tables"]:
            return _create(state, _namespace(ns), raw)
        case "GET", ["namespaces", ns, "tables", table]:
            return _table_result(catalog.load_table((*_namespace(ns), unquote(table))))
        case "HEAD", ["namespaces", ns, "tables", table]:
            catalog.load_table((*_namespace(ns), unquote(table)))
            return None
        case "POST", ["namespaces", ns, "tables", table]:
            return _commit(state, (*_namespace(ns), unquote(table)), raw)
        case "DELETE", ["namespaces", ns, "tables", table]:
            catalog.drop_table((*_namespace(ns), unquote(table)))
            return None
    raise _Error(
        HTTPStatus.NOT_FOUND,
        "NoSuchEndpointException",
        f"no endpoint {method} /v1/{'/'.join(parts)}",
    )


def _create(state: _State, namespace: tuple[str, ...], raw: bytes) -> str:
    from pyiceberg.catalog.rest import CreateTableRequest
    from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
    from pyiceberg.table.sorting import UNSORTED_SORT_ORDER

    body = _json_body(raw)
    if not isinstance(body, dict):
        raise _Error(HTTPStatus.BAD_REQUEST, "BadRequestException", "no table given")
    for optional in ("location", "partition-spec", "write-order"):  # NB: pyiceberg omits None
        body.setdefault(optional, None)
    try:
        request = CreateTableRequest.model_validate(body)
    except ValueError as exc:
        raise _Error(HTTPStatus.BAD_REQUEST, "BadRequestException", str(exc)) from None
    if request.stage_create:
        raise _Error(
            HTTPStatus.NOT_IMPLEMENTED, "NotImplementedException", "staged creates are not served"
        )
    table = state.catalog.create_table(
        (*namespace, request.name),
        request.table_schema,
        location=request.location,
        partition_spec=request.partition_spec or UNPARTITIONED_PARTITION_SPEC,
        sort_order=request.write_order or UNSORTED_SORT_ORDER,
        properties=request.properties,
    )
    return _table_result(table)


def _commit(state: _State, identifier: tuple[str, ...], raw: bytes) -> str:
    """Apply a CommitTableRequest: its requirements are checked against the table's
    current metadata (409 when one fails), then its updates make the next metadata."""
    from pyiceberg.table import CommitTableRequest

    try:
        request = CommitTableRequest.model_validate_json(raw)
    except ValueError as exc:
        raise _Error(HTTPStatus.BAD_REQUEST, "BadRequestException", str(exc)) from None
    table = state.catalog.load_table(identifier)
    response = state.catalog.commit_table(table, request.requirements, request.updates)
    return str(response.model_dump_json())


def _token(state: _State, raw: bytes) -> dict[str, Any]:
    """The OAuth2 client-credentials grant: a bearer token for the server's credential."""
    form = {k: v[-1] for k, v in parse_qs(raw.decode(errors="replace")).items()}
    given = f"{form.get('client_id', '')}:{form.get('client_secret', '')}"
    if state.credential is None or form.get("grant_type") != "client_credentials":
        raise _Error(HTTPStatus.BAD_REQUEST, "invalid_request", "no client-credentials grant")
    if not secrets.compare_digest(given, state.credential):
        raise _Error(HTTPStatus.UNAUTHORIZED, "invalid_client", "unknown client credentials")
    token = secrets.token_hex(16)
    state.tokens.add(token)
    return {
        "access_token": token,
        "token_type": "bearer",
        "expires_in": 3600,
        "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
    }


class _Handler(MethodHandler):
    protocol_version = "HTTP/1.1"
    server_version = "feedkv-iceberg-rest/1"

    def _handle(self, method: str) -> None:
        state = cast(StateServer, self.server).state
        split = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        authorization = self.headers.get("Authorization")
        parts = [p for p in split.path.split("/") if p]
        status: int = HTTPStatus.OK
        with state.lock:
            try:
                if state.failures > 0:
                    state.failures -= 1
                    raise _Error(
                        HTTPStatus.SERVICE_UNAVAILABLE,
                        "ServiceUnavailableException",
                        "the catalog is unavailable (injected by fail_next)",
                    )
                if parts[:1] != ["v1"]:
                    raise _Error(HTTPStatus.NOT_FOUND, "NoSuchEndpointException", split.path)
                if method == "POST" and parts[1:] == ["oauth", "tokens"]:
                    answer: Any = _token(state, raw)
                else:
                    self._authorize(state, authorization)
                    answer = _route(state, method, parts[1:], query, raw)
                    if answer is None:
                        status = HTTPStatus.NO_CONTENT
            except _Error as exc:
                status, answer = exc.status, _error_body(exc)
            except Exception as exc:  # the catalog's own errors, as the spec's answers
                error = _error(exc)
                status, answer = error.status, _error_body(error)
            state.requests.append(
                RestRequest(method, unquote(split.path), int(status), authorization)
            )
        data = (
            b""
            if answer is None
            else (answer if isinstance(answer, str) else json.dumps(answer)).encode()
        )
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(0 if method == "HEAD" else len(data)))
        self.end_headers()
        if method != "HEAD" and status != HTTPStatus.NO_CONTENT:
            self.wfile.write(data)

    @staticmethod
    def _authorize(state: _State, authorization: str | None) -> None:
        if state.credential is None and not state.tokens:
            return
        token = (authorization or "").removeprefix("Bearer ").strip()
        if not token or token not in state.tokens:
            raise _Error(
                HTTPStatus.UNAUTHORIZED, "NotAuthorizedException", "a valid bearer token is needed"
            )


def _error_body(error: _Error) -> dict[str, Any]:
    if error.kind in ("invalid_request", "invalid_client"):  # OAuth2's own error shape
        return {"error": error.kind, "error_description": error.message}
    return {"error": {"message": error.message, "type": error.kind, "code": int(error.status)}}


class IcebergRestServer(ServedHTTP):
    """An Iceberg REST catalog on ``127.0.0.1`` (a free port), serving from a daemon
    thread, its tables' files under ``warehouse`` (a local directory, which also holds
    its SQLite file), or under ``location`` when given (an object store URL such as
    ``s3://bucket/wh``, reached with the pyiceberg storage ``properties``, e.g.
    ``s3.endpoint``: both handed to clients in ``/v1/config``'s overrides).

    ``credential`` (``client_id:client_secret``) makes it issue bearer tokens through
    ``/v1/oauth/tokens`` and require one; ``token`` is a bearer token it accepts as
    well. Use it as a context manager, or call :meth:`start` and :meth:`close`. State
    survives a restart of the server over the same ``warehouse``."""

    def __init__(
        self,
        warehouse: str,
        *,
        credential: str | None = None,
        token: str | None = None,
        location: str | None = None,
        properties: dict[str, str] | None = None,
    ) -> None:
        super().__init__()
        self.warehouse = warehouse
        self._credential = credential
        self._token = token
        self._location = location
        self._properties = properties
        self._state: _State | None = None

    name = "the Iceberg REST catalog"

    def _serve(self) -> StateServer:
        self._state = _State(
            self.warehouse, self._credential, self._token, self._location, self._properties
        )
        return StateServer(("127.0.0.1", 0), _Handler, self._state)

    def _stopped(self) -> None:
        if self._state is not None:
            self._state.close()

    # Test knobs and assertions.

    def _live(self) -> _State:
        if self._state is None:
            raise RuntimeError("the Iceberg REST catalog is not started: call start()")
        return self._state

    def fail_next(self, n: int = 1) -> None:
        """Answer the next ``n`` requests with HTTP 503, changing nothing."""
        state = self._live()
        with state.lock:
            state.failures += n

    @property
    def requests(self) -> list[RestRequest]:
        state = self._live()
        with state.lock:
            return list(state.requests)
