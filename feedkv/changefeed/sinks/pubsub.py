"""``gcpubsub://<project>``: changefeed messages published to Google Cloud Pub/Sub topics,
as CockroachDB 26.1's sink publishes them (its ``sink_pubsub_v2.go``).

URI parameters, CockroachDB's: the host is the Google Cloud project; ``region`` picks the
regional endpoint ``https://<region>-pubsub.googleapis.com`` and is required unless the
changefeed is ``unordered`` (then the global ``https://pubsub.googleapis.com``);
``topic_name`` sends every table to one topic (else each goes to the topic named for its
changefeed topic); ``with_table_name_attribute=true`` adds the attribute ``TABLE_NAME``;
``AUTH=specified`` (the default) with ``CREDENTIALS``, a service account's JSON key
base64-encoded, or ``AUTH=implicit``, the machine's Application Default Credentials.
``ASSUME_ROLE=<service account>`` impersonates that account with those credentials (which
then need the ``cloud-platform`` scope, as CockroachDB asks for it), and
``ASSUME_ROLE=<a>,<b>,<target>`` goes through a chain of delegates, the last account
being the one impersonated (IAM Credentials' ``generateAccessToken``). As Google's
clients (and CockroachDB) do, ``PUBSUB_EMULATOR_HOST`` in the environment sends
everything, without credentials, to an emulator (the URI's credentials are still
checked, as CockroachDB checks them).

Messages, as CockroachDB writes them: each message's data is
``{"Key":<key>,"Value":<value>,"Topic":"<topic>"}``, the key and value as the JSON encoder
wrote them. NB: CockroachDB also publishes ``format=csv`` (the row's line as the data);
here CSV is a file format only, so it is refused when the changefeed is created. A
resolved timestamp is published to every topic as the encoder's resolved message
(``{"resolved":"<ts>"}``). No ordering key
is set (CockroachDB sets none either). A topic that does not exist is created before the
first publish to it; if creating it is refused and the publish finds no topic, the error
says to create topics in advance or grant the account ``roles/pubsub.editor``.

``pubsub_sink_config`` takes CockroachDB's JSON (``Flush``: ``Messages``, ``Bytes``,
``Frequency``; ``Retry``: ``Max``, ``Backoff``), with Pub/Sub's client defaults: 100
messages, 1 MB or 10 ms. Batches are delivered by the generic
:class:`~feedkv.changefeed.sink.BatchingSink` (at least once, in order); this module only
knows Pub/Sub's REST API (``topics.create``, ``topics.publish``), over httpx. Errors no
retry can change (401, 403, a topic that cannot be found or made) are
:class:`TerminalSinkError`; the rest retry.
"""

from __future__ import annotations

import base64
import json
import os
import re
import threading
from collections.abc import Callable, Iterable
from typing import Any

import httpx

from feedkv.changefeed.node_buffers import NodeBuffers
from feedkv.changefeed.options import ChangefeedOptions, option_error
from feedkv.changefeed.sink import (
    BatchingSink,
    FlushConfig,
    Message,
    SinkError,
    SinkURI,
    TerminalSinkError,
)
from feedkv.changefeed.sinks.google_credentials import (
    CLOUD_PLATFORM_SCOPE,
    impersonating,
    role_chain,
    service_account,
)
from feedkv.util.hlc import Timestamp
from feedkv.util.units import counted

__all__ = ["DEFAULT_FLUSH", "PubsubClient", "make", "sink_topics"]

DEFAULT_FLUSH = FlushConfig(messages=100, bytes=1_000_000, frequency=0.01)
SCOPE = "https://www.googleapis.com/auth/pubsub"
TIMEOUT = 30.0  # seconds for one request
EMULATOR_ENV = "PUBSUB_EMULATOR_HOST"
_PROJECT = re.compile(r"[a-z][a-z0-9-]{4,28}[a-z0-9]|[a-z0-9.-]+:[a-z][a-z0-9-]{4,28}[a-z0-9]")
_TOPIC = re.compile(r"[A-Za-z][A-Za-z0-9\-_.~+%]{2,254}")
_REGION = re.compile(r"[a-z]+(-[a-z]+)*\d*")
_TERMINAL_STATUS = frozenset({400, 401, 403, 404})
_ANSWER_SHOWN = 200


