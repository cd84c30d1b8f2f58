"""A Kafka broker's SASL ``OAUTHBEARER`` check in front of librdkafka's mock cluster, and
the checks of the tokens that Amazon MSK and a JWT-validating broker make.

librdkafka's mock brokers speak no SASL at all: their request handlers
(``rd_kafka_mock_api_handlers`` in librdkafka's ``src/rdkafka_mock_handlers.c``) have no
``SaslHandshake`` (API key 17) or ``SaslAuthenticate`` (36), so a client with
``sasl.mechanism`` set fails with "SASL Handshake not supported by broker".
:class:`SaslFront` adds them the way a Kafka broker does: it listens on loopback in front
of a one-broker mock cluster (which then advertises the front's address in its metadata,
``rd_kafka_mock_broker_set_host_port``), passes ``ApiVersions`` through with the two SASL
APIs added to the answer, answers ``SaslHandshake`` (``OAUTHBEARER`` only, or ``PLAIN``
only) and ``SaslAuthenticate`` itself, checking the client's bearer token (RFC 7628's
``n,,\\x01auth=Bearer <token>\\x01\\x01``), or its user and password, with a function
the test gives, and once that
succeeds relays the connection's bytes both ways unchanged. A refused token gets
``SASL_AUTHENTICATION_FAILED`` (58) with the reason, and the connection is closed, as a
broker does. Any other request before authentication closes the connection.

The front speaks the versions librdkafka uses for these (``SaslHandshake`` v0-1,
``SaslAuthenticate`` v0-1, both with non-flexible headers) and nothing else of SASL.
"""

from __future__ import annotations

import base64
import calendar
import contextlib
import ctypes
import hashlib
import hmac
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, quote, urlsplit

from feedkv.testing.kafka_mock import MockKafka

__all__ = ["MSKIAMCheck", "SaslFront", "bearer_token", "plain_credentials"]

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
UNSUPPORTED_SASL_MECHANISM, SASL_AUTHENTICATION_FAILED = 33, 58
_ADDED_APIS = ((SASL_HANDSHAKE, 0, 1), (SASL_AUTHENTICATE, 0, 1))


def bearer_token(auth_bytes: bytes) -> str | None:
    """The token of an OAUTHBEARER client's first message (RFC 7628 3.1), or ``None``."""
    for part in auth_bytes.split(b"\x01"):
        if part.startswith(b"auth=Bearer "):
            return part[len(b"auth=Bearer ") :].decode()
    return None


class _OneBroker(MockKafka):
    BROKERS = 1


def plain_credentials(auth_bytes: bytes) -> str | None:
    """``user:password`` of a PLAIN client's message (RFC 4616: authzid, authcid and
    password, each ended by a NUL but the last), or ``None``."""
    parts = auth_bytes.split(b"\x00")
    if len(parts) != 3:
        return None
    return f"{parts[1].decode(errors='replace')}:{parts[2].decode(errors='replace')}"


