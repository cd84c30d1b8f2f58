"""librdkafka's mock cluster, for tests of the Kafka sink from any process, and a consumer
that reads a whole topic back.

The mock cluster's brokers listen on loopback, so node processes a test starts can
produce to it while the test's own consumer (a separate client) reads what arrived.
"""

from __future__ import annotations

import ctypes
import glob
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import confluent_kafka
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from feedkv.testing.waiting import wait_until

__all__ = ["KafkaRecord", "MockKafka", "read_topic"]


class MockKafka:
    """librdkafka's mock cluster of three brokers (topics made on first use, with four
    partitions), whose brokers can be taken down and brought back.

    confluent-kafka does not wrap librdkafka's mock cluster API, so the cluster is made
    and driven through ctypes on the librdkafka that confluent-kafka loaded, with its
    public C API only: a producer handle of its own holds the cluster up.
    """

    BROKERS = 3

    def __init__(self) -> None:
        libs = os.path.join(os.path.dirname(confluent_kafka.__file__), "..", "confluent_kafka.libs")
        [library] = glob.glob(os.path.join(libs, "librdkafka*.so*"))
        lib = self._lib = ctypes.CDLL(library)
        lib.rd_kafka_conf_new.restype = ctypes.c_void_p
        lib.rd_kafka_conf_set.argtypes = [
            ctypes.c_void_p,
            ctypes.c_char_p,
            ctypes.c_char_p,
            ctypes.c_char_p,
            ctypes.c_size_t,
        ]
        lib.rd_kafka_new.restype = ctypes.c_void_p
        lib.rd_kafka_new.argtypes = [
            ctypes.c_int,
            ctypes.c_void_p,
            ctypes.c_char_p,
            ctypes.c_size_t,
        ]
        lib.rd_kafka_destroy.argtypes = [ctypes.c_void_p]
        lib.rd_kafka_handle_mock_cluster.restype = ctypes.c_void_p
        lib.rd_kafka_handle_mock_cluster.argtypes = [ctypes.c_void_p]
        lib.rd_kafka_mock_cluster_bootstraps.restype = ctypes.c_char_p
        lib.rd_kafka_mock_cluster_bootstraps.argtypes = [ctypes.c_void_p]
        for call in (lib.rd_kafka_mock_broker_set_down, lib.rd_kafka_mock_broker_set_up):
            call.argtypes = [ctypes.c_void_p, ctypes.c_int32]
            call.restype = ctypes.c_int
        error = ctypes.create_string_buffer(512)
        conf = lib.rd_kafka_conf_new()
        for name, value in ((b"test.mock.num.brokers", b"%d" % self.BROKERS), (b"log_level", b"0")):
            assert lib.rd_kafka_conf_set(conf, name, value, error, len(error)) == 0, error.value
        self._handle = lib.rd_kafka_new(0, conf, error, len(error))  # 0: a producer
        assert self._handle, error.value
        self._cluster = lib.rd_kafka_handle_mock_cluster(self._handle)
        assert self._cluster, "librdkafka made no mock cluster"
        self.bootstrap = lib.rd_kafka_mock_cluster_bootstraps(self._cluster).decode()
        self.broker_ids = list(range(1, self.BROKERS + 1))  # the mock numbers them from 1

    def set_down(self) -> None:
        """Take every broker down: connections are closed and refused."""
        for broker in self.broker_ids:
            assert self._lib.rd_kafka_mock_broker_set_down(self._cluster, broker) == 0

    def set_up(self) -> None:
        for broker in self.broker_ids:
            assert self._lib.rd_kafka_mock_broker_set_up(self._cluster, broker) == 0

    def close(self) -> None:
        self._lib.rd_kafka_destroy(self._handle)


@dataclass(frozen=True, slots=True)
class KafkaRecord:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


def read_topic(
    bootstrap: str,
    topic: str,
    timeout_s: float = 60.0,
    *,
    config: dict[str, Any] | None = None,
) -> dict[int, list[KafkaRecord]]:
    """Every record of ``topic`` now, per partition in offset order, read by a consumer
    of its own up to each partition's high watermark; raises ``TimeoutError`` if the
    topic does not exist or cannot be read within ``timeout_s``. ``config``: more
    consumer settings (SASL, for brokers that ask)."""
    deadline = time.monotonic() + timeout_s
    with _consumer(bootstrap, config or {}) as consumer:

        def listed() -> list[int]:
            found = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
            return sorted(found.partitions) if found is not None and found.error is None else []

        # NB: a topic not made yet is answered at once: asking again without a pause
        # kept a core busy for as long as the topic took to come
        partitions = wait_until(
            listed, timeout_s=timeout_s, poll_s=0.05, what=f"topic {topic!r} at {bootstrap}"
        )
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout_s)[1]
            for p in partitions
        }
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        read: dict[int, list[KafkaRecord]] = {p: [] for p in partitions}
        while any((read[p][-1].offset + 1 if read[p] else 0) < ends[p] for p in partitions):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic!r} not read to {ends} within {timeout_s:g} s")
            message = consumer.poll(0.1)
            if message is None:
                continue
            if message.error() is not None:
                raise RuntimeError(f"reading {topic!r}: {message.error()}")
            partition, offset = message.partition(), message.offset()
            key, value = message.key(), message.value()
            if partition is None or offset is None:
                continue
            read[partition].append(
                KafkaRecord(
                    partition,
                    offset,
                    key.encode() if isinstance(key, str) else key,
                    value.encode() if isinstance(value, str) else value,
                    _headers(message.headers()),
                )
            )
        return read


def _headers(raw: Any) -> tuple[tuple[str, bytes | None], ...]:
    pairs = raw.items() if isinstance(raw, dict) else raw or ()
    return tuple((k, v.encode() if isinstance(v, str) else v) for k, v in pairs)


@contextmanager
def _consumer(bootstrap: str, config: dict[str, Any]) -> Iterator[Consumer]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "feedkv-read-topic",
            "enable.auto.commit": False,
            "log_level": 0,
            **config,
        }
    )
    try:
        yield consumer
    finally:
        consumer.close()
