"""Fixtures for changefeeds: a real node on disk with fast closed timestamps, an S3
server (moto's, on loopback) and librdkafka's mock Kafka cluster."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import feedkv
from feedkv import DB
from feedkv.kv.store import StoreConfig


@pytest.fixture
def store_config() -> StoreConfig:
    """Fast side loops (checkpoints every few ms), no fsync."""
    return StoreConfig(
        closed_ts_interval_s=0.01, closed_ts_target_ns=50_000_000, push_poll_s=0.01, sync=False
    )


@pytest.fixture
def db(tmp_path: Path, store_config: StoreConfig) -> Iterator[DB]:
    """An embedded node on a real LMDB store in ``tmp_path``."""
    database = feedkv.connect(tmp_path / "store", config=store_config, changefeed_runner="thread")
    yield database
    database.close()


def _s3_client(endpoint: str) -> Any:
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id="test",
        aws_secret_access_key="test",
        region_name="us-east-1",
    )


@pytest.fixture
def s3_endpoint() -> Iterator[str]:
    """A moto S3 server on loopback with a bucket ``feeds``: its URL. NB: moto keeps its
    buckets per process, not per server, so a test writes under prefixes of its own."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    _s3_client(endpoint).create_bucket(Bucket="feeds")
    yield endpoint
    server.stop()


@pytest.fixture
def s3(s3_endpoint: str) -> Any:
    """A boto3 client of :func:`s3_endpoint`'s server (moto takes any credentials)."""
    return _s3_client(s3_endpoint)


@pytest.fixture(scope="module")
def kafka_holders() -> Iterator[list[Any]]:
    """The producers holding up the module's mock Kafka clusters (:func:`bootstrap`),
    closed once the module's tests are done. NB: so a cluster outlives the test's node:
    a changefeed still flushing into a cluster already gone waits out librdkafka's
    delivery timeout (60 s) as its node closes."""
    holders: list[Any] = []
    yield holders
    for holder in holders:
        holder.close()


@pytest.fixture
def kafka_brokers() -> int:
    """How many brokers :func:`bootstrap`'s cluster has (a module may override it)."""
    return 1


@pytest.fixture
def bootstrap(kafka_holders: list[Any], kafka_brokers: int) -> str:
    """A librdkafka mock cluster of the test's own (topics made on first use, with four
    partitions): its bootstrap servers, by broker id."""
    from confluent_kafka import Producer

    quiet = logging.getLogger("tests.kafka_mock")  # librdkafka's chatter, not stderr's
    holder = Producer({"test.mock.num.brokers": kafka_brokers, "logger": quiet})
    kafka_holders.append(holder)
    brokers = holder.list_topics(timeout=30.0).brokers.values()
    return ",".join(f"{b.host}:{b.port}" for b in sorted(brokers, key=lambda b: b.id))
