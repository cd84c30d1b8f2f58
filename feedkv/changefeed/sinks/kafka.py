"""``kafka://host:port``: each changefeed topic to a Kafka topic, through librdkafka.

The contract a consumer can rely on:

- **At least once.** :meth:`KafkaSink.flush` returns once the brokers have acknowledged
  every message emitted before it (as ``RequiredAcks`` asks), and raises
  :class:`~feedkv.changefeed.sink.SinkError` if one could not be delivered; the changefeed
  then restarts from its last resolved timestamp and sends those rows again. A consumer
  may see a message twice; it never misses one. Every row's message carries its MVCC
  timestamp in the ``mvcc_timestamp`` header (``<wall>.<logical>``, as CockroachDB prints
  it), so a consumer deduplicates on (key, timestamp) whatever the changefeed's options.
- **Ordered per partition, one partition per key.** The partition is chosen as
  CockroachDB's sink chooses it (:mod:`~feedkv.changefeed.sinks.kafka_partitioner`: FNV-1a
  of the key, through sarama's hash partitioner), so every version of a row lands in one
  partition, in the order it was emitted, and in the partition CockroachDB put it in. A
  topic's partition count is learnt once, on its first message. Retries inside librdkafka do
  not reorder: ``RequiredAcks=ALL`` turns on the idempotent producer; below it, one
  request is in flight per broker at a time, as in CockroachDB's sink.
- **A refused topic is that topic's failure.** Messages of a topic the brokers refuse
  on their own account (not authorized, unknown, too large: :func:`_topic_codes`) fail
  with a :class:`~feedkv.changefeed.sink.TopicError` naming the topic once every other
  topic's messages are acknowledged, so the changefeed sets that table aside and goes on
  with the others (:mod:`feedkv.changefeed.table_failures`).
- **Tombstones.** A deletion without a value (``value=None``) is sent with a null value,
  which Kafka's log compaction reads as "drop this key".
- **Resolved markers on every partition.** ``emit_resolved(ts, topics)`` flushes, sends
  ``{"resolved":"<ts>"}`` (the topic's Avro envelope with ``format=avro``) to every
  partition of every Kafka topic named, and flushes again: once a consumer reads it on a
  partition, it has read every row at or below ``ts`` that belongs to that partition.

librdkafka's log goes to this module's logger once per state change
(:class:`~feedkv.changefeed.sinks.kafka_log.BrokerLog`): a broker that is down is
logged once, and again once it works, not at every retry. librdkafka batches,
compresses and retries by itself, so this sink is a thin client over
its ``Producer`` rather than a :class:`~feedkv.changefeed.sink.BatchingSink`. When the
producer's queue is full, ``emit_row`` blocks serving delivery reports until there is room
(backpressure). One thread uses a sink at a time (the changefeed's); delivery reports run
on it, inside ``emit_row`` and ``flush``. Another thread may :meth:`KafkaSink.interrupt`
a sink whose job closes (its node drains or stops, its lease goes): a flush or an
``emit_row`` waiting on brokers that do not answer gives up at once rather than after
the delivery timeout, and the messages not acknowledged are sent again by the job's next
run, from its high-water mark (at least once still).

Topics: the Kafka topic is ``topic_prefix`` (or its CDC-design name
``kafka_topic_prefix``) + the changefeed topic, or ``topic_prefix`` + ``topic_name`` for
every row when ``topic_name`` is given, with characters Kafka does not allow (outside
``[a-zA-Z0-9._-]``) escaped as CockroachDB escapes them (``_u0022_`` for ``"``,
:func:`~feedkv.changefeed.names.kafka_name`). ``schema_topic=<topic>`` names the topic the
changefeed's schema-change messages go to, whole (no prefix). Topics are created by the brokers on
first use (``auto.create.topics.enable``) or must exist beforehand.

``kafka_sink_config`` takes CockroachDB's JSON and maps it to librdkafka:
``Flush.Messages``/``Flush.MaxMessages`` to ``batch.num.messages``, ``Flush.Bytes`` to
``batch.size``, ``Flush.Frequency`` to ``linger.ms``, ``RequiredAcks`` (``ONE``, the
default; ``ALL``; ``NONE``) to ``acks``, ``ClientID`` to ``client.id``, ``Compression`` to
``compression.codec``. ``Version`` is checked but needs no setting: librdkafka asks the
brokers which protocol versions they speak. CockroachDB's rule that ``Flush.Frequency``
must come with ``Flush.Messages`` or ``Flush.Bytes`` guards against a Sarama stall that
librdkafka does not have (its flush sends at once), so it is not enforced here.

TLS and SASL come from URI parameters: ``tls_enabled=true`` (with ``ca_cert``,
``client_cert`` and ``client_key`` as base64-encoded PEM, and
``insecure_tls_skip_verify``); ``sasl_enabled=true`` with ``sasl_mechanism`` (``PLAIN``,
the default, ``SCRAM-SHA-256`` or ``SCRAM-SHA-512``), ``sasl_user`` and ``sasl_password``;
or ``sasl_mechanism=OAUTHBEARER`` with OAuth 2.0 client credentials (``sasl_client_id``,
``sasl_client_secret``, ``sasl_token_url``, ``sasl_scopes``, ``sasl_grant_type``: see
:func:`_oauth`); or ``sasl_mechanism=AWS_MSK_IAM`` for Amazon MSK's IAM access control
(``sasl_aws_region``, ``sasl_aws_iam_role_arn``, ``sasl_aws_iam_session_name``:
:mod:`~feedkv.changefeed.sinks.kafka_msk_iam`). ``sasl_handshake`` may be given as
``true`` (the handshake is always sent). Everything is checked by :func:`make`, before
anything is sent.
"""

