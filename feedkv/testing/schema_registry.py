"""A real, minimal Confluent-compatible schema registry, served over HTTP for tests.

:class:`SchemaRegistryServer` speaks the subset of the Confluent Schema Registry REST API
that serializers and deserializers use (confluent-kafka's ``SchemaRegistryClient``,
feedkv's own :class:`~feedkv.changefeed.avro.SchemaRegistry`):

- ``POST /subjects/{subject}/versions``: register a schema; ``{"id": n}``.
- ``POST /subjects/{subject}``: look a schema up under a subject.
- ``GET /schemas/ids/{id}``: ``{"schema": "..."}`` (``schemaType`` only when not AVRO,
  as the real registry does); ``GET /schemas/types``.
- ``GET /subjects``, ``GET /subjects/{subject}/versions``,
  ``GET /subjects/{subject}/versions/{version|latest}``.
- ``GET|PUT /config`` and ``GET|PUT|DELETE /config/{subject}``: the compatibility level,
  global (``BACKWARD`` at first) or of one subject (``GET`` of a subject without one is a
  404, 40408, unless ``?defaultToGlobal=true``); ``PUT`` takes ``{"compatibility": L}``.
- ``POST /compatibility/subjects/{subject}/versions/{version|latest}``:
  ``{"is_compatible": bool}`` (with ``"messages"`` when not, and ``?verbose=true``).
- ``GET /associations/resources/{namespace}/{name}``: always empty, so clients name
  subjects after topics (``<topic>-key``, ``<topic>-value``).

As in the real registry, schema ids are global and count up from 1; a schema already
known (the same type and the same JSON, whatever its spacing or key order) keeps its id
under every subject, and registering it again under a subject that has it adds no
version. Errors are JSON bodies ``{"error_code": 40401, "message": "..."}`` with the
matching HTTP status.

Compatibility is enforced as the real registry does: a schema new to a subject is checked
against the subject's earlier Avro schemas at the subject's level (else the global one,
:mod:`feedkv.testing.avro_compatibility`), and one that breaks it is refused with HTTP 409
(error code 409) naming what breaks. A schema the subject already has is returned as it
is, unchecked.

For outage tests, :meth:`SchemaRegistryServer.fail_next` answers the next requests
with HTTP 500; :attr:`SchemaRegistryServer.requests` lists every request received.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, cast
from urllib.parse import parse_qs, unquote, urlsplit

from feedkv.errors import FeedKVError
from feedkv.testing.avro_compatibility import LEVELS, compatibility_problems
from feedkv.testing.served_http import MethodHandler, ServedHTTP, StateServer

__all__ = ["RegisteredSchema", "RegistryRequest", "SchemaRegistryServer"]

_JSON = "application/vnd.schemaregistry.v1+json"

# Confluent's error codes.
SUBJECT_NOT_FOUND = 40401
VERSION_NOT_FOUND = 40402
SCHEMA_NOT_FOUND = 40403
SUBJECT_COMPATIBILITY_NOT_CONFIGURED = 40408
INCOMPATIBLE_SCHEMA = 409
INVALID_SCHEMA = 42201
INVALID_VERSION = 42202
INVALID_COMPATIBILITY_LEVEL = 42203
INTERNAL_ERROR = 50001


@dataclass(frozen=True, slots=True)
class RegistryRequest:
    """One request the server received. ``path`` is percent-decoded and has no query;
    ``body`` is the parsed JSON body (``None`` when there was none or it was not JSON);
    ``status`` is the HTTP status it was answered with."""

    method: str
    path: str
    query: dict[str, str]
    body: Any
    status: int


@dataclass(frozen=True, slots=True)
class RegisteredSchema:
    """A schema under a subject: its global ``id`` and its ``version`` in the subject
    (from 1)."""

    subject: str
    version: int
    id: int
    schema: str
    schema_type: str = "AVRO"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "subject": self.subject,
            "version": self.version,
            "id": self.id,
            "schema": self.schema,
        }
        if self.schema_type != "AVRO":
            out["schemaType"] = self.schema_type
        return out


class _Error(FeedKVError):
    """An error answer of the registry (its HTTP status and Confluent error code)."""

    def __init__(self, status: HTTPStatus, code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def _canonical(schema_type: str, text: str) -> str:
    """What makes two schema texts the same schema: for AVRO and JSON, equal JSON."""
    if schema_type == "PROTOBUF":
        return text.strip()
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _Error(
            HTTPStatus.UNPROCESSABLE_ENTITY,
            INVALID_SCHEMA,
            f"Invalid schema: {exc.msg} at position {exc.pos}",
        ) from None
    return json.dumps(parsed, sort_keys=True, separators=(",", ":"))


class _State:
    """The registry's schemas and subjects. Thread-safe: every call takes the lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.schemas: list[tuple[str, str]] = []  # id - 1 -> (schema type, text as given)
        self.ids: dict[tuple[str, str], int] = {}  # (type, canonical text) -> id
        self.subjects: dict[str, list[RegisteredSchema]] = {}
        self.failures = 0
        self.requests: list[RegistryRequest] = []
        self.level = "BACKWARD"  # the global compatibility level
        self.levels: dict[str, str] = {}  # a subject's own level

    def level_of(self, subject: str) -> str:
        with self.lock:
            return self.levels.get(subject, self.level)

    def register(self, subject: str, text: str, schema_type: str) -> RegisteredSchema:
        canonical = _canonical(schema_type, text)
        with self.lock:
            schema_id = self.ids.get((schema_type, canonical))
            versions = self.subjects.get(subject, [])
            for registered in versions:
                if schema_id is not None and registered.id == schema_id:
                    return registered
            if schema_type == "AVRO":
                self._check(subject, text, versions)
            if schema_id is None:
                self.schemas.append((schema_type, text))
                schema_id = self.ids[(schema_type, canonical)] = len(self.schemas)
            registered = RegisteredSchema(
                subject, len(versions) + 1, schema_id, self.schemas[schema_id - 1][1], schema_type
            )
            self.subjects[subject] = [*versions, registered]
            return registered

    def _check(self, subject: str, text: str, versions: list[RegisteredSchema]) -> None:
        """Raise 409 if Avro schema ``text`` breaks ``subject``'s compatibility level."""
        level = self.levels.get(subject, self.level)
        earlier = [json.loads(r.schema) for r in versions if r.schema_type == "AVRO"]
        problems = compatibility_problems(level, json.loads(text), earlier)
        if problems:
            raise _Error(
                HTTPStatus.CONFLICT,
                INCOMPATIBLE_SCHEMA,
                f"Schema being registered is incompatible with an earlier schema for subject "
                f'"{subject}" (compatibility {level}), details: {"; ".join(problems)}',
            )

    def compatible(self, subject: str, version: str, text: str, schema_type: str) -> list[str]:
        """Why ``text`` would be refused against ``version`` of ``subject`` (``latest``:
        at the subject's level against what that level compares with)."""
        _canonical(schema_type, text)
        if schema_type != "AVRO":
            return []
        with self.lock:
            level = self.levels.get(subject, self.level)
            if version in ("latest", "-1"):
                earlier = [json.loads(r.schema) for r in self.subjects.get(subject, [])]
            else:
                earlier = [json.loads(self.version_locked(subject, version).schema)]
        return compatibility_problems(level, json.loads(text), earlier)

    def set_level(self, subject: str | None, body: Any) -> str:
        level = body.get("compatibility") if isinstance(body, dict) else None
        if not isinstance(level, str) or level.upper() not in LEVELS:
            raise _Error(
                HTTPStatus.UNPROCESSABLE_ENTITY,
                INVALID_COMPATIBILITY_LEVEL,
                f"Invalid compatibility level {level!r}: one of {', '.join(LEVELS)}",
            )
        with self.lock:
            if subject is None:
                self.level = level.upper()
            else:
                self.levels[subject] = level.upper()
        return level.upper()

    def get_level(self, subject: str | None, default_to_global: bool) -> str:
        with self.lock:
            if subject is None:
                return self.level
            found = self.levels.get(subject)
            if found is None and not default_to_global:
                raise _Error(
                    HTTPStatus.NOT_FOUND,
                    SUBJECT_COMPATIBILITY_NOT_CONFIGURED,
                    f"Subject '{subject}' does not have subject-level compatibility configured",
                )
            return found or self.level

    def delete_level(self, subject: str) -> str:
        with self.lock:
            found = self.levels.pop(subject, None)
        if found is None:
            raise _Error(
                HTTPStatus.NOT_FOUND,
                SUBJECT_COMPATIBILITY_NOT_CONFIGURED,
                f"Subject '{subject}' does not have subject-level compatibility configured",
            )
        return found

    def lookup(self, subject: str, text: str, schema_type: str) -> RegisteredSchema:
        canonical = _canonical(schema_type, text)
        with self.lock:
            versions = self._versions(subject)
            schema_id = self.ids.get((schema_type, canonical))
            for registered in versions:
                if registered.id == schema_id:
                    return registered
        raise _Error(HTTPStatus.NOT_FOUND, SCHEMA_NOT_FOUND, "Schema not found")

    def schema(self, schema_id: int) -> tuple[str, str]:
        with self.lock:
            if 1 <= schema_id <= len(self.schemas):
                return self.schemas[schema_id - 1]
        raise _Error(HTTPStatus.NOT_FOUND, SCHEMA_NOT_FOUND, f"Schema {schema_id} not found")

    def version(self, subject: str, version: str) -> RegisteredSchema:
        """Version ``version`` of ``subject``: a number from 1, ``latest`` or ``-1``."""
        with self.lock:
            return self.version_locked(subject, version)

    def version_locked(self, subject: str, version: str) -> RegisteredSchema:
        versions = self._versions(subject)
        number = len(versions) if version in ("latest", "-1") else _version_number(version)
        if number > len(versions):
            raise _Error(HTTPStatus.NOT_FOUND, VERSION_NOT_FOUND, f"Version {version} not found.")
        return versions[number - 1]

    def versions(self, subject: str) -> list[int]:
        with self.lock:
            return [r.version for r in self._versions(subject)]

    def _versions(self, subject: str) -> list[RegisteredSchema]:
        versions = self.subjects.get(subject)
        if not versions:
            raise _Error(HTTPStatus.NOT_FOUND, SUBJECT_NOT_FOUND, f"Subject '{subject}' not found.")
        return versions


