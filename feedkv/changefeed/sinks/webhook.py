"""``webhook-https://host/path``: changefeed batches POSTed to an HTTP endpoint.

The URL posted to is the sink URI with ``webhook-`` taken off its scheme
(``webhook-http://`` is accepted too, for an endpoint on a trusted network). Each batch,
of one topic, is one ``POST`` with ``Content-Type: application/json`` and the body::

    {"payload":[<message value>,...],"length":<number of messages>}

Each message value is embedded as Go's ``json.Marshal`` embeds the ``json.RawMessage``
CockroachDB's sink holds: the encoder's JSON without whitespace between tokens and with
``<``, ``>`` and ``&`` as ``\\u003c``, ``\\u003e`` and ``\\u0026`` (:func:`go_compact`;
the changefeed-sinks docs' webhook output is compact), its digits untouched (so a
DECIMAL keeps every digit). The body is CockroachDB's byte for byte, nothing added. A
message without a value (a deletion under envelope ``bare`` or ``row``; every message
under ``key_only``) is sent as ``{"key":<key>}``. A resolved marker is a ``POST`` of
the encoder's marker, as CockroachDB's sink posts it: ``{"resolved":"<ts>"}``, or
``{"__crdb__":{"resolved":"<ts>"}}`` under ``bare`` (a CDC query's default). Under
``format=csv`` (an export: ``initial_scan='only'``) a batch is its rows as CSV, a line
each (after a line of column names with ``csv_header``), sent with ``Content-Type:
text/csv``, as CockroachDB's sink sends them. With
``compression`` (``gzip`` or ``zstd``, as CockroachDB takes it for webhooks since 25.2)
every body is compressed so and sent with that ``Content-Encoding``. ``webhook_auth_header`` is
sent as the ``Authorization`` header of every request. Under ``wrapped`` (and in
``bare``'s ``__crdb__``) a JSON value carries the row's key and its topic
(``key_in_value`` and ``topic_in_value`` are on for this sink, as in CockroachDB, whose
docs show ``"topic":"vehicles"`` in every webhook message:
:func:`~feedkv.changefeed.sink.message_options`), as one endpoint takes the messages
of every table; a CDC query's messages are its projection alone.

What a consumer may rely on:

- **At least once.** A batch answered with a 2xx status is delivered. Anything else (a
  non-2xx status, a refused or dropped connection, no answer within
  ``webhook_client_timeout``, 3 s by default as in CockroachDB) is a :class:`SinkError`:
  the batch is sent again after a backoff, and when the retries run out the changefeed
  restarts from its last resolved timestamp. Either can deliver a batch twice (the
  endpoint may have taken a request whose answer was lost), and a restart sends again
  the rows after the resolved timestamp. A consumer that deduplicates asks for the
  ``updated`` or ``mvcc_timestamp`` option, as with CockroachDB, and keys on (key,
  timestamp).
- **In order.** One batch is in flight at a time and batches go in the order they were
  sealed, so the changes of one key arrive in timestamp order, apart from redeliveries
  (which a consumer keeping the newest timestamp per key ignores).
- **Resolved follows its rows.** ``{"resolved": T}`` is posted only after every row at
  or below ``T`` was acknowledged; after it come only rows above ``T`` or redeliveries.

A 4xx answer other than 408 and 429 usually means no retry will succeed (a wrong path,
bad credentials). It is still a retryable :class:`SinkError`: the changefeed keeps
restarting with its backoff, and logs the status and the start of the answer, so that
fixing the endpoint resumes the feed without re-creating it.

``webhook_sink_config`` takes CockroachDB's JSON; keys left out take these defaults::

    {"Flush": {"Messages": 100, "Bytes": 1048576, "Frequency": "1s"},
     "Retry": {"Max": 3, "Backoff": "500ms"}}

A batch is sent when it holds ``Messages`` messages or ``Bytes`` bytes, or when its
oldest message is ``Frequency`` old (``"0s"``: only on size and at the changefeed's
checkpoints). ``Max`` is a positive number of retries or ``"inf"``; the wait before a
retry starts at ``Backoff`` and doubles, up to 10 s. Keys match without regard to case,
as Go's ``encoding/json`` matches them; an unknown key or a bad value is refused when the
changefeed is created. NB: CockroachDB sends one message per request unless told
otherwise, and refuses ``Messages`` without ``Frequency`` ("messages may never be
sent"). Here only one request is in flight, so one message per request would cap a feed
at one row per round trip; and a batch never waits past the next checkpoint, when the
changefeed flushes the sink, so ``Messages`` alone is safe.

TLS, as URI parameters of a ``webhook-https://`` URI: ``ca_cert``, a base64-encoded PEM
CA certificate to trust besides the usual roots; ``client_cert`` and ``client_key``,
a base64-encoded PEM certificate and its unencrypted key, presented to the server;
``insecure_tls_skip_verify=true``, to accept any server certificate (for tests only).
"""

