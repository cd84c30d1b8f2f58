"""Translation between the batch API's dataclasses and their protobuf messages.

The node and the gRPC client both use these functions, so whatever crosses the wire is
checked the same way the in-process API checks it: a malformed message (an inverted span,
a 15-byte txn id, an unknown request) raises :class:`InvalidArgumentError` naming the bad
part, and the node answers with that error instead of applying anything.

Errors travel as an ``Error`` message naming the :mod:`feedkv.errors` class and carrying
the details that class holds; the client raises the same class again.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from google.protobuf.message import DecodeError, Message

from feedkv import errors
from feedkv.errors import FeedKVError, InvalidArgumentError
from feedkv.kv import api
from feedkv.kv.proto import feedkv_pb2 as pb
from feedkv.kv.range_descriptor import RangeDescriptor
from feedkv.kv.txn_record import TxnRecord
from feedkv.storage.export import ExportedVersion
from feedkv.storage.intent import TxnMeta, TxnStatus
from feedkv.storage.mvcc import KeyValue
from feedkv.util.hlc import MAX_LOGICAL, MAX_WALL, Timestamp, timestamps_of
from feedkv.util.keys import Span

__all__ = [
    "MAX_MESSAGE_BYTES",
    "SERVICE",
    "batch_request_from_proto",
    "batch_request_to_proto",
    "batch_response_from_proto",
    "batch_response_to_proto",
    "error_from_proto",
    "error_to_proto",
    "parse_message",
    "parse_messages",
    "span_from_proto",
    "span_to_proto",
    "timestamp_from_proto",
    "timestamp_to_proto",
]

_new_timestamp = functools.partial(tuple.__new__, Timestamp)

SERVICE = "feedkv.kv.Node"  # the gRPC service of node and client
MAX_MESSAGE_BYTES = 64 << 20  # the largest message either sends or takes

_M = TypeVar("_M", bound=Message)

_STATUS_TO = {
    TxnStatus.PENDING: pb.PENDING,
    TxnStatus.COMMITTED: pb.COMMITTED,
    TxnStatus.ABORTED: pb.ABORTED,
}
_STATUS_FROM: dict[int, TxnStatus] = {v: k for k, v in _STATUS_TO.items()}
_PUSH_TO = {
    api.PushType.TIMESTAMP: pb.PUSH_TIMESTAMP,
    api.PushType.ABORT: pb.PUSH_ABORT,
    api.PushType.TOUCH: pb.PUSH_TOUCH,
    api.PushType.QUERY: pb.PUSH_QUERY,
}
_PUSH_FROM: dict[int, api.PushType] = {v: k for k, v in _PUSH_TO.items()}


def parse_message(kind: type[_M], data: bytes) -> _M:
    """``data`` parsed as a ``kind`` message; :class:`InvalidArgumentError` if it is not
    one.

    The services take requests as bytes and parse them here rather than through gRPC's
    request deserializer: when that one fails on a stream, grpcio aborts the call from
    inside its own receive path, and a server stopping later sometimes waits for that
    call for ever. Parsed here, a bad message gets an error the service chose.
    """
    try:
        return kind.FromString(data)
    except DecodeError as exc:
        raise InvalidArgumentError(
            f"malformed message: {len(data)} bytes that are not a {kind.DESCRIPTOR.name} ({exc})"
        ) from exc


def parse_messages(kind: type[_M], frames: Iterator[bytes]) -> Iterator[_M]:
    """A request stream's raw messages, each parsed by :func:`parse_message`."""
    for data in frames:
        yield parse_message(kind, data)


# Small values.


def timestamp_to_proto(ts: Timestamp, out: pb.Timestamp | None = None) -> pb.Timestamp:
    msg = out if out is not None else pb.Timestamp()
    msg.wall = ts.wall
    msg.logical = ts.logical
    return msg


