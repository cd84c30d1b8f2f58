"""``HOST:PORT`` addresses, as nodes listen on them and clients dial them."""

from __future__ import annotations

import re
from urllib.parse import parse_qs

from feedkv.errors import InvalidArgumentError, InvalidURLError

__all__ = [
    "SCHEME",
    "URL_PARAMS",
    "host_port",
    "node_url_params",
    "parse_listen",
    "parse_node_url",
    "parse_node_urls",
    "split_host_port",
]

SCHEME = "feedkv://"

_HOST_PORT = re.compile(r"^(?P<host>\[[0-9a-fA-F:]+\]|[A-Za-z0-9.\-]*):(?P<port>\d{1,5})$")


def split_host_port(text: str) -> tuple[str, int] | None:
    """``(host, port)`` from ``HOST:PORT`` or ``[IPv6]:PORT`` (the host may be empty);
    ``None`` if ``text`` is not of that form or the port is above 65535."""
    match = _HOST_PORT.match(text)
    if match is None or int(match["port"]) > 65535:
        return None
    return match["host"].strip("[]"), int(match["port"])


def host_port(host: str, port: int) -> str:
    """The ``HOST:PORT`` form of an address, bracketing IPv6 hosts."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6; an empty host means 127.0.0.1)."""
    address = split_host_port(text)
    if address is None:
        raise InvalidArgumentError(
            f"cannot listen on {text!r}: expected HOST:PORT with a port from 0 to 65535"
        )
    return address[0] or "127.0.0.1", address[1]


# ``feedkv://host:port?certs_dir=DIR&user=USER``: connect with TLS as USER (root by
# default), from the certificates in DIR
URL_PARAMS = ("certs_dir", "user")


def node_url_params(text: str) -> dict[str, str]:
    """The parameters after ``?`` in a node's URL (each of :data:`URL_PARAMS`, once)."""
    _refuse_sql_url(text)  # NB: before its parameters, which are libpq's (sslmode=...)
    query = text.partition("?")[2]
    if not query:
        return {}
    try:
        parsed = parse_qs(query, keep_blank_values=False, strict_parsing=True)
    except ValueError as exc:
        raise InvalidURLError(f"cannot connect to {text!r}: bad parameters: {exc}") from exc
    unknown = sorted(set(parsed) - set(URL_PARAMS))
    if unknown:
        raise InvalidURLError(
            f"cannot connect to {text!r}: unknown parameter(s) {', '.join(unknown)}; "
            f"known: {', '.join(URL_PARAMS)}"
        )
    repeated = sorted(name for name, values in parsed.items() if len(values) > 1)
    if repeated:
        raise InvalidURLError(f"cannot connect to {text!r}: {', '.join(repeated)} given twice")
    return {name: values[0] for name, values in parsed.items()}


def _refuse_sql_url(text: str) -> None:
    if text.startswith(("postgresql://", "postgres://")):
        raise InvalidURLError(
            f"cannot connect to {text!r}: a postgresql:// URL names a node's SQL port, "
            "which `feedkv sql --url` takes; this command calls the node's gRPC port "
            "(feedkv start --listen, 127.0.0.1:26258 by default): --url feedkv://HOST:PORT"
        )


def parse_node_url(text: str) -> tuple[str, int]:
    """``(host, port)`` of a node's ``feedkv://host:port`` URL (its parameters, if any,
    are :func:`node_url_params`')."""
    _refuse_sql_url(text)
    text = text.partition("?")[0]
    hostport = text.removeprefix(SCHEME).rstrip("/")
    address = split_host_port(hostport)
    match = _HOST_PORT.match(hostport)
    if text.startswith(SCHEME) and match is not None and int(match["port"]) > 65535:
        raise InvalidURLError(
            f"cannot connect to {text!r}: port {match['port']} is out of range (0 to 65535)"
        )
    if not text.startswith(SCHEME) or address is None or not address[0]:
        # NB: connect() opens a path itself; a caller that reaches a node only (Spark's
        # source, a CLI command) is given one by mistake more often than not
        path = "://" not in text or text.startswith("file://")
        hint = (
            ": a store directory is opened in-process by feedkv.connect(path), and other "
            "processes (Spark's) reach it at the URL its db.serving_url() gives"
            if path
            else ""
        )
        raise InvalidURLError(f"cannot connect to {text!r}: expected feedkv://host:port{hint}")
    if address[1] == 0:
        raise InvalidURLError(f"cannot connect to {text!r}: port 0 is not a node's port")
    return address


def parse_node_urls(text: str) -> list[tuple[str, int]]:
    """``(host, port)`` of each node a URL names, in order: ``feedkv://host:port``, or
    several nodes of one cluster, ``feedkv://h1:p1,h2:p2,h3:p3`` (as libpq's and
    CockroachDB's multi-host URLs), of which a client connects through the first that
    answers, and through the next when that one dies (:mod:`feedkv.kv.gateway`)."""
    base = text.partition("?")[0]
    if not base.startswith(SCHEME) or "," not in base:
        return [parse_node_url(text)]
    return [parse_node_url(SCHEME + part) for part in base.removeprefix(SCHEME).split(",")]