from __future__ import annotations

import base64
import binascii
import difflib
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from feedkv.changefeed.encoder import resolved_json
from feedkv.changefeed.names import MAX_KAFKA_TOPIC, kafka_name
from feedkv.changefeed.options import ChangefeedOptions, option_error
from feedkv.changefeed.sink import Message, SinkError, SinkURI, TerminalSinkError, TopicError
from feedkv.changefeed.sinks.kafka_log import BrokerLog
from feedkv.changefeed.sinks.kafka_msk_iam import MSK_IAM_PARAMS, MSKTokenSource, check_params
from feedkv.changefeed.sinks.kafka_partitioner import partition_for
from feedkv.errors import InvalidArgumentError, SQLError
from feedkv.util.hlc import Timestamp
from feedkv.util.units import parse_duration_ns

if TYPE_CHECKING:
    from confluent_kafka import KafkaError, KafkaException, Producer
    from confluent_kafka import Message as KafkaMessage

__all__ = [
    "DIAL_TIMEOUT",
    "MVCC_HEADER",
    "KafkaSink",
    "check",
    "kafka_topic",
    "make",
    "producer_config",
    "sink_topics",
]

MVCC_HEADER = "mvcc_timestamp"

log = logging.getLogger(__name__)

DELIVERY_TIMEOUT = 60.0  # seconds librdkafka keeps trying to deliver a message
# NB: longer than the delivery timeout, so that a flush normally ends with a report for
# every message (delivered or failed) rather than with messages still in the air.
FLUSH_TIMEOUT = DELIVERY_TIMEOUT + 10.0
METADATA_TIMEOUT = 10.0  # seconds to learn a topic's partitions for a resolved marker
DIAL_TIMEOUT = 10.0  # seconds CREATE CHANGEFEED waits for a broker to answer
_POLL = 0.1  # seconds to wait for delivery reports while the queue is full
_FLUSH_SLICE = 0.25  # seconds between a flush's looks for an interrupt
_DIAL_SLICE = 0.25  # seconds between a dial's looks at the log for a refusal

_MAX_TOPIC_LENGTH = MAX_KAFKA_TOPIC

_CONFIG_KEYS = ("Flush", "RequiredAcks", "ClientID", "Compression", "Version")
_FLUSH_KEYS = ("Messages", "MaxMessages", "Bytes", "Frequency")
_ACKS = {"ONE": 1, "ALL": -1, "NONE": 0, "1": 1, "-1": -1, "0": 0}
_CODECS = {"NONE": "none", "GZIP": "gzip", "SNAPPY": "snappy", "LZ4": "lz4", "ZSTD": "zstd"}
_SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "AWS_MSK_IAM")
_SASL_PASSWORD_PARAMS = ("sasl_user", "sasl_password")
_SASL_OAUTH_PARAMS = (
    "sasl_client_id",
    "sasl_client_secret",
    "sasl_token_url",
    "sasl_scopes",
    "sasl_grant_type",
)
_GRANT_TYPE = "client_credentials"  # OAuth 2.0's, and the only one librdkafka sends
_URLSAFE_B64 = str.maketrans("-_", "+/")
_MAX_BATCH_MESSAGES = 1_000_000  # librdkafka's bounds
_MAX_BATCH_BYTES = 2**31 - 1
_MAX_LINGER_MS = 900_000


def kafka_topic(topic: str, *, prefix: str = "", name: str | None = None) -> str:
    """The Kafka topic for changefeed topic ``topic``: ``prefix`` + (``name`` or
    ``topic``), every character outside ``[a-zA-Z0-9._-]`` escaped (``_u0020_``)."""
    return kafka_name(prefix + (topic if name is None else name))


def sink_topics(uri: SinkURI, topics: Iterable[str]) -> list[str]:
    """The Kafka topics of the changefeed topics ``topics`` through ``uri``'s
    ``topic_prefix`` and ``topic_name`` (:func:`feedkv.changefeed.sink.sink_topics`)."""
    prefix, name = _topic_params(uri)
    return [kafka_topic(topic, prefix=prefix, name=name) for topic in topics]