@dataclass
class SaslFront:
    """See the module docstring. ``check(token)`` returns ``None`` to accept the token or
    why it is refused; it runs on the front's connection threads. ``mechanism``: the one
    the front takes, ``OAUTHBEARER`` or ``PLAIN`` (whose ``check`` gets
    ``user:password``). ``bootstrap`` is the address clients give; ``accepted`` and
    ``refused`` count the authentications."""

    check: Callable[[str], str | None]
    mechanism: str = "OAUTHBEARER"
    bootstrap: str = field(init=False)
    accepted: int = field(init=False, default=0)
    refused: list[str] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        self._mock = _OneBroker()
        host, port = self._mock.bootstrap.split(",")[0].rsplit(":", 1)
        self._upstream = (host, int(port))
        self._listener = socket.create_server(("127.0.0.1", 0))
        front_port = self._listener.getsockname()[1]
        self.bootstrap = f"127.0.0.1:{front_port}"
        lib = self._mock._lib
        lib.rd_kafka_mock_broker_set_host_port.argtypes = [
            ctypes.c_void_p,
            ctypes.c_int32,
            ctypes.c_char_p,
            ctypes.c_int,
        ]
        lib.rd_kafka_mock_broker_set_host_port(self._mock._cluster, 1, b"127.0.0.1", front_port)
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, name="sasl-front", daemon=True).start()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            sockets, self._sockets = self._sockets, []
        self._listener.close()
        for sock in sockets:
            _close(sock)
        self._mock.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            with self._lock:
                if self._closed:
                    _close(client)
                    return
                self._sockets.append(client)
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self._upstream)
        except OSError:
            _close(client)
            return
        with self._lock:
            self._sockets.append(upstream)
        try:
            if self._authenticate(client, upstream):
                relay = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
                relay.start()
                _pipe(client, upstream)
                return
        except (OSError, ConnectionError):
            pass
        _close(client)
        _close(upstream)

    def _authenticate(self, client: socket.socket, upstream: socket.socket) -> bool:
        """Serve the connection's requests until SASL succeeds (True) or it must close."""
        handshaken = False
        while True:
            frame = _read_frame(client)
            if frame is None:
                return False
            api_key, version, correlation = struct.unpack_from(">hhi", frame)
            if api_key == API_VERSIONS:
                upstream.sendall(struct.pack(">i", len(frame)) + frame)
                answer = _read_frame(upstream)
                if answer is None:
                    return False
                _send(client, _with_sasl_apis(answer, version))
            elif api_key == SASL_HANDSHAKE:
                mechanism = _string(frame, _body_offset(frame))
                error = 0 if mechanism == self.mechanism else UNSUPPORTED_SASL_MECHANISM
                body = struct.pack(">hi", error, 1) + _kafka_string(self.mechanism)
                _send(client, struct.pack(">i", correlation) + body)
                handshaken = error == 0
                if error:
                    return False
            elif api_key == SASL_AUTHENTICATE and handshaken:
                offset = _body_offset(frame)
                (size,) = struct.unpack_from(">i", frame, offset)
                message = frame[offset + 4 : offset + 4 + size]
                if self.mechanism == "PLAIN":
                    token = plain_credentials(message)
                    why = "no PLAIN credentials" if token is None else self.check(token)
                else:
                    token = bearer_token(message)
                    why = "no bearer token" if token is None else self.check(token)
                with self._lock:
                    if why is None:
                        self.accepted += 1
                    else:
                        self.refused.append(why)
                if why is None:
                    body = struct.pack(">hhi", 0, -1, 0)  # no error, null message, no bytes
                else:
                    body = struct.pack(">h", SASL_AUTHENTICATION_FAILED) + _kafka_string(why)
                    body += struct.pack(">i", 0)
                if version >= 1:
                    body += struct.pack(">q", 0)  # session lifetime: no re-authentication
                _send(client, struct.pack(">i", correlation) + body)
                return why is None
            else:
                return False  # as a broker: nothing but SASL before authentication