from __future__ import annotations

import difflib
import gzip
import json
import os
import re
import ssl
import sys
import tempfile
from collections.abc import Callable
from typing import Any

import httpx

from feedkv.changefeed.encoder import resolved_json
from feedkv.changefeed.node_buffers import NodeBuffers
from feedkv.changefeed.options import ChangefeedOptions, option_error
from feedkv.changefeed.sink import (
    BatchingSink,
    FlushConfig,
    Message,
    RetryConfig,
    SinkError,
    SinkURI,
)
from feedkv.errors import InvalidArgumentError
from feedkv.util.hlc import Timestamp
from feedkv.util.units import counted, parse_duration_ns

__all__ = [
    "DEFAULT_FLUSH",
    "DEFAULT_RETRY",
    "DEFAULT_TIMEOUT",
    "INFINITE_RETRIES",
    "WebhookClient",
    "go_compact",
    "make",
    "parse_sink_config",
]

DEFAULT_TIMEOUT = 3.0  # seconds, as in CockroachDB
DEFAULT_FLUSH = FlushConfig(messages=100, bytes=1 << 20, frequency=1.0)
DEFAULT_RETRY = RetryConfig(max=3, backoff=0.5, max_backoff=10.0)
INFINITE_RETRIES = sys.maxsize  # Retry.Max "inf"

_ANSWER_SHOWN = 200  # characters of a refusing answer's body quoted in the error


_TOKEN = re.compile(rb'("(?:[^"\\]|\\.)*")|[ \t\r\n]+')


def go_compact(value: bytes) -> bytes:
    """The JSON ``value`` as Go's ``json.Marshal`` writes a ``json.RawMessage`` it holds:
    whitespace outside strings dropped, ``<``, ``>`` and ``&`` (which JSON has only inside
    strings) escaped as ``\\u003c``, ``\\u003e`` and ``\\u0026``."""
    compact = _TOKEN.sub(lambda m: m.group(1) or b"", value)
    return compact.replace(b"<", b"\\u003c").replace(b">", b"\\u003e").replace(b"&", b"\\u0026")


class WebhookClient:
    """Posts batches and resolved markers to ``url`` (the :class:`SinkClient` of the
    webhook sink; see the module docstring for the bodies).

    Each call blocks until the endpoint answers, the request times out or fails; anything
    but a 2xx answer raises :class:`SinkError`, and nothing is retried here (the batcher
    retries). NB: ``timeout`` bounds each of connecting, sending, waiting and reading,
    not the whole request as CockroachDB's does. ``verify`` is what httpx takes: a TLS
    context, or a bool. Safe to call from several threads."""

    def __init__(
        self,
        url: str,
        *,
        auth_header: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        verify: ssl.SSLContext | bool = True,
        extra_headers: dict[str, str] | None = None,
        compression: str | None = None,
        envelope: str = "wrapped",
        csv: bool = False,
        csv_header: bool = False,
    ) -> None:
        """``extra_headers``: sent with every request (the option ``extra_headers``);
        ``Content-Type``, ``Content-Encoding`` and ``Authorization`` are the sink's own
        and win. ``compression``: ``gzip``, ``zstd`` or ``None`` (bodies as they are).
        ``envelope``: the changefeed's, which shapes resolved markers. ``csv``: batches
        are CSV rows (``format=csv``), with a first line of column names when
        ``csv_header``."""
        self._envelope = envelope
        self._csv = csv
        self._csv_header = csv_header
        content_type = "text/csv" if csv else "application/json"
        headers = {**(extra_headers or {}), "Content-Type": content_type}
        if auth_header is not None:
            headers["Authorization"] = auth_header
        if compression is not None:
            headers["Content-Encoding"] = compression
        self._compress = _COMPRESSORS[compression]
        self.url = httpx.URL(url)
        # NB: errors name the URL without its user information, which may be a password.
        self._shown = str(self.url.copy_with(username=None, password=None))
        self._client = httpx.Client(headers=headers, timeout=timeout, verify=verify)

    def send(self, topic: str, batch: list[Message]) -> None:
        if self._csv:
            from feedkv.changefeed.file_formats import csv_bytes

            body = csv_bytes(batch, self._csv_header)
            self._post(body, f"a batch of {counted(len(batch), 'row')} of {topic}")
            return
        entries = b",".join(
            go_compact(m.value if m.value is not None else b'{"key":' + m.key + b"}") for m in batch
        )
        body = b'{"payload":[' + entries + b'],"length":' + str(len(batch)).encode() + b"}"
        self._post(body, f"a batch of {counted(len(batch), 'message')} of {topic}")

    def send_resolved(self, ts: Timestamp, topics: list[str]) -> None:
        self._post(resolved_json(ts, self._envelope), f"resolved timestamp {ts}")

    def close(self) -> None:
        self._client.close()

    def _post(self, body: bytes, what: str) -> None:
        try:
            response = self._client.post(self.url, content=self._compress(body))
        except httpx.TimeoutException as exc:
            raise SinkError(
                f"webhook sink: posting {what} to {self._shown} timed out ({exc}); "
                "raise webhook_client_timeout if the endpoint is slow"
            ) from exc
        except httpx.HTTPError as exc:
            reason = str(exc) or type(exc).__name__
            raise SinkError(f"webhook sink: cannot post {what} to {self._shown}: {reason}") from exc
        if not response.is_success:
            answer = response.text[:_ANSWER_SHOWN].strip()
            raise SinkError(
                f"webhook sink: {self._shown} refused {what}: {response.status_code} "
                f"{response.reason_phrase}" + (f": {answer}" if answer else "")
            )