def timestamp_from_proto(msg: pb.Timestamp) -> Timestamp:
    if not 0 <= msg.wall <= MAX_WALL or msg.logical > MAX_LOGICAL:
        raise InvalidArgumentError(f"timestamp {msg.wall}.{msg.logical} is out of range")
    # NB: tuple.__new__, not the NamedTuple's Python __new__: one or more a batch
    return _new_timestamp((msg.wall, msg.logical))


def span_to_proto(span: Span, out: pb.Span) -> None:
    out.start = span.start
    out.end = span.end


def span_from_proto(msg: pb.Span) -> Span:
    return Span(msg.start, msg.end)


def _value_to(value: bytes | None, parent: Message, field: str) -> None:
    if value is not None:
        getattr(parent, field).bytes = value


def _value_from(parent: Message, field: str) -> bytes | None:
    return getattr(parent, field).bytes if parent.HasField(field) else None


def _position_to(position: api.ExportPosition | None, parent: Message, field: str) -> None:
    if position is not None:
        out = getattr(parent, field)
        timestamp_to_proto(position.ts, out.ts)
        out.key = position.key


def _position_from(parent: Message, field: str) -> api.ExportPosition | None:
    if not parent.HasField(field):
        return None
    msg = getattr(parent, field)
    return api.ExportPosition(timestamp_from_proto(msg.ts), msg.key)


def _txn_id(raw: bytes) -> bytes:
    if len(raw) != 16:
        raise InvalidArgumentError(f"a txn id is 16 bytes, got {len(raw)}")
    return raw


def _meta_to(meta: TxnMeta, out: pb.TxnMeta) -> None:
    out.id = meta.id
    out.key = meta.key
    out.epoch = meta.epoch
    timestamp_to_proto(meta.write_ts, out.write_ts)
    out.seq = meta.seq


def _meta_from(msg: pb.TxnMeta) -> TxnMeta:
    return TxnMeta(_txn_id(msg.id), msg.key, msg.epoch, timestamp_from_proto(msg.write_ts), msg.seq)


def _txn_to(txn: api.Transaction, out: pb.Transaction) -> None:
    out.id = txn.id
    out.key = txn.key
    out.epoch = txn.epoch
    timestamp_to_proto(txn.read_ts, out.read_ts)
    timestamp_to_proto(txn.write_ts, out.write_ts)
    out.priority = txn.priority
    out.seq = txn.seq
    timestamp_to_proto(txn.min_ts, out.min_ts)


def _txn_from(msg: pb.Transaction) -> api.Transaction:
    return api.Transaction(
        id=_txn_id(msg.id),
        key=msg.key,
        epoch=msg.epoch,
        read_ts=timestamp_from_proto(msg.read_ts),
        write_ts=timestamp_from_proto(msg.write_ts),
        priority=msg.priority,
        seq=msg.seq,
        min_ts=timestamp_from_proto(msg.min_ts),
    )


def _record_to(record: TxnRecord, out: pb.TxnRecord) -> None:
    _meta_to(record.meta, out.meta)
    out.status = _STATUS_TO[record.status]
    out.priority = record.priority
    out.last_active_ns = record.last_active_ns


def _record_from(msg: pb.TxnRecord) -> TxnRecord:
    return TxnRecord(
        _meta_from(msg.meta), _STATUS_FROM[msg.status], msg.priority, msg.last_active_ns
    )


def _desc_to(desc: RangeDescriptor, out: pb.RangeDescriptor) -> None:
    out.range_id = desc.range_id
    span_to_proto(desc.span, out.span)
    out.generation = desc.generation
    out.sticky = desc.sticky
    out.replicas.extend(desc.replicas)


def _desc_from(msg: pb.RangeDescriptor) -> RangeDescriptor:
    replicas = tuple(msg.replicas) or (1,)
    return RangeDescriptor(
        msg.range_id, span_from_proto(msg.span), msg.generation, msg.sticky, replicas
    )