@dataclass
class MSKIAMCheck:
    """What Amazon MSK checks in an ``AWS_MSK_IAM`` token, as ``SaslFront.check``: a
    base64url SigV4-presigned ``GET https://kafka.<region>.amazonaws.com/?Action=
    kafka-cluster:Connect`` for the service ``kafka-cluster`` in ``region``, not expired
    at ``clock()``, whose signature verifies with the secret key that
    ``secret_for(access_key_id, session_token)`` gives (IAM's part: ``None`` for a key
    it does not know). The signature is computed here from AWS's SigV4 specification,
    not with botocore. ``principals`` collects the access key ids accepted."""

    region: str
    secret_for: Callable[[str, str | None], str | None]
    clock: Callable[[], float] = time.time
    principals: list[str] = field(default_factory=list)

    def __call__(self, token: str) -> str | None:
        try:
            url = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
        except ValueError:
            return "the token is not base64url"
        parts = urlsplit(url)
        if (parts.scheme, parts.netloc, parts.path) != (
            "https",
            f"kafka.{self.region}.amazonaws.com",
            "/",
        ):
            return f"the token is not for kafka.{self.region}.amazonaws.com: {url}"
        params = dict(parse_qsl(parts.query, keep_blank_values=True))
        if params.get("Action") != "kafka-cluster:Connect":
            return f"the token's action is {params.get('Action')!r}"
        if params.get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256":
            return "the token is not signed with SigV4"
        key_id, _, scope = params.get("X-Amz-Credential", "").partition("/")
        day, region, service, terminal = [*scope.split("/"), "", "", "", ""][:4]
        if (region, service, terminal) != (self.region, "kafka-cluster", "aws4_request"):
            return f"the token's credential scope is {scope!r}"
        stamp = params.get("X-Amz-Date", "")
        signed_at = calendar.timegm(time.strptime(stamp, "%Y%m%dT%H%M%SZ"))
        if stamp[:8] != day:
            return "the token's date and scope disagree"
        if self.clock() > signed_at + int(params.get("X-Amz-Expires", "0")):
            return "the token has expired"
        secret = self.secret_for(key_id, params.get("X-Amz-Security-Token"))
        if secret is None:
            return f"IAM does not know the access key {key_id}"
        signed_headers = params.get("X-Amz-SignedHeaders")
        if signed_headers != "host":
            return f"the token signs the headers {signed_headers!r}, not 'host'"
        # The canonical query holds the parameters before the signature (User-Agent is
        # added after signing, as AWS's signers do).
        query = parts.query.split("&X-Amz-Signature=", 1)[0]
        canonical_query = "&".join(
            sorted(
                f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}"
                for k, v in parse_qsl(query, keep_blank_values=True)
            )
        )
        canonical = "\n".join(
            [
                "GET",
                "/",
                canonical_query,
                f"host:{parts.netloc}\n",
                "host",
                hashlib.sha256(b"").hexdigest(),
            ]
        )
        to_sign = "\n".join(
            ["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()]
        )
        key = f"AWS4{secret}".encode()
        for part in (day, region, service, terminal):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        expected = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, params.get("X-Amz-Signature", "")):
            return "the token's signature does not verify"
        self.principals.append(key_id)
        return None


def _read_frame(sock: socket.socket) -> bytes | None:
    header = _read_exactly(sock, 4)
    if header is None:
        return None
    (size,) = struct.unpack(">i", header)
    return _read_exactly(sock, size)


def _read_exactly(sock: socket.socket, size: int) -> bytes | None:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            return None
        chunks += chunk
    return bytes(chunks)


def _send(sock: socket.socket, frame: bytes) -> None:
    sock.sendall(struct.pack(">i", len(frame)) + frame)


def _body_offset(frame: bytes) -> int:
    """Where a request's body starts: after the v1 header's client id (the SASL
    requests' versions here all have non-flexible headers)."""
    client_id_length: int = struct.unpack_from(">h", frame, 8)[0]
    return 10 + max(client_id_length, 0)


def _string(frame: bytes, offset: int) -> str:
    (length,) = struct.unpack_from(">h", frame, offset)
    return frame[offset + 2 : offset + 2 + length].decode()


def _kafka_string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def _with_sasl_apis(answer: bytes, request_version: int) -> bytes:
    """An ``ApiVersions`` answer with SaslHandshake and SaslAuthenticate added. The mock
    answers v0-v2 (and an unsupported v3 request with a v0 answer), whose layout is:
    correlation id, error code, an int32-counted array of (key, min, max), the rest."""
    correlation, error, count = struct.unpack_from(">ihi", answer)
    if request_version >= 3 and error == 0:
        raise RuntimeError("the mock answered a flexible ApiVersions; the front cannot edit it")
    entries = answer[10 : 10 + 6 * count]
    rest = answer[10 + 6 * count :]
    added = b"".join(struct.pack(">hhh", *api) for api in _ADDED_APIS)
    return (
        struct.pack(">ihi", correlation, error, count + len(_ADDED_APIS)) + entries + added + rest
    )


def _pipe(source: socket.socket, target: socket.socket) -> None:
    try:
        while chunk := source.recv(65536):
            target.sendall(chunk)
    except OSError:
        pass
    finally:
        _close(source)
        _close(target)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()