class KafkaSink:
    """A :class:`~feedkv.changefeed.sink.Sink` over a librdkafka ``Producer``, which it
    owns and closes; see the module docstring for the contract.

    ``flush_timeout`` bounds a flush and ``metadata_timeout`` the lookup of a topic's
    partitions (seconds); ``encode_resolved(ts, kafka_topic)`` makes a resolved marker.
    ``partition_counts`` gives the partition counts of Kafka topics up front, instead of
    asking the brokers on each topic's first row.

    ``emit_row`` of a topic's first row waits (up to the metadata timeout) to learn how
    many partitions the topic has, and raises SinkError if the brokers do not say."""

    def __init__(
        self,
        producer: Producer,
        *,
        topic_prefix: str = "",
        topic_name: str | None = None,
        schema_topic: str | None = None,
        flush_timeout: float = FLUSH_TIMEOUT,
        metadata_timeout: float = METADATA_TIMEOUT,
        encode_resolved: Callable[[Timestamp, str], bytes] | None = None,
        broker_log: BrokerLog | None = None,
        partition_counts: dict[str, int] | None = None,
        extra_headers: dict[str, str] | None = None,
        token_source: MSKTokenSource | None = None,
    ) -> None:
        self._producer = producer
        self._token_source = token_source  # the oauth_cb's (AWS_MSK_IAM), if any
        # extra_headers: on every message, after the row's own (headers_json_column_name)
        self._extra_headers = [(k, v.encode()) for k, v in (extra_headers or {}).items()]
        self._broker_log = broker_log
        self._prefix = topic_prefix
        self._name = topic_name
        self._schema_topic = schema_topic
        self._flush_timeout = flush_timeout
        self._metadata_timeout = metadata_timeout
        self._encode_resolved = encode_resolved or _json_resolved
        self._topics: dict[str, str] = {}
        # Kafka topic -> its partitions, learnt on its first row (or given, a test knob)
        self._partition_counts: dict[str, int] = dict(partition_counts or {})
        self._failures = 0  # delivery reports with an error since the last flush
        self._first_failure = ""
        # Kafka topic -> the first error of the topic's own (it is refused, too large...)
        self._topic_failures: dict[str, str] = {}
        self._topic_failure_count = 0
        self._closed = False
        self._interrupted = threading.Event()

    def emit_row(self, message: Message) -> None:
        """Queue ``message`` in librdkafka; blocks while its queue is full."""
        self._check_open()
        headers: list[tuple[str, str | bytes | None]] = [
            (MVCC_HEADER, str(message.mvcc_ts).encode()),
            *message.headers,
            *self._extra_headers,
        ]
        topic = self._topic(message.topic)
        partition = -1
        if message.key is not None:
            count = self._partition_counts.get(topic)
            if count is None:
                count = self._partition_counts[topic] = len(self._partitions(topic))
            partition = partition_for(message.key, count)
        self._produce(topic, message.key, message.value, partition, headers=headers)

    def flush(self) -> None:
        self._check_open()
        deadline = time.monotonic() + self._flush_timeout
        while True:
            wait = max(0.0, min(_FLUSH_SLICE, deadline - time.monotonic()))
            left = self._producer.flush(wait)
            if not left:
                break
            self._check_interrupted(left)
            if time.monotonic() >= deadline:
                self._failures, self._topic_failure_count = 0, 0
                self._topic_failures.clear()
                raise SinkError(
                    f"{left} Kafka messages were not acknowledged within the flush timeout "
                    f"({self._flush_timeout:g}s)"
                )
        self._raise_failures()

    def interrupt(self) -> None:
        """Make a flush or ``emit_row`` waiting for the brokers (in another thread)
        raise :class:`SinkError` now, and every later one at once: the sink's job is
        closing. Any thread; idempotent."""
        self._interrupted.set()

    def emit_resolved(self, ts: Timestamp, topics: Iterable[str]) -> None:
        # NB: callers flush first; flushing again costs nothing and keeps the marker
        # behind every row whatever the caller did.
        self.flush()
        for topic in sorted({self._topic(t) for t in topics}):
            payload = self._encode_resolved(ts, topic)
            for partition in self._partitions(topic):
                self._produce(topic, None, payload, partition)
        self.flush()

    def dial(self, timeout: float) -> None:
        """Ask the brokers for the cluster's metadata, blocking up to ``timeout``
        seconds; raises :class:`SinkError` if none answers (:class:`TerminalSinkError`
        if they refuse the credentials, as soon as one does)."""
        from confluent_kafka import KafkaError, KafkaException

        self._check_open()
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                # NB: in slices: librdkafka retries a broker that refused the client
                # until the timeout, and only its log says that one did
                self._producer.list_topics(timeout=max(0.001, min(_DIAL_SLICE, left)))
                self._working()
                return
            except KafkaException as exc:
                self._producer.poll(0)  # NB: librdkafka's log (a token's failure) comes by poll
                error = exc.args[0] if exc.args else None
                if isinstance(error, KafkaError) and error.code() in (
                    KafkaError._AUTHENTICATION,
                    KafkaError.SASL_AUTHENTICATION_FAILED,
                    KafkaError.CLUSTER_AUTHORIZATION_FAILED,
                    KafkaError._SSL,
                ):
                    raise TerminalSinkError(
                        f"the Kafka brokers refuse this client: {_reason(exc)}{self._token_why()}"
                    ) from exc
                refused = self._broker_log.authentication_failure if self._broker_log else None
                if refused is not None:
                    raise TerminalSinkError(
                        f"the Kafka brokers refuse this client: {refused}"
                    ) from exc
                if left <= _DIAL_SLICE:
                    raise SinkError(
                        f"no Kafka broker answered: {_reason(exc)}{self._token_why()}"
                    ) from exc

    def _token_why(self) -> str:
        failure = self._broker_log.token_failure if self._broker_log is not None else None
        if failure is None and self._token_source is not None:
            failure = self._token_source.failure
        return f"; no OAuth token could be fetched: {failure}" if failure else ""

    def reset(self) -> None:
        if self._closed:
            return
        self._producer.purge()  # what librdkafka still queues: the restart sends it again
        self._producer.poll(0)  # the purged messages' delivery reports
        self._failures = 0
        self._first_failure = ""
        self._topic_failures.clear()
        self._topic_failure_count = 0

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        # Messages not flushed are dropped (the Sink contract); purging them first keeps
        # close() from waiting on brokers that may be gone.
        self._producer.purge()
        self._producer.poll(0)
        self._producer.close()

    def _topic(self, topic: str) -> str:
        found = self._topics.get(topic)
        if found is None:
            if topic == self._schema_topic:  # named whole: no prefix, not topic_name
                found = self._topics[topic] = kafka_topic(topic)
            else:
                found = kafka_topic(topic, prefix=self._prefix, name=self._name)
                self._topics[topic] = found
        return found

    def _produce(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        partition: int = -1,
        headers: list[tuple[str, str | bytes | None]] | None = None,
    ) -> None:
        from confluent_kafka import KafkaError, KafkaException

        while True:
            try:
                self._producer.produce(
                    topic,
                    value,
                    key,
                    partition=partition,
                    on_delivery=self._on_delivery,
                    headers=headers,
                )
                break
            except BufferError:
                # The queue is full: serving delivery reports frees room.
                self._producer.poll(_POLL)
                self._raise_failures()
                self._check_interrupted(len(self._producer))
            except KafkaException as exc:
                why = _reason(exc)
                error = exc.args[0] if exc.args else None
                code = error.code() if isinstance(error, KafkaError) else None
                refused = self._refused({topic: why}) if code in _topic_codes() else {}
                if refused:  # this topic's own (a message too large for it, a bad name)
                    raise TopicError(refused) from exc
                raise SinkError(f"cannot send to Kafka topic {topic!r}: {why}") from exc
        self._producer.poll(0)

    def _on_delivery(self, error: KafkaError | None, message: KafkaMessage) -> None:
        if error is None:
            self._working()
            return
        topic = message.topic() or ""
        if error.code() in _topic_codes() and topic != self._topic_of_schema():
            self._topic_failures.setdefault(topic, error.str())
            self._topic_failure_count += 1
        if not self._failures:
            self._first_failure = f"{topic}[{message.partition()}]: {error.str()}"
        self._failures += 1

    def _raise_failures(self) -> None:
        """Raise how messages failed since the last call: a :class:`TopicError` when
        every failure was a topic's own (the others' messages went through), else a
        :class:`SinkError`."""
        if not self._failures:
            return
        failures, first = self._failures, self._first_failure
        topic_failures, self._topic_failure_count = self._topic_failure_count, 0
        by_topic, self._topic_failures = self._topic_failures, {}
        self._failures, self._first_failure = 0, ""
        refused = self._refused(by_topic)
        if refused and topic_failures == failures:
            raise TopicError(refused)
        raise SinkError(f"{failures} Kafka messages were not delivered; the first: {first}")

    def _topic_of_schema(self) -> str | None:
        return self._topics.get(self._schema_topic) if self._schema_topic else None

    def _refused(self, by_kafka_topic: dict[str, str]) -> dict[str, str]:
        """The changefeed topics behind Kafka topics that refused, with why (the schema
        topic is not a table's: it is left out, so its failure fails the sink)."""
        refused = {}
        for topic, kafka in self._topics.items():
            if kafka in by_kafka_topic and topic != self._schema_topic:
                refused[topic] = f"Kafka topic {kafka!r} refused: {by_kafka_topic[kafka]}"
        return refused

    def _partitions(self, topic: str) -> list[int]:
        """Every partition of ``topic``, waiting (up to the metadata timeout) for a topic
        the brokers are still creating."""
        from confluent_kafka import KafkaException

        deadline = time.monotonic() + self._metadata_timeout
        while True:
            try:
                # NB: in slices, so that an interrupt is seen while the brokers are down
                metadata = self._producer.list_topics(
                    topic, timeout=max(0.001, min(_FLUSH_SLICE, deadline - time.monotonic()))
                )
            except KafkaException as exc:
                if time.monotonic() >= deadline:
                    raise SinkError(
                        f"cannot learn the partitions of Kafka topic {topic!r}: {_reason(exc)}"
                    ) from exc
                self._check_interrupted(len(self._producer))
                self._producer.poll(_POLL)
                continue
            found = metadata.topics.get(topic)
            error = found.error if found is not None else None
            if found is not None and error is None and found.partitions:
                self._working()
                return sorted(found.partitions)
            if time.monotonic() >= deadline or (error is not None and not error.retriable()):
                why = error.str() if error is not None else "it has no partitions"
                refused = self._refused({topic: why}) if error is not None else {}
                if refused:  # the brokers answered, about this topic: its own failure
                    raise TopicError(refused)
                raise SinkError(f"cannot learn the partitions of Kafka topic {topic!r}: {why}")
            self._check_interrupted(len(self._producer))
            self._producer.poll(_POLL)

    def _working(self) -> None:
        """The brokers answered: a failure logged before is over."""
        if self._broker_log is not None and self._broker_log.failing:
            self._broker_log.recovered()

    def _check_open(self) -> None:
        if self._closed:
            raise SinkError("the Kafka sink is closed")

    def _check_interrupted(self, left: int) -> None:
        """Raise if the sink was interrupted (``left``: the messages not acknowledged)."""
        if self._interrupted.is_set():
            raise SinkError(
                f"the changefeed is closing: {left} Kafka messages not acknowledged are "
                "sent again by its next run"
            )