def _status_from(code: int) -> TxnStatus:
    if code not in _STATUS_FROM:
        raise InvalidArgumentError(f"unknown txn status {code}")
    return _STATUS_FROM[code]


def _edges_to(edges: tuple[api.WaitEdge, ...], out: Any) -> None:
    for waiter, blocker, priority in edges:
        edge = out.add()
        edge.waiter, edge.blocker, edge.priority = waiter, blocker, priority


def _edges_from(msgs: Any) -> tuple[api.WaitEdge, ...]:
    return tuple((_txn_id(m.waiter), _txn_id(m.blocker), m.priority) for m in msgs)


def _push_type_from(code: int) -> api.PushType:
    if code not in _PUSH_FROM:
        raise InvalidArgumentError(f"unknown push type {code}")
    return _PUSH_FROM[code]


# Requests.


def _encode_request(req: api.Request, out: pb.RequestUnion) -> None:
    if isinstance(req, api.Get):
        out.get.key = req.key
    elif isinstance(req, api.Put):
        out.put.key = req.key
        _value_to(req.value, out.put, "value")
    elif isinstance(req, api.ConditionalPut):
        cput = out.conditional_put_exists if req.exists else out.conditional_put
        cput.key = req.key
        _value_to(req.value, cput, "value")
        _value_to(req.expected, cput, "expected")
    elif isinstance(req, api.DeleteRange):
        span_to_proto(req.span, out.delete_range.span)
    elif isinstance(req, api.Ingest):
        span_to_proto(req.span, out.ingest.span)
        out.ingest.keys.extend(req.keys)
        out.ingest.values.extend(req.values)
    elif isinstance(req, api.Scan):
        span_to_proto(req.span, out.scan.span)
        if req.limit is not None:
            out.scan.limit = req.limit
        out.scan.reverse = req.reverse
        if req.lock:
            out.scan.lock = True
        if req.nowait:
            out.scan.nowait = True
        if req.skip_locked:
            out.scan.skip_locked = True
    elif isinstance(req, api.EndTxn):
        out.end_txn.commit = req.commit
        for span in req.lock_spans:
            span_to_proto(span, out.end_txn.lock_spans.add())
        if req.deadline is not None:
            timestamp_to_proto(req.deadline, out.end_txn.deadline)
    elif isinstance(req, api.HeartbeatTxn):
        out.heartbeat_txn.SetInParent()
    elif isinstance(req, api.PushTxn):
        _meta_to(req.pushee, out.push_txn.pushee)
        out.push_txn.push_type = _PUSH_TO[req.push_type]
        timestamp_to_proto(req.push_to, out.push_txn.push_to)
        out.push_txn.pusher_priority = req.pusher_priority
        out.push_txn.pusher_id = req.pusher_id or b""
        _edges_to(req.dependents, out.push_txn.dependents)
    elif isinstance(req, api.ResolveIntent):
        span_to_proto(req.span, out.resolve_intent.span)
        _meta_to(req.txn, out.resolve_intent.txn)
        out.resolve_intent.status = _STATUS_TO[req.status]
    elif isinstance(req, api.RefreshRange):
        span_to_proto(req.span, out.refresh_range.span)
        timestamp_to_proto(req.from_ts, out.refresh_range.from_ts)
    elif isinstance(req, api.Split):
        out.split.key = req.key
        out.split.automatic = req.automatic
    elif isinstance(req, api.Merge):
        out.merge.key = req.key
        out.merge.automatic = req.automatic
    elif isinstance(req, api.Relocate):
        out.relocate.key = req.key
        out.relocate.node_id = req.node_id
    elif isinstance(req, api.RangeLookup):
        out.range_lookup.key = req.key
        out.range_lookup.prefetch = min(req.prefetch, 2**32 - 1)
    elif isinstance(req, api.Export):
        span_to_proto(req.span, out.export.span)
        timestamp_to_proto(req.lo, out.export.lo)
        timestamp_to_proto(req.hi, out.export.hi)
        out.export.with_diff = req.with_diff
        if req.limit is not None:
            out.export.limit = req.limit
        _position_to(req.resume, out.export, "resume")
    elif isinstance(req, api.IncrementalScan):
        span_to_proto(req.span, out.incremental_scan.span)
        timestamp_to_proto(req.since, out.incremental_scan.since)
        if req.limit is not None:
            out.incremental_scan.limit = req.limit


