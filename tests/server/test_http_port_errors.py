"""The HTTP port of a secure node (``--certs-dir``: https) and the clients that get it
wrong: plain http is redirected to https on the same port (as CockroachDB's DB Console
does), a failed handshake is a line in the log, never a traceback on the node's
stderr, and the port goes on serving."""

from __future__ import annotations

import logging
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from feedkv.security.tls import ServerTLS
from feedkv.server.http import METRICS_PATHS, HTTPServer
from feedkv.testing.certs import make_certs_dir
from feedkv.testing.node_process import NodeProcess
from feedkv.testing.waiting import wait_until


@pytest.fixture
def certs(tmp_path: Path) -> Path:
    return make_certs_dir(tmp_path)


@pytest.fixture
def server(certs: Path) -> Iterator[HTTPServer]:
    tls = ServerTLS.load(certs).ssl_context(client_certs=False)
    server = HTTPServer(lambda: b"up 1\n", "127.0.0.1", 0, tls=tls)
    server.start()
    yield server
    server.stop()


def exchange(port: int, data: bytes) -> bytes:
    """What the port answers ``data`` with, up to its closing the connection."""
    with socket.create_connection(("127.0.0.1", port)) as plain:
        plain.sendall(data)
        answer = b""
        while chunk := plain.recv(4096):
            answer += chunk
    return answer


def still_serves_https(server: HTTPServer, certs: Path) -> None:
    context = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    answer = httpx.get(f"https://127.0.0.1:{server.port}{METRICS_PATHS[0]}", verify=context)
    assert answer.status_code == 200 and answer.text == "up 1\n"


def test_plain_http_to_the_https_port_is_redirected_to_https(
    server: HTTPServer,
    certs: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, logger="feedkv.server.http"):
        answer = httpx.get(f"http://localhost:{server.port}/_admin/v1/overview?x=1")
    location = f"https://localhost:{server.port}/_admin/v1/overview?x=1"
    assert answer.status_code == 307
    assert answer.headers["location"] == location
    assert answer.text == f"This port serves https only (the node is secure): {location}\n"
    still_serves_https(server, certs)
    assert "Traceback" not in capsys.readouterr().err
    lines = [r.getMessage() for r in caplog.records if r.name == "feedkv.server.http"]
    assert lines == [
        f"HTTP client 127.0.0.1 spoke plain http to this https port: sent to {location}"
    ]


def test_a_client_that_follows_the_redirect_gets_the_page_over_https(
    server: HTTPServer, certs: Path
) -> None:
    context = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    answer = httpx.get(
        f"http://localhost:{server.port}{METRICS_PATHS[0]}", verify=context, follow_redirects=True
    )
    assert answer.status_code == 200 and answer.text == "up 1\n"
    assert str(answer.url) == f"https://localhost:{server.port}{METRICS_PATHS[0]}"
    assert [r.status_code for r in answer.history] == [307]


def test_without_a_usable_host_header_the_redirect_names_the_address_connected_to(
    server: HTTPServer,
) -> None:
    for request in (
        b"GET /x HTTP/1.0\r\n\r\n",
        b"GET /x HTTP/1.1\r\nHost: evil.example/path\r\n\r\n",
    ):
        head = exchange(server.port, request).split(b"\r\n")
        assert head[0] == b"HTTP/1.0 307 Temporary Redirect"
        assert f"Location: https://127.0.0.1:{server.port}/x".encode() in head


def test_a_failed_handshake_is_a_line_in_the_log_and_the_port_goes_on(
    server: HTTPServer,
    certs: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    def logged() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.name == "feedkv.server.http"]

    with caplog.at_level(logging.INFO, logger="feedkv.server.http"):
        # a TLS handshake record whose body is no ClientHello: a TLS alert answers it
        assert exchange(server.port, b"\x16\x03\x01\x00\x05hello").startswith(b"\x15")
        # NB: the connection closes before its thread logs the failure
        (line,) = wait_until(logged, what="the failed handshake's line")
        assert line.startswith("HTTP client 127.0.0.1 failed on its connection: ")
        # a client that goes before it says a word, which is no failure
        socket.create_connection(("127.0.0.1", server.port)).close()
        still_serves_https(server, certs)
    assert "Traceback" not in capsys.readouterr().err
    assert logged() == [line]


def test_feedkv_starts_a_secure_node_whose_http_url_redirects_to_https(tmp_path: Path) -> None:
    node = NodeProcess(tmp_path / "store", "--changefeed-runner", "thread")
    try:
        assert node.http_url.startswith("https://127.0.0.1:")
        plain = "http://" + node.http_url.removeprefix("https://")
        answer = httpx.get(plain + "/")
        assert answer.status_code == 307
        assert answer.headers["location"] == node.http_url + "/"
    finally:
        assert node.terminate() == 0