class PubsubClient:
    """Publishes batches to the topics of ``project`` at ``endpoint`` (the
    :class:`~feedkv.changefeed.sink.SinkClient` of the Pub/Sub sink). ``token`` gives a
    bearer token for each request (``None``: none, for an emulator); ``encode_resolved``
    makes a topic's resolved message. Each call blocks until Pub/Sub answers; nothing is
    retried here (the batcher retries). Safe to call from several threads."""

    def __init__(
        self,
        endpoint: str,
        project: str,
        *,
        topic_name: str | None = None,
        table_name_attribute: bool = False,
        token: Callable[[], str] | None = None,
        encode_resolved: Callable[[Timestamp, str], bytes],
    ) -> None:
        self._endpoint = endpoint.rstrip("/")
        self._project = project
        self._topic_name = topic_name
        self._table_name_attribute = table_name_attribute
        self._token = token
        self._encode_resolved = encode_resolved
        self._client = httpx.Client(timeout=TIMEOUT)
        self._lock = threading.Lock()
        self._made: set[str] = set()  # topics created (or found) here
        self._create_refused: dict[str, str] = {}  # topic -> why creating it was refused

    def send(self, topic: str, batch: list[Message]) -> None:
        name = self._topic_name or topic
        quoted = json.dumps(topic, ensure_ascii=False).encode()
        messages = []
        for message in batch:
            value = message.value if message.value is not None else b"null"
            data = b'{"Key":%s,"Value":%s,"Topic":%s}' % (message.key, value, quoted)
            entry: dict[str, Any] = {"data": base64.b64encode(data).decode()}
            if self._table_name_attribute:
                # NB: the changefeed topic, which is the table's name unless
                # full_table_name or split_column_families make it longer
                entry["attributes"] = {"TABLE_NAME": topic}
            messages.append(entry)
        self._publish(name, messages, f"a batch of {counted(len(batch), 'message')} of {topic}")

    def send_resolved(self, ts: Timestamp, topics: list[str]) -> None:
        names = {self._topic_name} if self._topic_name else set(topics)
        for name in sorted(names):
            data = base64.b64encode(self._encode_resolved(ts, name)).decode()
            self._publish(name, [{"data": data}], f"resolved timestamp {ts}")

    def close(self) -> None:
        self._client.close()

    def _publish(self, name: str, messages: list[dict[str, Any]], what: str) -> None:
        self._make_topic(name)
        path = f"/v1/projects/{self._project}/topics/{name}:publish"
        response = self._request("POST", path, {"messages": messages}, f"publishing {what}")
        if response.status_code == 404 and name in self._create_refused:
            raise TerminalSinkError(
                f"Pub/Sub topic {name!r} of project {self._project!r} not found, and creating "
                f"it was refused ({self._create_refused[name]}): create topics in advance or "
                "grant this service account the roles/pubsub.editor role on the project"
            )
        self._raise_for(response, f"publishing {what} to topic {name!r}")

    def _make_topic(self, name: str) -> None:
        with self._lock:
            if name in self._made:
                return
        path = f"/v1/projects/{self._project}/topics/{name}"
        response = self._request("PUT", path, {}, f"creating topic {name!r}")
        if response.status_code in (401, 403):
            # NB: maybe only creating is refused and the topic exists: the publish says
            self._create_refused[name] = _answer(response)
        elif response.status_code != 409:  # 409: it exists already
            self._raise_for(response, f"creating topic {name!r}")
        with self._lock:
            self._made.add(name)

    def _request(self, method: str, path: str, body: dict[str, Any], what: str) -> httpx.Response:
        headers = {"Content-Type": "application/json"}
        if self._token is not None:
            headers["Authorization"] = f"Bearer {self._token()}"
        try:
            return self._client.request(
                method, self._endpoint + path, content=json.dumps(body), headers=headers
            )
        except httpx.HTTPError as exc:
            reason = str(exc) or type(exc).__name__
            raise SinkError(f"Pub/Sub sink: {what} at {self._endpoint}: {reason}") from exc

    def _raise_for(self, response: httpx.Response, what: str) -> None:
        if response.is_success:
            return
        error = TerminalSinkError if response.status_code in _TERMINAL_STATUS else SinkError
        raise error(
            f"Pub/Sub sink: {what} in project {self._project!r}: {response.status_code} "
            f"{_answer(response)}"
        )


def _answer(response: httpx.Response) -> str:
    try:
        message = response.json()["error"]["message"]
        return str(message)[:_ANSWER_SHOWN]
    except (ValueError, KeyError, TypeError):
        return response.text[:_ANSWER_SHOWN].strip() or response.reason_phrase


# Configuration.


def sink_topics(uri: SinkURI, topics: Iterable[str]) -> list[str]:
    """The Pub/Sub topics of the changefeed topics ``topics``: ``topic_name`` for all,
    else each its own (:func:`feedkv.changefeed.sink.sink_topics`)."""
    name = uri.param("topic_name")
    return [name or topic for topic in topics]