def _decode_request(msg: pb.RequestUnion) -> api.Request:
    kind = msg.WhichOneof("value")
    if kind is None:
        raise InvalidArgumentError("a request in the batch is empty (no request type set)")
    body: Any = getattr(msg, kind)
    return _REQUEST_DECODERS[kind](body)


_REQUEST_DECODERS: dict[str, Callable[[Any], api.Request]] = {
    "get": lambda m: api.Get(m.key),
    "put": lambda m: api.Put(m.key, _value_from(m, "value")),
    "conditional_put": lambda m: api.ConditionalPut(
        m.key, _value_from(m, "value"), _value_from(m, "expected")
    ),
    "conditional_put_exists": lambda m: api.ConditionalPut(
        m.key, _value_from(m, "value"), None, exists=True
    ),
    "delete_range": lambda m: api.DeleteRange(span_from_proto(m.span)),
    "ingest": lambda m: api.Ingest(span_from_proto(m.span), tuple(m.keys), tuple(m.values)),
    "scan": lambda m: api.Scan(
        span_from_proto(m.span),
        m.limit if m.HasField("limit") else None,
        m.reverse,
        m.lock,
        m.nowait,
        m.skip_locked,
    ),
    "end_txn": lambda m: api.EndTxn(
        m.commit,
        tuple(span_from_proto(s) for s in m.lock_spans),
        timestamp_from_proto(m.deadline) if m.HasField("deadline") else None,
    ),
    "heartbeat_txn": lambda m: api.HeartbeatTxn(),
    "push_txn": lambda m: api.PushTxn(
        _meta_from(m.pushee),
        _push_type_from(m.push_type),
        timestamp_from_proto(m.push_to),
        m.pusher_priority,
        _txn_id(m.pusher_id) if m.pusher_id else None,
        _edges_from(m.dependents),
    ),
    "resolve_intent": lambda m: api.ResolveIntent(
        span_from_proto(m.span), _meta_from(m.txn), _status_from(m.status)
    ),
    "refresh_range": lambda m: api.RefreshRange(
        span_from_proto(m.span), timestamp_from_proto(m.from_ts)
    ),
    "split": lambda m: api.Split(m.key, m.automatic),
    "merge": lambda m: api.Merge(m.key, m.automatic),
    "range_lookup": lambda m: api.RangeLookup(m.key, m.prefetch),
    "relocate": lambda m: api.Relocate(m.key, m.node_id),
    "export": lambda m: api.Export(
        span_from_proto(m.span),
        timestamp_from_proto(m.lo),
        timestamp_from_proto(m.hi),
        m.with_diff,
        m.limit if m.HasField("limit") else None,
        _position_from(m, "resume"),
    ),
    "incremental_scan": lambda m: api.IncrementalScan(
        span_from_proto(m.span),
        timestamp_from_proto(m.since),
        m.limit if m.HasField("limit") else None,
    ),
}


def batch_request_to_proto(
    batch: api.BatchRequest, out: pb.BatchRequest | None = None
) -> pb.BatchRequest:
    """Encode ``batch`` into ``out`` (a new message when none; a stream's call
    encodes in place, sparing a copy)."""
    msg = pb.BatchRequest() if out is None else out
    header = batch.header
    msg.header.range_id = header.range_id
    msg.header.generation = header.generation
    if header.timestamp is not None:
        timestamp_to_proto(header.timestamp, msg.header.timestamp)
    if header.txn is not None:
        _txn_to(header.txn, msg.header.txn)
    if header.deadline is not None:
        timestamp_to_proto(header.deadline, msg.header.deadline)
    if header.lock_timeout_ms:
        msg.header.lock_timeout_ms = header.lock_timeout_ms
    for req in batch.requests:
        _encode_request(req, msg.requests.add())
    return msg