def _gzip(body: bytes) -> bytes:
    # NB: no modification time in the header, so a batch sent again is the same bytes
    return gzip.compress(body, mtime=0)


def _zstd(body: bytes) -> bytes:
    import zstandard

    return zstandard.ZstdCompressor().compress(body)


_COMPRESSORS: dict[str | None, Callable[[bytes], bytes]] = {
    None: lambda body: body,
    "gzip": _gzip,
    "zstd": _zstd,
}


# Configuration.


def make(
    uri: SinkURI, options: ChangefeedOptions, *, buffers: NodeBuffers | None = None, **_: Any
) -> BatchingSink:
    """The webhook sink for a checked URI; raises SQLError 22023 for a bad parameter or
    option, before anything is sent."""
    if not uri.host:
        raise option_error(f"sink URI {uri.uri!r} needs a host: webhook-https://host/path")
    url = f"{uri.scheme.removeprefix('webhook-')}://{uri.host}{uri.path}"
    try:
        httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise option_error(f"sink URI {uri.uri!r} is not a usable URL: {exc}") from None
    timeout = options.webhook_client_timeout
    if timeout is None:
        timeout = DEFAULT_TIMEOUT
    if timeout <= 0:
        raise option_error("option webhook_client_timeout must be more than 0s, such as '3s'")
    auth = options.webhook_auth_header
    if auth is not None and not all(" " <= ch <= "~" or ch == "\t" for ch in auth):
        raise option_error(
            "option webhook_auth_header must be printable ASCII on one line, "
            "such as 'Bearer <token>'"
        )
    flush, retry = parse_sink_config(options.webhook_sink_config)
    client = WebhookClient(
        url,
        auth_header=auth,
        timeout=timeout,
        verify=_verify(uri),
        extra_headers=options.extra_headers,
        compression=options.compression,
        envelope=options.envelope,
        csv=options.format == "csv",
        csv_header=options.csv_header,
    )
    return BatchingSink(client, flush=flush, retry=retry, buffers=buffers)


_CONFIG_KEYS: dict[str, tuple[str, ...]] = {
    "Flush": ("Messages", "Bytes", "Frequency"),
    "Retry": ("Max", "Backoff"),
}


def parse_sink_config(
    config: dict[str, Any] | None,
    *,
    option: str = "webhook_sink_config",
    flush_default: FlushConfig = DEFAULT_FLUSH,
) -> tuple[FlushConfig, RetryConfig]:
    """``webhook_sink_config`` (see the module docstring), or another sink's option of
    the same shape (``pubsub_sink_config``), as the batcher's configs; raises SQLError
    22023 naming the option and the bad key."""
    try:
        return _parse_sink_config(config, flush_default)
    except _ConfigError as exc:
        raise option_error(f"option {option}: {exc}") from None


class _ConfigError(InvalidArgumentError):
    """A bad key or value of a sink's JSON config; parse_sink_config names the option."""