def _topic_codes() -> frozenset[int]:
    """Delivery errors that are one topic's own, not the brokers': the other topics'
    messages go through."""
    from confluent_kafka import KafkaError

    return frozenset(
        {
            KafkaError.TOPIC_AUTHORIZATION_FAILED,
            KafkaError.UNKNOWN_TOPIC_OR_PART,
            KafkaError._UNKNOWN_TOPIC,
            KafkaError.TOPIC_EXCEPTION,
            KafkaError.MSG_SIZE_TOO_LARGE,
            KafkaError.INVALID_RECORD,
            KafkaError.POLICY_VIOLATION,
        }
    )


def _json_resolved(ts: Timestamp, topic: str) -> bytes:
    return resolved_json(ts)


def _reason(exc: KafkaException) -> str:
    from confluent_kafka import KafkaError

    error = exc.args[0] if exc.args else None
    return error.str() if isinstance(error, KafkaError) else str(exc)


# Settings.


def producer_config(uri: SinkURI, options: ChangefeedOptions) -> dict[str, Any]:
    """The librdkafka settings for a ``kafka://`` URI and the changefeed's options;
    raises SQLError 22023 naming what is wrong."""
    if not uri.host:
        raise option_error(f"sink URI {uri.uri!r} names no broker: write kafka://host:port")
    if uri.path not in ("", "/"):
        raise option_error(
            f"sink URI {uri.uri!r}: a kafka:// URI names brokers only; "
            "choose topics with topic_prefix or topic_name"
        )
    config: dict[str, Any] = {
        "bootstrap.servers": uri.host,
        "partitioner": "murmur2_random",
        "message.timeout.ms": int(DELIVERY_TIMEOUT * 1000),
    }
    config.update(_sink_config(options.kafka_sink_config or {}))
    config.update(_security(uri))
    return config


