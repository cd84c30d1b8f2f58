"""A node stopping while its Kafka changefeed flushes into brokers that no longer answer
stops at once, not after librdkafka's delivery timeout (60 s; the flush's bound is 70 s):
closing the job interrupts the sink's flush. The job's lease is given back, and its next
run (the node started again) sends what the brokers had not acknowledged again, from the
job's high-water mark: at least once still."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import CodeType

import pytest

import feedkv
from feedkv.changefeed.options import ChangefeedOptions
from feedkv.changefeed.sink import Message, SinkError, parse_sink_uri
from feedkv.changefeed.sinks import kafka as kafka_sink
from feedkv.changefeed.sinks.kafka import KafkaSink
from feedkv.kv.store import StoreConfig
from feedkv.testing.kafka_mock import MockKafka, read_topic
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import Timestamp

DEADLINE_S = 30.0
# well under the delivery timeout a flush into brokers that are down waited out
STOP_BOUND_S = 20.0


def _keys(bootstrap: str) -> set[int]:
    topic = read_topic(bootstrap, "t", timeout_s=DEADLINE_S)
    return {json.loads(r.key or b"")[0] for records in topic.values() for r in records if r.key}


def _running(code: CodeType) -> bool:
    """Whether a thread of this process runs ``code`` now (in its stack)."""
    for frame in sys._current_frames().values():
        at = frame
        while at is not None:
            if at.f_code is code:
                return True
            at = at.f_back
    return False


def _flushing() -> bool:
    return _running(KafkaSink.flush.__code__)


@pytest.fixture
def kafka() -> Iterator[MockKafka]:
    made = MockKafka()
    yield made
    made.close()


def _interrupted_in(sink: KafkaSink, call: Callable[[], None], code: CodeType) -> BaseException:
    """What ``call`` raises once ``sink`` is interrupted while ``call`` runs ``code``
    (in a thread of its own)."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # the test's to show
            raised.append(exc)

    caller = threading.Thread(target=run)
    caller.start()
    wait_until(lambda: _running(code), timeout_s=DEADLINE_S, what="the call to wait")
    sink.interrupt()
    caller.join(STOP_BOUND_S)
    assert not caller.is_alive(), "the interrupt did not end the call"
    assert len(raised) == 1
    return raised[0]


def test_an_interrupt_ends_a_flush_the_brokers_do_not_answer(kafka: MockKafka) -> None:
    options = ChangefeedOptions()
    uri = parse_sink_uri(f"kafka://{kafka.bootstrap}", options)
    sink = kafka_sink.make(uri, options, partition_counts={"t": 4})
    try:
        kafka.set_down()
        ts = Timestamp(1, 0)
        sink.emit_row(Message("t", b"[1]", b'{"k": 1}', ts, ts))
        raised = _interrupted_in(sink, sink.flush, KafkaSink.flush.__code__)
        assert isinstance(raised, SinkError), raised
        assert "the changefeed is closing: 1 Kafka messages not acknowledged" in str(raised)
        with pytest.raises(SinkError, match="closing"):
            sink.flush()  # and every later wait, at once
    finally:
        sink.close()


def test_an_interrupt_ends_a_resolved_markers_wait_for_the_partitions(kafka: MockKafka) -> None:
    options = ChangefeedOptions()
    sink = kafka_sink.make(parse_sink_uri(f"kafka://{kafka.bootstrap}", options), options)
    try:
        kafka.set_down()
        raised = _interrupted_in(
            sink,
            lambda: sink.emit_resolved(Timestamp(1, 0), ["t"]),
            KafkaSink._partitions.__code__,
        )
        assert isinstance(raised, SinkError) and "closing" in str(raised), raised
    finally:
        sink.close()


def test_a_node_stops_at_once_while_its_kafka_sink_waits_on_brokers_that_are_down(
    tmp_path: Path, store_config: StoreConfig, kafka: MockKafka
) -> None:
    db = feedkv.connect(tmp_path / "store", config=store_config, changefeed_runner="thread")
    try:
        db.sql("CREATE TABLE t (k INT PRIMARY KEY)")
        db.sql("INSERT INTO t VALUES (1)")
        db.sql(
            f"CREATE CHANGEFEED FOR t INTO 'kafka://{kafka.bootstrap}' "
            "WITH min_checkpoint_frequency = '0s'"
        )
        wait_until(lambda: _keys(kafka.bootstrap) == {1}, timeout_s=DEADLINE_S, what="row 1")
        kafka.set_down()
        db.sql("INSERT INTO t VALUES (2)")
        wait_until(_flushing, timeout_s=DEADLINE_S, what="a flush the brokers do not answer")
    finally:
        closing = threading.Thread(target=db.close)
        closing.start()
        closing.join(STOP_BOUND_S)
    assert not closing.is_alive(), "the node waited on its Kafka sink's flush"
    # the next run of the job sends row 2, which the brokers never acknowledged
    kafka.set_up()
    with feedkv.connect(
        tmp_path / "store", config=store_config, changefeed_runner="thread"
    ) as again:
        assert again.sql("SELECT count(*) FROM t").rows == [(2,)]
        wait_until(lambda: _keys(kafka.bootstrap) == {1, 2}, timeout_s=DEADLINE_S, what="row 2")
