"""The HTTP port keeps a client's connection between requests (as Prometheus keeps its
connection to a target between scrapes) and closes the kept ones when it stops."""

from __future__ import annotations

import http.client

from feedkv.server.http import METRICS_PATHS, HTTPServer


def test_one_connection_carries_a_scrapers_requests_a_posted_body_included() -> None:
    server = HTTPServer(lambda: b"up 1\n", "127.0.0.1", 0)
    server.start()
    try:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        answers = []
        for method, path, body in (
            ("GET", METRICS_PATHS[0], None),
            ("POST", "/_admin/v1/jobs/1/pause", b"x" * 100),  # no header: 400, body read past
            ("GET", METRICS_PATHS[1], None),
        ):
            connection.request(method, path, body=body)
            if method == "GET" and not answers:
                kept = connection.sock
            answer = connection.getresponse()
            answers.append((answer.status, answer.read(), answer.will_close))
        assert connection.sock is kept  # never reconnected
        assert [(status, will_close) for status, _, will_close in answers] == [
            (200, False),
            (400, False),
            (200, False),
        ]
        assert answers[0][1] == answers[2][1] == b"up 1\n"
    finally:
        server.stop()
    # NB: stopped, the port ended the kept connection: the client reads its end
    assert kept.recv(1) == b""
    connection.close()


def test_a_request_whose_body_has_no_length_closes_its_connection_after_the_answer() -> None:
    server = HTTPServer(lambda: b"up 1\n", "127.0.0.1", 0)
    server.start()
    try:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        connection.request("POST", "/_admin/v1/jobs/1/pause", body=iter([b"x" * 10]))
        answer = connection.getresponse()
        answer.read()
        assert answer.status == 400 and answer.will_close
        connection.close()
    finally:
        server.stop()