def _sink_config(given: dict[str, Any]) -> dict[str, Any]:
    _check_keys(given, _CONFIG_KEYS, "kafka_sink_config")
    config: dict[str, Any] = {}
    flush = given.get("Flush", {})
    if not isinstance(flush, dict):
        raise option_error(
            "kafka_sink_config Flush must be an object, such as "
            '{"Messages": 1000, "Frequency": "1s"}'
        )
    _check_keys(flush, _FLUSH_KEYS, "kafka_sink_config Flush")
    messages = _count(flush, "Messages", _MAX_BATCH_MESSAGES)
    max_messages = _count(flush, "MaxMessages", _MAX_BATCH_MESSAGES)
    if messages and max_messages and max_messages < messages:
        raise option_error(
            f"kafka_sink_config Flush.MaxMessages ({max_messages}) must be at least "
            f"Flush.Messages ({messages})"
        )
    if messages or max_messages:
        # A batch is sent when it holds Messages, which never exceeds MaxMessages.
        config["batch.num.messages"] = messages or max_messages
    size = _count(flush, "Bytes", _MAX_BATCH_BYTES)
    if size:
        config["batch.size"] = size
    if "Frequency" in flush:
        config["linger.ms"] = _linger_ms(flush["Frequency"])
    acks = _ACKS[_choice(given, "RequiredAcks", _ACKS, "ONE")]  # CockroachDB's default
    config["acks"] = acks
    if acks == -1:
        config["enable.idempotence"] = True
    else:
        # NB: without idempotence, a retried request overtakes the ones behind it.
        config["max.in.flight.requests.per.connection"] = 1
    if "ClientID" in given:
        client_id = given["ClientID"]
        if not isinstance(client_id, str) or not client_id:
            raise option_error(
                f"kafka_sink_config ClientID must be a non-empty string, not {client_id!r}"
            )
        config["client.id"] = client_id
    if "Compression" in given:
        config["compression.codec"] = _CODECS[_choice(given, "Compression", _CODECS, "NONE")]
    if "Version" in given:
        _check_version(given["Version"])
    return config


def _check_keys(given: dict[str, Any], known: tuple[str, ...], where: str) -> None:
    for key in given:
        if key not in known:
            by_lower = {k.lower(): k for k in known}
            close = difflib.get_close_matches(str(key).lower(), list(by_lower), n=1)
            hint = f"; did you mean {by_lower[close[0]]!r}?" if close else ""
            raise option_error(
                f"unknown key {key!r} in {where}{hint} (it takes {', '.join(known)})"
            )


def _count(flush: dict[str, Any], key: str, maximum: int) -> int:
    """A whole number from 0 (not set, as in CockroachDB) to ``maximum``."""
    value = flush.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= maximum:
        raise option_error(
            f"kafka_sink_config Flush.{key} must be a whole number from 0 to {maximum}, "
            f"not {value!r}"
        )
    return value


def _linger_ms(value: Any) -> float:
    try:
        if not isinstance(value, str):
            raise InvalidArgumentError("not a string")
        ms = parse_duration_ns(value) / 1e6
    except InvalidArgumentError:
        raise option_error(
            f"kafka_sink_config Flush.Frequency must be a duration such as '500ms' or '1s', "
            f"not {value!r}"
        ) from None
    if ms > _MAX_LINGER_MS:
        raise option_error(f"kafka_sink_config Flush.Frequency {value!r} is over the 15m limit")
    return ms