def batch_request_from_proto(msg: pb.BatchRequest) -> api.BatchRequest:
    h = msg.header
    header = api.Header(
        range_id=h.range_id,
        generation=h.generation,
        timestamp=timestamp_from_proto(h.timestamp) if h.HasField("timestamp") else None,
        txn=_txn_from(h.txn) if h.HasField("txn") else None,
        deadline=timestamp_from_proto(h.deadline) if h.HasField("deadline") else None,
        lock_timeout_ms=h.lock_timeout_ms,
    )
    return api.BatchRequest(header, tuple(map(_decode_request, msg.requests)))


# Responses.


def _encode_response(resp: api.Response, out: pb.ResponseUnion) -> None:
    if isinstance(resp, api.GetResponse):
        out.get.SetInParent()
        _value_to(resp.value, out.get, "value")
        if resp.ts is not None:
            timestamp_to_proto(resp.ts, out.get.ts)
    elif isinstance(resp, api.PutResponse):
        out.put.SetInParent()
    elif isinstance(resp, api.ConditionalPutResponse):
        out.conditional_put.SetInParent()
    elif isinstance(resp, api.DeleteRangeResponse):
        out.delete_range.SetInParent()
        out.delete_range.keys.extend(resp.keys)
    elif isinstance(resp, api.IngestResponse):
        out.ingest.written = resp.written
    elif isinstance(resp, api.ScanResponse):
        scan = out.scan
        scan.SetInParent()
        rows = resp.rows
        scan.keys.extend([kv.key for kv in rows])
        scan.values.extend([kv.value for kv in rows])
        scan.walls.extend([kv.ts.wall for kv in rows])
        scan.logicals.extend([kv.ts.logical for kv in rows])
        if resp.resume_key is not None:
            out.scan.resume_key = resp.resume_key
    elif isinstance(resp, api.EndTxnResponse):
        out.end_txn.status = _STATUS_TO[resp.status]
        out.end_txn.one_phase = resp.one_phase
    elif isinstance(resp, api.HeartbeatTxnResponse):
        _record_to(resp.record, out.heartbeat_txn.record)
    elif isinstance(resp, api.PushTxnResponse):
        _record_to(resp.record, out.push_txn.record)
        _edges_to(resp.dependents, out.push_txn.dependents)
    elif isinstance(resp, api.ResolveIntentResponse):
        out.resolve_intent.resolved = resp.resolved
    elif isinstance(resp, api.RefreshRangeResponse):
        out.refresh_range.SetInParent()
    elif isinstance(resp, api.SplitResponse):
        _desc_to(resp.left, out.split.left)
        _desc_to(resp.right, out.split.right)
    elif isinstance(resp, api.MergeResponse):
        _desc_to(resp.merged, out.merge.merged)
    elif isinstance(resp, api.RelocateResponse):
        _desc_to(resp.moved, out.relocate.moved)
    elif isinstance(resp, api.RangeLookupResponse):
        out.range_lookup.SetInParent()
        for desc in resp.descriptors:
            _desc_to(desc, out.range_lookup.descriptors.add())
        for ts in resp.closed_timestamps:
            timestamp_to_proto(ts, out.range_lookup.closed_timestamps.add())
    elif isinstance(resp, api.ExportResponse):
        out.export.SetInParent()
        for exported in resp.versions:
            version = out.export.versions.add()
            version.key = exported.key
            timestamp_to_proto(exported.ts, version.ts)
            _value_to(exported.value, version, "value")
            _value_to(exported.prev_value, version, "prev_value")
        _position_to(resp.resume, out.export, "resume")
    elif isinstance(resp, api.IncrementalScanResponse):
        changes = out.incremental_scan
        changes.SetInParent()
        changes.keys.extend(resp.keys)
        changes.values.extend([v or b"" for v in resp.values])
        changes.deleted.extend([v is None for v in resp.values])
        changes.walls.extend([ts.wall for ts in resp.timestamps])
        changes.logicals.extend([ts.logical for ts in resp.timestamps])
        changes.complete = resp.complete