def make(
    uri: SinkURI,
    options: ChangefeedOptions,
    *,
    buffers: NodeBuffers | None = None,
    endpoint: str | None = None,
    iam_endpoint: str | None = None,
    **_: Any,
) -> BatchingSink:
    """The Pub/Sub sink for a checked URI; raises SQLError 22023 for a bad parameter or
    option, before anything is sent. Test knobs: ``endpoint``, a Pub/Sub REST endpoint
    used instead of Google's, with the URI's credentials; ``iam_endpoint``, IAM
    Credentials' ``generateAccessToken`` URL for ``ASSUME_ROLE`` (with ``{}`` for the
    account)."""
    from feedkv.changefeed.encoder import make_encoder
    from feedkv.changefeed.sinks.webhook import parse_sink_config

    project = uri.host
    if not project:
        raise option_error(
            f"sink URI {uri.uri!r} needs a project: gcpubsub://<project>?region=<region>"
        )
    if not _PROJECT.fullmatch(project):
        raise option_error(
            f"sink URI {uri.uri!r}: {project!r} is not a Google Cloud project id (6 to 30 "
            "lowercase letters, digits or hyphens, starting with a letter)"
        )
    topic_name = uri.param("topic_name")
    if topic_name is not None and not _TOPIC.fullmatch(topic_name):
        raise option_error(
            f"sink parameter topic_name={topic_name!r} is not a Pub/Sub topic name (3 to 255 "
            "letters, digits or -_.~+%, starting with a letter)"
        )
    found, emulated = _endpoint(uri, options)
    if endpoint is not None:
        found, emulated = endpoint, False
    token = _token(uri, emulated=emulated, iam_endpoint=iam_endpoint)
    flush, retry = parse_sink_config(
        options.pubsub_sink_config, option="pubsub_sink_config", flush_default=DEFAULT_FLUSH
    )
    client = PubsubClient(
        found,
        project,
        topic_name=topic_name,
        table_name_attribute=uri.bool_param("with_table_name_attribute"),
        token=token,
        encode_resolved=make_encoder(options).encode_resolved,
    )
    return BatchingSink(client, flush=flush, retry=retry, buffers=buffers)


def _endpoint(uri: SinkURI, options: ChangefeedOptions) -> tuple[str, bool]:
    """The endpoint's URL, and whether it is an emulator's (``PUBSUB_EMULATOR_HOST``)."""
    region = uri.param("region")
    if region is not None and not _REGION.fullmatch(region):
        raise option_error(
            f"sink parameter region={region!r} is not a Google Cloud region such as 'us-east1'"
        )
    if not region and not options.unordered:
        raise option_error(
            "sink parameter region is needed by gcpubsub:// sinks (such as region=us-east1): "
            "use of gcpubsub without specifying a region requires the WITH unordered option"
        )
    emulator = os.environ.get(EMULATOR_ENV)
    if emulator:
        return f"http://{emulator}", True
    host = f"{region}-pubsub.googleapis.com" if region else "pubsub.googleapis.com"
    return f"https://{host}", False


def _token(
    uri: SinkURI, *, emulated: bool, iam_endpoint: str | None = None
) -> Callable[[], str] | None:
    """A function giving a valid bearer token for the URI's credentials (refreshed when
    it expires), or ``None`` for an emulator."""
    chain = role_chain(uri.param("ASSUME_ROLE"))
    scope = CLOUD_PLATFORM_SCOPE if chain else SCOPE
    auth = (uri.param("AUTH") or "specified").lower()
    if auth not in ("specified", "implicit", "default"):
        raise option_error(f"sink parameter AUTH={uri.param('AUTH')!r}: specified or implicit")
    given = uri.param("CREDENTIALS")
    if auth == "implicit" and given:
        raise option_error("sink parameter CREDENTIALS is not used with AUTH=implicit")
    credentials = None
    if given:
        credentials = service_account(given, [scope])
    elif auth != "implicit":
        raise option_error(
            "sink parameter CREDENTIALS is needed with AUTH=specified (the default): a "
            "service account's JSON key, base64-encoded; or give AUTH=implicit"
        )
    if emulated:
        return None
    return _refreshing(credentials, scope, chain, iam_endpoint)


def _refreshing(
    credentials: Any, scope: str, chain: list[str], iam_endpoint: str | None
) -> Callable[[], str]:
    """Bearer tokens of ``credentials`` (``None``: Application Default Credentials for
    ``scope``, found on first use), or of the last account of ``chain`` impersonated
    with them, refreshed by google-auth when they expire."""
    lock = threading.Lock()
    held: list[Any] = [credentials]
    if credentials is not None and chain:
        held[0] = impersonating(credentials, chain, [SCOPE], iam_endpoint)

    def token() -> str:
        import google.auth
        import google.auth.transport.requests
        from google.auth.exceptions import GoogleAuthError, TransportError

        with lock:
            try:
                if held[0] is None:
                    held[0], _ = google.auth.default(scopes=[scope])
                    if chain:
                        held[0] = impersonating(held[0], chain, [SCOPE], iam_endpoint)
                if not held[0].valid:
                    held[0].refresh(google.auth.transport.requests.Request())
            except TransportError as exc:
                raise SinkError(f"Pub/Sub sink: cannot refresh the Google token: {exc}") from exc
            except GoogleAuthError as exc:
                raise TerminalSinkError(f"Pub/Sub sink: no Google credentials: {exc}") from exc
            return str(held[0].token)

    return token