def _parse_sink_config(
    config: dict[str, Any] | None, flush_default: FlushConfig
) -> tuple[FlushConfig, RetryConfig]:
    values: dict[str, dict[str, Any]] = {"Flush": {}, "Retry": {}}
    for section, body in _keys(config or {}, tuple(_CONFIG_KEYS), "").items():
        if body is None:
            continue
        if not isinstance(body, dict):
            raise _config_error(f"{section} must be an object, such as {_example(section)}")
        values[section] = _keys(body, _CONFIG_KEYS[section], f"{section}.")
    flush, retry = values["Flush"], values["Retry"]
    return (
        FlushConfig(
            messages=_count("Flush.Messages", flush.get("Messages"), flush_default.messages),
            bytes=_count("Flush.Bytes", flush.get("Bytes"), flush_default.bytes),
            frequency=_seconds("Flush.Frequency", flush.get("Frequency"), flush_default.frequency),
        ),
        RetryConfig(
            max=_retries(retry.get("Max")),
            backoff=_seconds("Retry.Backoff", retry.get("Backoff"), DEFAULT_RETRY.backoff),
            max_backoff=DEFAULT_RETRY.max_backoff,
        ),
    )


def _keys(given: dict[str, Any], known: tuple[str, ...], prefix: str) -> dict[str, Any]:
    """``given`` with its keys spelled as in ``known`` (matched without regard to case)."""
    by_lower = {k.lower(): k for k in known}
    found: dict[str, Any] = {}
    for key, value in given.items():
        name = by_lower.get(key.lower())
        if name is None:
            hint = difflib.get_close_matches(key.lower(), list(by_lower), n=1)
            suggestion = f"; did you mean {prefix}{by_lower[hint[0]]}?" if hint else ""
            raise _config_error(
                f"unknown key {prefix}{key}{suggestion} (expected "
                f"{', '.join(prefix + k for k in known)})"
            )
        if name in found:
            raise _config_error(f"{prefix}{name} is given more than once")
        found[name] = value
    return found


def _count(name: str, value: Any, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise _config_error(f"{name} must be a positive integer, not {_show(value)}")
    return value


def _seconds(name: str, value: Any, default: float) -> float:
    if value is None:
        return default
    if not isinstance(value, str):
        raise _config_error(f'{name} must be a duration string such as "1s", not {_show(value)}')
    try:
        return parse_duration_ns(value) / 1e9
    except InvalidArgumentError:
        raise _config_error(
            f'{name} must be a duration such as "1s" or "500ms", not {_show(value)}'
        ) from None


def _retries(value: Any) -> int:
    if value is None:
        return DEFAULT_RETRY.max
    if isinstance(value, str):
        if value.strip().lower() == "inf":
            return INFINITE_RETRIES
        if value.strip().isdigit():  # CockroachDB takes a number in a string too
            value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise _config_error(
            f'Retry.Max must be a positive integer, or "inf" to retry forever, not {_show(value)}'
        )
    return value


def _config_error(message: str) -> _ConfigError:
    return _ConfigError(message)


def _example(section: str) -> str:
    if section == "Flush":
        return '{"Messages": 100, "Frequency": "1s"}'
    return '{"Max": 3, "Backoff": "500ms"}'


def _show(value: Any) -> str:
    return json.dumps(value)


# TLS.


def _verify(uri: SinkURI) -> ssl.SSLContext | bool:
    """What httpx should verify the server with, from the TLS parameters of ``uri``."""
    given = sorted(uri.params)
    if not given:
        return True
    if uri.scheme != "webhook-https":
        raise option_error(
            f"sink parameter {given[0]} needs TLS: use a webhook-https:// URI, not {uri.scheme}://"
        )
    skip = uri.bool_param("insecure_tls_skip_verify")
    ca = uri.pem_param("ca_cert")
    cert = uri.pem_param("client_cert")
    key = uri.pem_param("client_key")
    if cert is not None and key is None:
        raise option_error("sink parameter client_cert needs client_key as well")
    if key is not None and cert is None:
        raise option_error("sink parameter client_key needs client_cert as well")
    if ca is None and cert is None:
        return not skip
    context = httpx.create_ssl_context(verify=not skip)
    if ca is not None:
        try:
            context.load_verify_locations(cadata=ca.decode("ascii", errors="replace"))
        except (ssl.SSLError, ValueError) as exc:
            raise option_error(
                f"sink parameter ca_cert is not a usable certificate: {exc}"
            ) from None
    if cert is not None and key is not None:
        _load_client_cert(context, cert, key)
    return context


def _load_client_cert(context: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    # NB: ssl loads a certificate chain only from files; these live for the call alone.
    with tempfile.TemporaryDirectory(prefix="feedkv-webhook-") as directory:
        cert_path = os.path.join(directory, "client.crt")
        key_path = os.path.join(directory, "client.key")
        for path, data in ((cert_path, cert), (key_path, key)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        try:
            # A password callback, so that an encrypted key fails instead of prompting.
            context.load_cert_chain(cert_path, key_path, password=lambda: b"")
        except ssl.SSLError as exc:
            raise option_error(
                "sink parameters client_cert and client_key are not a usable certificate "
                f"and unencrypted key: {exc.reason or exc}"
            ) from None
