"""librdkafka's log reaches Python logging once per state change (issue 43, item 3).

A Kafka sink whose broker refuses connections made librdkafka log a ``Connect to ...
failed`` line at every reconnection (177 lines in 90 s on a node's stderr). Here the
broker is a real TCP listener that counts the connections librdkafka makes and closes
them; later it forwards them to librdkafka's mock cluster, so the brokers work again.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Iterator

import pytest

from feedkv.changefeed.options import ChangefeedOptions
from feedkv.changefeed.sink import Message, parse_sink_uri
from feedkv.changefeed.sinks import kafka
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import Timestamp

DEADLINE = 60.0


class Broker:
    """An address on loopback where nothing listens (connections are refused) until
    :meth:`come_up`, which listens there and forwards each connection to ``upstream``."""

    def __init__(self) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.address = f"127.0.0.1:{self.port}"
        self.server: socket.socket | None = None

    def come_up(self, upstream: str) -> None:
        host, _, port = upstream.rpartition(":")
        self.server = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(
            target=self._serve, args=(self.server, (host, int(port))), daemon=True
        ).start()

    @staticmethod
    def _serve(server: socket.socket, upstream: tuple[str, int]) -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return  # closed
            far = socket.create_connection(upstream)
            for a, b in ((conn, far), (far, conn)):
                threading.Thread(target=_pipe, args=(a, b), daemon=True).start()

    def close(self) -> None:
        if self.server is not None:
            self.server.close()


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def shown(self) -> list[tuple[str, str]]:
        """What a node's log (INFO and up) shows."""
        return [(r.levelname, r.getMessage()) for r in self.records if r.levelno >= logging.INFO]


@pytest.fixture
def records() -> Iterator[Records]:
    handler = Records()
    logger = logging.getLogger(kafka.__name__)
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)


def test_a_broker_that_is_down_is_logged_once_and_its_recovery_once(
    records: Records, bootstrap: str
) -> None:
    broker = Broker()
    options = ChangefeedOptions()
    # NB: the partition count given: a first row would otherwise ask the (down) broker
    uri = parse_sink_uri(f"kafka://{broker.address}", options)
    sink = kafka.make(uri, options, partition_counts={"t": 4})
    try:
        ts = Timestamp(1, 0)
        sink.emit_row(Message("t", b"[1]", b'{"k": 1}', ts, ts))

        def reconnections() -> bool:
            sink._producer.poll(0.1)  # NB: serves librdkafka's log queue, as flush does
            failed = [r for r in records.records if "Connection refused" in r.getMessage()]
            return len(failed) >= 5

        wait_until(reconnections, timeout_s=DEADLINE, what="five refused connections")
        failing = [r for r in records.shown() if r[0] != "INFO"]
        assert len(failing) == 1, records.shown()
        level, message = failing[0]
        assert message.startswith(f"Kafka broker {broker.address}/bootstrap is failing: ")
        assert level == "ERROR"

        broker.come_up(bootstrap)  # the conftest's mock cluster of one broker
        sink.flush()  # the row is delivered
        assert records.shown()[-1] == (
            "INFO",
            f"Kafka broker {broker.address}/bootstrap working again",
        )
        assert len(records.shown()) == 2, records.shown()
    finally:
        sink.close()
        broker.close()