def _changes_from(msg: pb.IncrementalScanResponse) -> api.IncrementalScanResponse:
    lengths = (
        len(msg.keys),
        len(msg.values),
        len(msg.deleted),
        len(msg.walls),
        len(msg.logicals),
    )
    if len(set(lengths)) > 1:
        raise InvalidArgumentError(
            "an incremental scan response's columns differ in length: keys, values, "
            f"deleted, walls, logicals = {lengths}"
        )
    try:
        timestamps = timestamps_of(msg.walls, msg.logicals)
    except InvalidArgumentError as exc:
        raise InvalidArgumentError(f"an incremental scan response holds {exc}") from None
    values = tuple(None if gone else v for v, gone in zip(msg.values, msg.deleted, strict=True))
    return api.IncrementalScanResponse(tuple(msg.keys), values, tuple(timestamps), msg.complete)


def _rows_from(msg: pb.ScanResponse) -> tuple[KeyValue, ...]:
    keys, values, walls, logicals = msg.keys, msg.values, msg.walls, msg.logicals
    lengths = (len(keys), len(values), len(walls), len(logicals))
    if len(set(lengths)) > 1:
        raise InvalidArgumentError(
            f"a scan response's columns differ in length: keys, values, walls, logicals = {lengths}"
        )
    try:
        timestamps = timestamps_of(walls, logicals)
    except InvalidArgumentError as exc:
        raise InvalidArgumentError(f"a scan response holds {exc}") from None
    return tuple(map(KeyValue, keys, values, timestamps))


_RESPONSE_DECODERS: dict[str, Callable[[Any], api.Response]] = {
    "get": lambda m: api.GetResponse(
        _value_from(m, "value"), timestamp_from_proto(m.ts) if m.HasField("ts") else None
    ),
    "put": lambda m: api.PutResponse(),
    "conditional_put": lambda m: api.ConditionalPutResponse(),
    "delete_range": lambda m: api.DeleteRangeResponse(tuple(m.keys)),
    "ingest": lambda m: api.IngestResponse(m.written),
    "scan": lambda m: api.ScanResponse(
        _rows_from(m), m.resume_key if m.HasField("resume_key") else None
    ),
    "end_txn": lambda m: api.EndTxnResponse(_status_from(m.status), m.one_phase),
    "heartbeat_txn": lambda m: api.HeartbeatTxnResponse(_record_from(m.record)),
    "push_txn": lambda m: api.PushTxnResponse(_record_from(m.record), _edges_from(m.dependents)),
    "resolve_intent": lambda m: api.ResolveIntentResponse(m.resolved),
    "refresh_range": lambda m: api.RefreshRangeResponse(),
    "split": lambda m: api.SplitResponse(_desc_from(m.left), _desc_from(m.right)),
    "merge": lambda m: api.MergeResponse(_desc_from(m.merged)),
    "relocate": lambda m: api.RelocateResponse(_desc_from(m.moved)),
    "range_lookup": lambda m: api.RangeLookupResponse(
        tuple(_desc_from(d) for d in m.descriptors),
        tuple(timestamp_from_proto(t) for t in m.closed_timestamps),
    ),
    "export": lambda m: api.ExportResponse(
        tuple(
            ExportedVersion(
                v.key,
                timestamp_from_proto(v.ts),
                _value_from(v, "value"),
                _value_from(v, "prev_value"),
            )
            for v in m.versions
        ),
        _position_from(m, "resume"),
    ),
    "incremental_scan": _changes_from,
}