def _version_number(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        number = 0
    if not 1 <= number < 2**31:
        raise _Error(
            HTTPStatus.UNPROCESSABLE_ENTITY,
            INVALID_VERSION,
            f"The specified version '{text}' is not a valid version id. Allowed values are "
            'between [1, 2^31-1] and the string "latest"',
        )
    return number


class _Handler(MethodHandler):
    # NB: HTTP/1.0, one request per connection: a closed server then refuses every
    # client at once, instead of kept-alive connections being served on.
    protocol_version = "HTTP/1.0"
    server_version = "feedkv-schema-registry/1"

    def _handle(self, method: str) -> None:
        state = cast(StateServer, self.server).state
        split = urlsplit(self.path)
        path = unquote(split.path)
        query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
        with state.lock:
            failing = state.failures > 0
            if failing:
                state.failures -= 1
        status: int
        payload: Any
        if failing:
            status, payload = (
                HTTPStatus.INTERNAL_SERVER_ERROR,
                {
                    "error_code": INTERNAL_ERROR,
                    "message": "Error in the backend data store (injected by fail_next)",
                },
            )
        else:
            try:
                status, payload = HTTPStatus.OK, _route(state, method, path, query, body, raw)
            except _Error as exc:
                status, payload = exc.status, {"error_code": exc.code, "message": exc.message}
        with state.lock:
            state.requests.append(RegistryRequest(method, path, query, body, int(status)))
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", _JSON)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _schema_of(body: Any, raw: bytes) -> tuple[str, str]:
    """The schema text and type of a register or lookup request."""
    if not isinstance(body, dict):
        what = "not JSON" if raw else "empty"
        raise _Error(
            HTTPStatus.UNPROCESSABLE_ENTITY, INVALID_SCHEMA, f"Invalid schema: the body is {what}"
        )
    text = body.get("schema")
    if not isinstance(text, str):
        raise _Error(
            HTTPStatus.UNPROCESSABLE_ENTITY,
            INVALID_SCHEMA,
            'Invalid schema: the body needs "schema", the schema as a string of JSON',
        )
    if body.get("references"):
        raise _Error(
            HTTPStatus.UNPROCESSABLE_ENTITY,
            INVALID_SCHEMA,
            "Invalid schema: references are not supported by this test registry",
        )
    schema_type = body.get("schemaType") or "AVRO"
    if schema_type not in ("AVRO", "JSON", "PROTOBUF"):
        raise _Error(
            HTTPStatus.UNPROCESSABLE_ENTITY, INVALID_SCHEMA, f"Invalid schema type {schema_type}"
        )
    return text, str(schema_type)


def _schema_id(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise _Error(HTTPStatus.NOT_FOUND, SCHEMA_NOT_FOUND, f"Schema {text} not found") from None


def _route(
    state: _State, method: str, path: str, query: dict[str, str], body: Any, raw: bytes
) -> Any:
    parts = [p for p in path.split("/") if p]
    match method, parts:
        case "POST", ["subjects", subject, "versions"]:
            return {"id": state.register(subject, *_schema_of(body, raw)).id}
        case "POST", ["subjects", subject]:
            return state.lookup(subject, *_schema_of(body, raw)).to_json()
        case "GET", ["schemas", "types"]:
            return ["AVRO", "JSON", "PROTOBUF"]
        case "GET", ["schemas", "ids", schema_id]:
            schema_type, text = state.schema(_schema_id(schema_id))
            found: dict[str, Any] = {"schema": text}
            if schema_type != "AVRO":
                found["schemaType"] = schema_type
            return found
        case "GET", ["subjects"]:
            with state.lock:
                return sorted(state.subjects)
        case "GET", ["subjects", subject, "versions"]:
            return state.versions(subject)
        case "GET", ["subjects", subject, "versions", version]:
            return state.version(subject, version).to_json()
        case "GET", ["subjects", subject, "versions", version, "schema"]:
            return json.loads(state.version(subject, version).schema)
        case "GET", ["config"]:
            return {"compatibilityLevel": state.get_level(None, True)}
        case "PUT", ["config"]:
            return {"compatibility": state.set_level(None, body)}
        case "GET", ["config", subject]:
            default = query.get("defaultToGlobal", "").lower() == "true"
            return {"compatibilityLevel": state.get_level(subject, default)}
        case "PUT", ["config", subject]:
            return {"compatibility": state.set_level(subject, body)}
        case "DELETE", ["config", subject]:
            return {"compatibilityLevel": state.delete_level(subject)}
        case "POST", ["compatibility", "subjects", subject, "versions", version]:
            problems = state.compatible(subject, version, *_schema_of(body, raw))
            answer: dict[str, Any] = {"is_compatible": not problems}
            if problems and query.get("verbose", "").lower() == "true":
                answer["messages"] = problems
            return answer
        case "GET", ["associations", "resources", _namespace, _resource]:
            return []  # no subject is associated with a topic: clients fall back to names
    if method not in ("GET", "POST", "PUT", "DELETE"):
        raise _Error(HTTPStatus.METHOD_NOT_ALLOWED, 405, "HTTP 405 Method Not Allowed")
    raise _Error(HTTPStatus.NOT_FOUND, 404, "HTTP 404 Not Found")


class SchemaRegistryServer(ServedHTTP):
    """A schema registry on ``127.0.0.1`` (a free port), serving from a daemon thread.

    Use it as a context manager, or call :meth:`start` and :meth:`close`. The state is
    in memory and starts empty. Every method is thread-safe.
    """

    def __init__(self) -> None:
        super().__init__()
        self._state = _State()

    name = "the schema registry server"

    def _serve(self) -> StateServer:
        return StateServer(("127.0.0.1", 0), _Handler, self._state)

    # Test knobs and assertions.

    def fail_next(self, n: int = 1) -> None:
        """Answer the next ``n`` requests (whatever they are) with HTTP 500, error code
        50001, as a registry whose backend is down does. Replaces any failures still
        pending."""
        if n < 0:
            raise ValueError(f"fail_next needs a count of requests >= 0, not {n}")
        with self._state.lock:
            self._state.failures = n

    @property
    def requests(self) -> list[RegistryRequest]:
        """Every request received so far, in order (a copy)."""
        with self._state.lock:
            return list(self._state.requests)

    def subjects(self) -> dict[str, list[RegisteredSchema]]:
        """Every subject and its versions, oldest first (a copy)."""
        with self._state.lock:
            return {s: list(v) for s, v in self._state.subjects.items()}

    def schema(self, schema_id: int) -> str:
        """The text of schema ``schema_id``; ``KeyError`` if there is none."""
        try:
            return self._state.schema(schema_id)[1]
        except _Error:
            raise KeyError(schema_id) from None
