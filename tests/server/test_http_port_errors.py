"""The HTTP port's connections that fail on the client's side: a line in the log, no
traceback on the node's stderr (a node started with --certs-dir serves https only)."""

from __future__ import annotations

import logging
import socket
import ssl
from pathlib import Path

import httpx
import pytest

from feedkv.security.tls import ServerTLS
from feedkv.server.http import METRICS_PATHS, HTTPServer
from feedkv.testing.certs import make_certs_dir


def test_plain_http_to_the_https_port_logs_a_line_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    certs = make_certs_dir(tmp_path)
    tls = ServerTLS.load(certs).ssl_context(client_certs=False)
    server = HTTPServer(lambda: b"up 1\n", "127.0.0.1", 0, tls=tls)
    server.start()
    try:
        with (
            caplog.at_level(logging.INFO, logger="feedkv.server.http"),
            socket.create_connection(("127.0.0.1", server.port)) as plain,
        ):
            plain.sendall(b"GET /_status/vars HTTP/1.1\r\nHost: x\r\n\r\n")
            # NB: the port closes the connection after handling its error: read to EOF
            while plain.recv(1024):
                pass
        context = ssl.create_default_context(cafile=str(certs / "ca.crt"))
        answer = httpx.get(f"https://127.0.0.1:{server.port}{METRICS_PATHS[0]}", verify=context)
        assert answer.status_code == 200 and answer.text == "up 1\n"  # still serving
    finally:
        server.stop()
    assert "Traceback" not in capsys.readouterr().err
    lines = [r.getMessage() for r in caplog.records if r.name == "feedkv.server.http"]
    assert lines == ["HTTP client 127.0.0.1 spoke plain http to this https port"]