def batch_response_to_proto(
    resp: api.BatchResponse, out: pb.BatchResponse | None = None
) -> pb.BatchResponse:
    msg = pb.BatchResponse() if out is None else out
    for r in resp.responses:
        _encode_response(r, msg.responses.add())
    timestamp_to_proto(resp.timestamp, msg.timestamp)
    if resp.txn is not None:
        _txn_to(resp.txn, msg.txn)
    return msg


def batch_response_from_proto(msg: pb.BatchResponse) -> api.BatchResponse:
    """The response, or raise the error the node reported."""
    if msg.HasField("error"):
        raise error_from_proto(msg.error)
    responses = []
    for r in msg.responses:
        kind = r.WhichOneof("value")
        if kind is None:
            raise InvalidArgumentError("the node sent an empty response")
        responses.append(_RESPONSE_DECODERS[kind](getattr(r, kind)))
    return api.BatchResponse(
        tuple(responses),
        timestamp_from_proto(msg.timestamp),
        _txn_from(msg.txn) if msg.HasField("txn") else None,
    )


# Errors.


def error_to_proto(exc: FeedKVError, out: pb.Error) -> None:
    # NB: named by its nearest class in feedkv.errors, which the other side rebuilds (a
    # layer's own subclass, such as the store's failed push, travels as its base)
    out.type = next(k.__name__ for k in type(exc).__mro__ if getattr(errors, k.__name__, None) is k)
    out.message = str(exc)
    if isinstance(exc, errors.RangeKeyMismatchError):
        for desc in exc.descriptors:
            _desc_to(desc, out.descriptors.add())
    if isinstance(exc, errors.RangeNotFoundError | errors.NotLeaseHolderError):
        out.range_id = exc.range_id
        if exc.descriptor is not None:
            _desc_to(exc.descriptor, out.descriptors.add())
    if isinstance(exc, errors.NotLeaseHolderError):
        out.lease_holder = exc.lease_holder
    if isinstance(exc, errors.TransactionRetryError):
        out.reason = exc.reason
        if exc.ts is not None:
            timestamp_to_proto(exc.ts, out.ts)
    if isinstance(exc, errors.LockNotAvailableError):
        out.key = exc.key
        out.reason = exc.reason
    if isinstance(exc, errors.ConditionFailedError):
        out.key = exc.key
        _value_to(exc.expected, out, "expected")
        _value_to(exc.actual, out, "actual")


def error_from_proto(msg: pb.Error) -> FeedKVError:
    """Rebuild the node's error as the same :mod:`feedkv.errors` class."""
    cls = getattr(errors, msg.type, None)
    if not (isinstance(cls, type) and issubclass(cls, FeedKVError)):
        return FeedKVError(f"{msg.type}: {msg.message}")
    exc = cls.__new__(cls)
    Exception.__init__(exc, msg.message)
    if isinstance(exc, errors.RangeKeyMismatchError):
        exc.descriptors = [_desc_from(d) for d in msg.descriptors]
    if isinstance(exc, errors.RangeNotFoundError | errors.NotLeaseHolderError):
        exc.range_id = msg.range_id
        exc.descriptor = _desc_from(msg.descriptors[0]) if msg.descriptors else None
    if isinstance(exc, errors.NotLeaseHolderError):
        exc.lease_holder = msg.lease_holder
    if isinstance(exc, errors.TransactionRetryError):
        exc.reason = msg.reason
        exc.ts = timestamp_from_proto(msg.ts) if msg.HasField("ts") else None
    if isinstance(exc, errors.LockNotAvailableError):
        exc.key = msg.key
        exc.reason = msg.reason or errors.LockNotAvailableError.NOWAIT
    if isinstance(exc, errors.ConditionFailedError):
        exc.key = msg.key
        exc.expected = _value_from(msg, "expected")
        exc.actual = _value_from(msg, "actual")
    return exc