def _choice(given: dict[str, Any], key: str, choices: dict[str, Any], default: str) -> str:
    value = given.get(key, default)
    names = [name for name in choices if not name.lstrip("-").isdigit()]
    if isinstance(value, str) and value.upper() in choices:
        return value.upper()
    close = difflib.get_close_matches(str(value).upper(), names, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise option_error(f"kafka_sink_config {key} {value!r} is not one of {', '.join(names)}{hint}")


def _check_version(value: Any) -> None:
    match = re.fullmatch(r"(\d+)\.(\d+)(\.\d+){0,2}", value) if isinstance(value, str) else None
    if match is None:
        raise option_error(
            f"kafka_sink_config Version must be a Kafka version such as '2.7.0', not {value!r}"
        )
    if (int(match[1]), int(match[2])) < (0, 10):
        raise option_error(
            f"kafka_sink_config Version {value!r}: Kafka versions before 0.10 are not supported"
        )


# The credentials of the schemes that preset them, CockroachDB's: each scheme's own pair,
# which no other scheme takes.
_PRESET_PARAMS = {
    "confluent-cloud": ("api_key", "api_secret"),
    "azure-event-hub": ("shared_access_key_name", "shared_access_key"),
}


def _security(uri: SinkURI) -> dict[str, Any]:
    for scheme, names in _PRESET_PARAMS.items():
        for name in names:
            if name in uri.params and uri.scheme != scheme:
                raise option_error(f"sink parameter {name} is for {scheme}:// sinks")
    if uri.scheme in _PRESET_PARAMS:
        return _preset(uri)
    tls = uri.bool_param("tls_enabled")
    sasl = uri.bool_param("sasl_enabled")
    protocol = {
        (False, False): "PLAINTEXT",
        (True, False): "SSL",
        (False, True): "SASL_PLAINTEXT",
        (True, True): "SASL_SSL",
    }
    return {**_tls(uri, tls), **_sasl(uri, sasl), "security.protocol": protocol[tls, sasl]}


def _preset(uri: SinkURI) -> dict[str, Any]:
    """``confluent-cloud://`` and ``azure-event-hub://``, as CockroachDB sets them up:
    TLS and SASL ``PLAIN``, on unless given false (which such a service refuses, so it
    is refused here); the user and password from the scheme's own pair: Confluent
    Cloud's API key and secret, or Event Hubs' ``$ConnectionString`` and the namespace's
    connection string made of the shared access policy's name and key."""
    for name in ("tls_enabled", "sasl_enabled", "sasl_handshake"):
        if name in uri.params and not uri.bool_param(name):
            raise option_error(f"sink parameter {name} must be true for {uri.scheme}:// sinks")
    mechanism = (uri.param("sasl_mechanism") or "PLAIN").upper()
    if mechanism != "PLAIN":
        raise option_error(
            f"sink parameter sasl_mechanism must be PLAIN for {uri.scheme}:// sinks"
            f"{_preset_hint(uri)}"
        )
    for name in (*_SASL_PASSWORD_PARAMS, *_SASL_OAUTH_PARAMS, *MSK_IAM_PARAMS):
        if name in uri.params:
            raise option_error(
                f"sink parameter {name} is not used by {uri.scheme}:// sinks{_preset_hint(uri)}"
            )
    key, secret = _PRESET_PARAMS[uri.scheme]
    for name in (key, secret):
        if not uri.param(name):
            raise option_error(f"sink parameter {name} is needed by {uri.scheme}:// sinks")
    if uri.scheme == "confluent-cloud":
        user, password = uri.param(key), uri.param(secret)
    else:
        namespace = uri.host.rsplit(":", 1)[0]
        user = "$ConnectionString"
        password = (
            f"Endpoint=sb://{namespace}/;SharedAccessKeyName={uri.param(key)};"
            f"SharedAccessKey={uri.param(secret)}"
        )
    return {
        **_tls(uri, True),
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": password,
    }


def _preset_hint(uri: SinkURI) -> str:
    """How to authenticate otherwise, for a preset scheme given another mechanism."""
    if uri.scheme != "azure-event-hub":
        return ""
    # NB: CockroachDB's azure-event-hub:// takes the shared access key only (so does
    # this one); a service principal (Microsoft Entra ID) goes through kafka:// and
    # OAUTHBEARER's client credentials, which Event Hubs' Kafka endpoint accepts.
    namespace = uri.host.rsplit(":", 1)[0]
    return (
        "; to authenticate as a Microsoft Entra ID service principal instead, use "
        f"'kafka://{namespace}:9093?tls_enabled=true&sasl_enabled=true"
        "&sasl_mechanism=OAUTHBEARER&sasl_client_id=<application id>"
        "&sasl_client_secret=<base64 client secret>&sasl_token_url=<URL-encoded "
        "https://login.microsoftonline.com/<tenant id>/oauth2/v2.0/token>"
        f"&sasl_scopes=<URL-encoded https://{namespace}/.default>'"
    )


def _tls(uri: SinkURI, tls: bool) -> dict[str, Any]:
    config: dict[str, Any] = {}
    for name in ("ca_cert", "client_cert", "client_key", "insecure_tls_skip_verify"):
        if name in uri.params and not tls:
            raise option_error(f"sink parameter {name} needs tls_enabled=true")
    if ("client_cert" in uri.params) != ("client_key" in uri.params):
        raise option_error("sink parameters client_cert and client_key go together: give both")
    for param, setting in (
        ("ca_cert", "ssl.ca.pem"),
        ("client_cert", "ssl.certificate.pem"),
        ("client_key", "ssl.key.pem"),
    ):
        pem = uri.pem_param(param)
        if pem is not None:
            config[setting] = pem.decode("ascii", "replace")  # librdkafka takes text
    if uri.bool_param("insecure_tls_skip_verify"):
        config["enable.ssl.certificate.verification"] = False
        config["ssl.endpoint.identification.algorithm"] = "none"
    return config


def _sasl(uri: SinkURI, sasl: bool) -> dict[str, Any]:
    """The SASL settings: a user and password (``PLAIN``, ``SCRAM-*``), OAuth 2.0
    client credentials (``OAUTHBEARER``) or an IAM role (``AWS_MSK_IAM``)."""
    for name in (
        "sasl_mechanism",
        *_SASL_PASSWORD_PARAMS,
        *_SASL_OAUTH_PARAMS,
        *MSK_IAM_PARAMS,
        "sasl_handshake",
    ):
        if name in uri.params and not sasl:
            raise option_error(f"sink parameter {name} needs sasl_enabled=true")
    if not sasl:
        return {}
    if "sasl_handshake" in uri.params and not uri.bool_param("sasl_handshake"):
        # NB: Sarama can skip the handshake for brokers before Kafka 0.10; librdkafka
        # always sends it, and no broker this sink supports (0.10+) goes without it.
        raise option_error(
            "sink parameter sasl_handshake=false is for Kafka brokers before 0.10, which "
            "this sink does not support: leave it out (the handshake is always sent)"
        )
    mechanism = (uri.param("sasl_mechanism") or "PLAIN").upper()
    if mechanism not in _SASL_MECHANISMS:
        raise option_error(
            f"sink parameter sasl_mechanism={uri.param('sasl_mechanism')!r} is not one of "
            f"{', '.join(_SASL_MECHANISMS)}"
        )
    if mechanism != "AWS_MSK_IAM":
        for name in MSK_IAM_PARAMS:
            if name in uri.params:
                raise option_error(
                    f"sink parameter {name} is for sasl_mechanism=AWS_MSK_IAM, not {mechanism}"
                )
    if mechanism == "OAUTHBEARER":
        return _oauth(uri)
    for name in _SASL_OAUTH_PARAMS:
        if name in uri.params:
            raise option_error(
                f"sink parameter {name} is for sasl_mechanism=OAUTHBEARER, not {mechanism}"
            )
    if mechanism == "AWS_MSK_IAM":
        return _msk_iam(uri)
    for name in _SASL_PASSWORD_PARAMS:
        if not uri.param(name):
            raise option_error(f"sink parameter {name} is needed with sasl_enabled=true")
    return {
        "sasl.mechanism": mechanism,
        "sasl.username": uri.param("sasl_user"),
        "sasl.password": uri.param("sasl_password"),
    }


def _oauth(uri: SinkURI) -> dict[str, Any]:
    """OAuth 2.0 client credentials, as CockroachDB's ``OAUTHBEARER`` takes them:
    ``sasl_client_id``, ``sasl_client_secret`` (base64-encoded, as CockroachDB's docs
    ask), ``sasl_token_url``, optional ``sasl_scopes`` (repeated, or separated by spaces)
    and ``sasl_grant_type``.

    librdkafka fetches the token itself (``sasl.oauthbearer.method=oidc``) and
    refreshes it before it expires: a POST to the token URL with the client id and
    secret in HTTP Basic auth and ``grant_type`` and ``scope`` in the form, the request
    CockroachDB's Go client sends. Two differences follow from librdkafka: the token
    must be a JWT (librdkafka reads its ``exp`` and ``sub``, as Kafka's own OAuth
    validator needs), and ``sasl_grant_type`` can only be ``client_credentials``
    (librdkafka refuses other grant types), so another is refused here."""
    for name in _SASL_PASSWORD_PARAMS:
        if name in uri.params:
            raise option_error(
                f"sink parameter {name} is not used with sasl_mechanism=OAUTHBEARER: "
                "give sasl_client_id, sasl_client_secret and sasl_token_url"
            )
    for name in ("sasl_client_id", "sasl_client_secret", "sasl_token_url"):
        if not uri.param(name):
            raise option_error(f"sink parameter {name} is needed with sasl_mechanism=OAUTHBEARER")
    token_url = uri.param("sasl_token_url") or ""
    parts = urlsplit(token_url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise option_error(
            f"sink parameter sasl_token_url={token_url!r} is not an http(s) URL; "
            "URL-encode it inside the sink URI"
        )
    grant = uri.param("sasl_grant_type") or _GRANT_TYPE
    if grant != _GRANT_TYPE:
        raise option_error(
            f"sink parameter sasl_grant_type={grant!r} is not supported: the Kafka client "
            f"(librdkafka) fetches tokens with grant_type={_GRANT_TYPE} only"
        )
    config: dict[str, Any] = {
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": uri.param("sasl_client_id"),
        "sasl.oauthbearer.client.secret": _client_secret(uri.param("sasl_client_secret") or ""),
        "sasl.oauthbearer.token.endpoint.url": token_url,
        "sasl.oauthbearer.grant.type": grant,
    }
    scopes = (uri.param("sasl_scopes") or "").split()
    if scopes:
        config["sasl.oauthbearer.scope"] = " ".join(scopes)
    return config


def _msk_iam(uri: SinkURI) -> dict[str, Any]:
    """Amazon MSK's IAM access control, as CockroachDB's ``AWS_MSK_IAM`` takes it: the
    cluster's ``sasl_aws_region``, the ``sasl_aws_iam_role_arn`` to assume and its
    ``sasl_aws_iam_session_name``, all three required. On the wire it is OAUTHBEARER
    with a token librdkafka gets from
    :meth:`~feedkv.changefeed.sinks.kafka_msk_iam.MSKTokenSource.oauth_cb`."""
    for name in _SASL_PASSWORD_PARAMS:
        if name in uri.params:
            raise option_error(
                f"sink parameter {name} is not used with sasl_mechanism=AWS_MSK_IAM: the "
                "IAM role's credentials sign the token"
            )
    try:
        region, role_arn, session = check_params(dict(uri.params))
    except ValueError as exc:
        raise option_error(str(exc)) from None
    source = MSKTokenSource(region, role_arn, session)
    return {"sasl.mechanism": "OAUTHBEARER", "oauth_cb": source.oauth_cb}


def _token_source(config: dict[str, Any]) -> MSKTokenSource | None:
    source = getattr(config.get("oauth_cb"), "__self__", None)
    return source if isinstance(source, MSKTokenSource) else None


def _client_secret(encoded: str) -> str:
    """``sasl_client_secret`` decoded: CockroachDB's URIs carry it base64-encoded."""
    # NB: a '+' written unescaped in a query string reads back as a space.
    text = encoded.strip().replace(" ", "+").translate(_URLSAFE_B64)
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True).decode()
    except (binascii.Error, ValueError):
        raise option_error(
            "sink parameter sasl_client_secret is not base64: CockroachDB's Kafka URIs carry "
            "the client secret base64-encoded (`printf %s SECRET | base64 -w0`), then URL-escaped"
        ) from None


def _topic_params(uri: SinkURI) -> tuple[str, str | None]:
    prefix = uri.param("topic_prefix", "") or ""
    alias = uri.param("kafka_topic_prefix")
    if alias is not None and "topic_prefix" in uri.params and alias != prefix:
        raise option_error(
            "sink parameters topic_prefix and kafka_topic_prefix are one parameter under "
            f"two names, given two values ({prefix!r}, {alias!r}): give one"
        )
    prefix = alias if alias is not None else prefix
    name = uri.param("topic_name")
    if name is not None:
        topic = kafka_topic("", prefix=prefix, name=name)
        if topic in ("", ".", "..") or len(topic) > _MAX_TOPIC_LENGTH:
            raise option_error(
                f"sink parameter topic_name={name!r} makes the Kafka topic {topic!r}, which "
                f"Kafka refuses (it needs 1 to {_MAX_TOPIC_LENGTH} characters, not '.' or '..')"
            )
    elif len(prefix) >= _MAX_TOPIC_LENGTH:
        raise option_error("sink parameter topic_prefix is too long for a Kafka topic")
    return prefix, name


def make(
    uri: SinkURI,
    options: ChangefeedOptions,
    *,
    flush_timeout: float = FLUSH_TIMEOUT,
    partition_counts: dict[str, int] | None = None,
    **_: Any,
) -> KafkaSink:
    """Check everything and build the sink; connects to no broker yet.
    ``partition_counts``: see :class:`KafkaSink`."""
    config = producer_config(uri, options)
    prefix, name = _topic_params(uri)
    schema = uri.param("schema_topic")
    if schema is not None and not schema:
        raise option_error("sink parameter schema_topic needs a topic name")
    from feedkv.changefeed.encoder import make_encoder

    # the encoder's: Avro's envelope record, JSON's {"resolved":...} (or __crdb__ in bare)
    encode_resolved = make_encoder(options).encode_resolved
    from confluent_kafka import KafkaException, Producer

    broker_log = BrokerLog(log)
    token_source = _token_source(config)
    if token_source is not None:
        # NB: the Producer asks its oauth_cb for a token while it is built and waits
        # 10 s for one; asked here first, a refusal fails at once and says why.
        token_source.token()
    try:
        producer = Producer({**config, "logger": broker_log})
    except KafkaException as exc:
        raise option_error(
            f"the Kafka client refuses the sink's settings: {_reason(exc)}"
        ) from None
    return KafkaSink(
        producer,
        topic_prefix=prefix,
        topic_name=name,
        schema_topic=schema,
        flush_timeout=flush_timeout,
        encode_resolved=encode_resolved,
        broker_log=broker_log,
        partition_counts=partition_counts,
        extra_headers=options.extra_headers,
        token_source=token_source,
    )


def check(
    uri: SinkURI, options: ChangefeedOptions, *, timeout: float = DIAL_TIMEOUT, **_: Any
) -> None:
    """Dial the brokers, as CockroachDB's CREATE CHANGEFEED does (a Kafka sink that
    cannot be reached fails the statement, cockroachdb/cockroach#136616): no broker
    answering within ``timeout`` seconds raises SQLError 08000, brokers refusing the
    credentials 22023 (as does STS refusing an ``AWS_MSK_IAM`` role)."""
    sink: KafkaSink | None = None
    try:
        sink = make(uri, options)
        sink.dial(timeout)
    except TerminalSinkError as exc:
        raise option_error(f"the Kafka brokers at {uri.host} cannot be used: {exc}") from None
    except SinkError as exc:
        raise SQLError(
            "08000", f"cannot reach the Kafka brokers at {uri.host} within {timeout:g} s: {exc}"
        ) from None
    finally:
        if sink is not None:
            sink.close()
