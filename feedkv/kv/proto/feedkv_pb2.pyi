from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TxnStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PENDING: _ClassVar[TxnStatus]
    COMMITTED: _ClassVar[TxnStatus]
    ABORTED: _ClassVar[TxnStatus]

class PushType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PUSH_TIMESTAMP: _ClassVar[PushType]
    PUSH_ABORT: _ClassVar[PushType]
    PUSH_TOUCH: _ClassVar[PushType]
    PUSH_QUERY: _ClassVar[PushType]
PENDING: TxnStatus
COMMITTED: TxnStatus
ABORTED: TxnStatus
PUSH_TIMESTAMP: PushType
PUSH_ABORT: PushType
PUSH_TOUCH: PushType
PUSH_QUERY: PushType

class Timestamp(_message.Message):
    __slots__ = ("wall", "logical")
    WALL_FIELD_NUMBER: _ClassVar[int]
    LOGICAL_FIELD_NUMBER: _ClassVar[int]
    wall: int
    logical: int
    def __init__(self, wall: _Optional[int] = ..., logical: _Optional[int] = ...) -> None: ...

class Span(_message.Message):
    __slots__ = ("start", "end")
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    start: bytes
    end: bytes
    def __init__(self, start: _Optional[bytes] = ..., end: _Optional[bytes] = ...) -> None: ...

class Value(_message.Message):
    __slots__ = ("bytes",)
    BYTES_FIELD_NUMBER: _ClassVar[int]
    bytes: bytes
    def __init__(self, bytes: _Optional[bytes] = ...) -> None: ...

class TxnMeta(_message.Message):
    __slots__ = ("id", "key", "epoch", "write_ts", "seq")
    ID_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    WRITE_TS_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    id: bytes
    key: bytes
    epoch: int
    write_ts: Timestamp
    seq: int
    def __init__(self, id: _Optional[bytes] = ..., key: _Optional[bytes] = ..., epoch: _Optional[int] = ..., write_ts: _Optional[_Union[Timestamp, _Mapping]] = ..., seq: _Optional[int] = ...) -> None: ...

class Transaction(_message.Message):
    __slots__ = ("id", "key", "epoch", "read_ts", "write_ts", "priority", "seq", "min_ts")
    ID_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    READ_TS_FIELD_NUMBER: _ClassVar[int]
    WRITE_TS_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    MIN_TS_FIELD_NUMBER: _ClassVar[int]
    id: bytes
    key: bytes
    epoch: int
    read_ts: Timestamp
    write_ts: Timestamp
    priority: int
    seq: int
    min_ts: Timestamp
    def __init__(self, id: _Optional[bytes] = ..., key: _Optional[bytes] = ..., epoch: _Optional[int] = ..., read_ts: _Optional[_Union[Timestamp, _Mapping]] = ..., write_ts: _Optional[_Union[Timestamp, _Mapping]] = ..., priority: _Optional[int] = ..., seq: _Optional[int] = ..., min_ts: _Optional[_Union[Timestamp, _Mapping]] = ...) -> None: ...

class TxnRecord(_message.Message):
    __slots__ = ("meta", "status", "priority", "last_active_ns")
    META_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    LAST_ACTIVE_NS_FIELD_NUMBER: _ClassVar[int]
    meta: TxnMeta
    status: TxnStatus
    priority: int
    last_active_ns: int
    def __init__(self, meta: _Optional[_Union[TxnMeta, _Mapping]] = ..., status: _Optional[_Union[TxnStatus, str]] = ..., priority: _Optional[int] = ..., last_active_ns: _Optional[int] = ...) -> None: ...

class RangeDescriptor(_message.Message):
    __slots__ = ("range_id", "span", "generation", "sticky", "replicas")
    RANGE_ID_FIELD_NUMBER: _ClassVar[int]
    SPAN_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    STICKY_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    range_id: int
    span: Span
    generation: int
    sticky: bool
    replicas: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, range_id: _Optional[int] = ..., span: _Optional[_Union[Span, _Mapping]] = ..., generation: _Optional[int] = ..., sticky: _Optional[bool] = ..., replicas: _Optional[_Iterable[int]] = ...) -> None: ...

class GetRequest(_message.Message):
    __slots__ = ("key",)
    KEY_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    def __init__(self, key: _Optional[bytes] = ...) -> None: ...

class PutRequest(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    value: Value
    def __init__(self, key: _Optional[bytes] = ..., value: _Optional[_Union[Value, _Mapping]] = ...) -> None: ...

class ConditionalPutRequest(_message.Message):
    __slots__ = ("key", "value", "expected")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    value: Value
    expected: Value
    def __init__(self, key: _Optional[bytes] = ..., value: _Optional[_Union[Value, _Mapping]] = ..., expected: _Optional[_Union[Value, _Mapping]] = ...) -> None: ...

class DeleteRangeRequest(_message.Message):
    __slots__ = ("span",)
    SPAN_FIELD_NUMBER: _ClassVar[int]
    span: Span
    def __init__(self, span: _Optional[_Union[Span, _Mapping]] = ...) -> None: ...

class IngestRequest(_message.Message):
    __slots__ = ("span", "keys", "values")
    SPAN_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    span: Span
    keys: _containers.RepeatedScalarFieldContainer[bytes]
    values: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, span: _Optional[_Union[Span, _Mapping]] = ..., keys: _Optional[_Iterable[bytes]] = ..., values: _Optional[_Iterable[bytes]] = ...) -> None: ...

class ScanRequest(_message.Message):
    __slots__ = ("span", "limit", "reverse", "lock", "nowait", "skip_locked")
    SPAN_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    REVERSE_FIELD_NUMBER: _ClassVar[int]
    LOCK_FIELD_NUMBER: _ClassVar[int]
    NOWAIT_FIELD_NUMBER: _ClassVar[int]
    SKIP_LOCKED_FIELD_NUMBER: _ClassVar[int]
    span: Span
    limit: int
    reverse: bool
    lock: bool
    nowait: bool
    skip_locked: bool
    def __init__(self, span: _Optional[_Union[Span, _Mapping]] = ..., limit: _Optional[int] = ..., reverse: _Optional[bool] = ..., lock: _Optional[bool] = ..., nowait: _Optional[bool] = ..., skip_locked: _Optional[bool] = ...) -> None: ...

class EndTxnRequest(_message.Message):
    __slots__ = ("commit", "lock_spans", "deadline")
    COMMIT_FIELD_NUMBER: _ClassVar[int]
    LOCK_SPANS_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    commit: bool
    lock_spans: _containers.RepeatedCompositeFieldContainer[Span]
    deadline: Timestamp
    def __init__(self, commit: _Optional[bool] = ..., lock_spans: _Optional[_Iterable[_Union[Span, _Mapping]]] = ..., deadline: _Optional[_Union[Timestamp, _Mapping]] = ...) -> None: ...

class HeartbeatTxnRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PushTxnRequest(_message.Message):
    __slots__ = ("pushee", "push_type", "push_to", "pusher_priority", "pusher_id", "dependents")
    PUSHEE_FIELD_NUMBER: _ClassVar[int]
    PUSH_TYPE_FIELD_NUMBER: _ClassVar[int]
    PUSH_TO_FIELD_NUMBER: _ClassVar[int]
    PUSHER_PRIORITY_FIELD_NUMBER: _ClassVar[int]
    PUSHER_ID_FIELD_NUMBER: _ClassVar[int]
    DEPENDENTS_FIELD_NUMBER: _ClassVar[int]
    pushee: TxnMeta
    push_type: PushType
    push_to: Timestamp
    pusher_priority: int
    pusher_id: bytes
    dependents: _containers.RepeatedCompositeFieldContainer[WaitEdge]
    def __init__(self, pushee: _Optional[_Union[TxnMeta, _Mapping]] = ..., push_type: _Optional[_Union[PushType, str]] = ..., push_to: _Optional[_Union[Timestamp, _Mapping]] = ..., pusher_priority: _Optional[int] = ..., pusher_id: _Optional[bytes] = ..., dependents: _Optional[_Iterable[_Union[WaitEdge, _Mapping]]] = ...) -> None: ...

class WaitEdge(_message.Message):
    __slots__ = ("waiter", "blocker", "priority")
    WAITER_FIELD_NUMBER: _ClassVar[int]
    BLOCKER_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    waiter: bytes
    blocker: bytes
    priority: int
    def __init__(self, waiter: _Optional[bytes] = ..., blocker: _Optional[bytes] = ..., priority: _Optional[int] = ...) -> None: ...

class ResolveIntentRequest(_message.Message):
    __slots__ = ("span", "txn", "status")
    SPAN_FIELD_NUMBER: _ClassVar[int]
    TXN_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    span: Span
    txn: TxnMeta
    status: TxnStatus
    def __init__(self, span: _Optional[_Union[Span, _Mapping]] = ..., txn: _Optional[_Union[TxnMeta, _Mapping]] = ..., status: _Optional[_Union[TxnStatus, str]] = ...) -> None: ...

class RefreshRangeRequest(_message.Message):
    __slots__ = ("span", "from_ts")
    SPAN_FIELD_NUMBER: _ClassVar[int]
    FROM_TS_FIELD_NUMBER: _ClassVar[int]
    span: Span
    from_ts: Timestamp
    def __init__(self, span: _Optional[_Union[Span, _Mapping]] = ..., from_ts: _Optional[_Union[Timestamp, _Mapping]] = ...) -> None: ...

class SplitRequest(_message.Message):
    __slots__ = ("key", "automatic")
    KEY_FIELD_NUMBER: _ClassVar[int]
    AUTOMATIC_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    automatic: bool
    def __init__(self, key: _Optional[bytes] = ..., automatic: _Optional[bool] = ...) -> None: ...

class RelocateRequest(_message.Message):
    __slots__ = ("key", "node_id")
    KEY_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    node_id: int
    def __init__(self, key: _Optional[bytes] = ..., node_id: _Optional[int] = ...) -> None: ...

class MergeRequest(_message.Message):
    __slots__ = ("key", "automatic")
    KEY_FIELD_NUMBER: _ClassVar[int]
    AUTOMATIC_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    automatic: bool
    def __init__(self, key: _Optional[bytes] = ..., automatic: _Optional[bool] = ...) -> None: ...

class RangeLookupRequest(_message.Message):
    __slots__ = ("key", "prefetch")
    KEY_FIELD_NUMBER: _ClassVar[int]
    PREFETCH_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    prefetch: int
    def __init__(self, key: _Optional[bytes] = ..., prefetch: _Optional[int] = ...) -> None: ...

class ExportRequest(_message.Message):
    __slots__ = ("span", "lo", "hi", "with_diff", "limit", "resume")
    SPAN_FIELD_NUMBER: _ClassVar[int]
    LO_FIELD_NUMBER: _ClassVar[int]
    HI_FIELD_NUMBER: _ClassVar[int]
    WITH_DIFF_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    RESUME_FIELD_NUMBER: _ClassVar[int]
    span: Span
    lo: Timestamp
    hi: Timestamp
    with_diff: bool
    limit: int
    resume: ExportPosition
    def __init__(self, span: _Optional[_Union[Span, _Mapping]] = ..., lo: _Optional[_Union[Timestamp, _Mapping]] = ..., hi: _Optional[_Union[Timestamp, _Mapping]] = ..., with_diff: _Optional[bool] = ..., limit: _Optional[int] = ..., resume: _Optional[_Union[ExportPosition, _Mapping]] = ...) -> None: ...

class ExportPosition(_message.Message):
    __slots__ = ("ts", "key")
    TS_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    ts: Timestamp
    key: bytes
    def __init__(self, ts: _Optional[_Union[Timestamp, _Mapping]] = ..., key: _Optional[bytes] = ...) -> None: ...

class IncrementalScanRequest(_message.Message):
    __slots__ = ("span", "since", "limit")
    SPAN_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    span: Span
    since: Timestamp
    limit: int
    def __init__(self, span: _Optional[_Union[Span, _Mapping]] = ..., since: _Optional[_Union[Timestamp, _Mapping]] = ..., limit: _Optional[int] = ...) -> None: ...

class RequestUnion(_message.Message):
    __slots__ = ("get", "put", "conditional_put", "delete_range", "scan", "end_txn", "heartbeat_txn", "push_txn", "resolve_intent", "refresh_range", "split", "merge", "range_lookup", "export", "conditional_put_exists", "relocate", "ingest", "incremental_scan")
    GET_FIELD_NUMBER: _ClassVar[int]
    PUT_FIELD_NUMBER: _ClassVar[int]
    CONDITIONAL_PUT_FIELD_NUMBER: _ClassVar[int]
    DELETE_RANGE_FIELD_NUMBER: _ClassVar[int]
    SCAN_FIELD_NUMBER: _ClassVar[int]
    END_TXN_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_TXN_FIELD_NUMBER: _ClassVar[int]
    PUSH_TXN_FIELD_NUMBER: _ClassVar[int]
    RESOLVE_INTENT_FIELD_NUMBER: _ClassVar[int]
    REFRESH_RANGE_FIELD_NUMBER: _ClassVar[int]
    SPLIT_FIELD_NUMBER: _ClassVar[int]
    MERGE_FIELD_NUMBER: _ClassVar[int]
    RANGE_LOOKUP_FIELD_NUMBER: _ClassVar[int]
    EXPORT_FIELD_NUMBER: _ClassVar[int]
    CONDITIONAL_PUT_EXISTS_FIELD_NUMBER: _ClassVar[int]
    RELOCATE_FIELD_NUMBER: _ClassVar[int]
    INGEST_FIELD_NUMBER: _ClassVar[int]
    INCREMENTAL_SCAN_FIELD_NUMBER: _ClassVar[int]
    get: GetRequest
    put: PutRequest
    conditional_put: ConditionalPutRequest
    delete_range: DeleteRangeRequest
    scan: ScanRequest
    end_txn: EndTxnRequest
    heartbeat_txn: HeartbeatTxnRequest
    push_txn: PushTxnRequest
    resolve_intent: ResolveIntentRequest
    refresh_range: RefreshRangeRequest
    split: SplitRequest
    merge: MergeRequest
    range_lookup: RangeLookupRequest
    export: ExportRequest
    conditional_put_exists: ConditionalPutRequest
    relocate: RelocateRequest
    ingest: IngestRequest
    incremental_scan: IncrementalScanRequest
    def __init__(self, get: _Optional[_Union[GetRequest, _Mapping]] = ..., put: _Optional[_Union[PutRequest, _Mapping]] = ..., conditional_put: _Optional[_Union[ConditionalPutRequest, _Mapping]] = ..., delete_range: _Optional[_Union[DeleteRangeRequest, _Mapping]] = ..., scan: _Optional[_Union[ScanRequest, _Mapping]] = ..., end_txn: _Optional[_Union[EndTxnRequest, _Mapping]] = ..., heartbeat_txn: _Optional[_Union[HeartbeatTxnRequest, _Mapping]] = ..., push_txn: _Optional[_Union[PushTxnRequest, _Mapping]] = ..., resolve_intent: _Optional[_Union[ResolveIntentRequest, _Mapping]] = ..., refresh_range: _Optional[_Union[RefreshRangeRequest, _Mapping]] = ..., split: _Optional[_Union[SplitRequest, _Mapping]] = ..., merge: _Optional[_Union[MergeRequest, _Mapping]] = ..., range_lookup: _Optional[_Union[RangeLookupRequest, _Mapping]] = ..., export: _Optional[_Union[ExportRequest, _Mapping]] = ..., conditional_put_exists: _Optional[_Union[ConditionalPutRequest, _Mapping]] = ..., relocate: _Optional[_Union[RelocateRequest, _Mapping]] = ..., ingest: _Optional[_Union[IngestRequest, _Mapping]] = ..., incremental_scan: _Optional[_Union[IncrementalScanRequest, _Mapping]] = ...) -> None: ...

class Header(_message.Message):
    __slots__ = ("range_id", "generation", "timestamp", "txn", "deadline", "lock_timeout_ms")
    RANGE_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    TXN_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    LOCK_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    range_id: int
    generation: int
    timestamp: Timestamp
    txn: Transaction
    deadline: Timestamp
    lock_timeout_ms: int
    def __init__(self, range_id: _Optional[int] = ..., generation: _Optional[int] = ..., timestamp: _Optional[_Union[Timestamp, _Mapping]] = ..., txn: _Optional[_Union[Transaction, _Mapping]] = ..., deadline: _Optional[_Union[Timestamp, _Mapping]] = ..., lock_timeout_ms: _Optional[int] = ...) -> None: ...

class BatchRequest(_message.Message):
    __slots__ = ("header", "requests", "cancel_token")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    CANCEL_TOKEN_FIELD_NUMBER: _ClassVar[int]
    header: Header
    requests: _containers.RepeatedCompositeFieldContainer[RequestUnion]
    cancel_token: bytes
    def __init__(self, header: _Optional[_Union[Header, _Mapping]] = ..., requests: _Optional[_Iterable[_Union[RequestUnion, _Mapping]]] = ..., cancel_token: _Optional[bytes] = ...) -> None: ...

class GetResponse(_message.Message):
    __slots__ = ("value", "ts")
    VALUE_FIELD_NUMBER: _ClassVar[int]
    TS_FIELD_NUMBER: _ClassVar[int]
    value: Value
    ts: Timestamp
    def __init__(self, value: _Optional[_Union[Value, _Mapping]] = ..., ts: _Optional[_Union[Timestamp, _Mapping]] = ...) -> None: ...

class PutResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ConditionalPutResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DeleteRangeResponse(_message.Message):
    __slots__ = ("keys",)
    KEYS_FIELD_NUMBER: _ClassVar[int]
    keys: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, keys: _Optional[_Iterable[bytes]] = ...) -> None: ...

class IngestResponse(_message.Message):
    __slots__ = ("written",)
    WRITTEN_FIELD_NUMBER: _ClassVar[int]
    written: int
    def __init__(self, written: _Optional[int] = ...) -> None: ...

class ScanResponse(_message.Message):
    __slots__ = ("resume_key", "keys", "values", "walls", "logicals")
    RESUME_KEY_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    WALLS_FIELD_NUMBER: _ClassVar[int]
    LOGICALS_FIELD_NUMBER: _ClassVar[int]
    resume_key: bytes
    keys: _containers.RepeatedScalarFieldContainer[bytes]
    values: _containers.RepeatedScalarFieldContainer[bytes]
    walls: _containers.RepeatedScalarFieldContainer[int]
    logicals: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, resume_key: _Optional[bytes] = ..., keys: _Optional[_Iterable[bytes]] = ..., values: _Optional[_Iterable[bytes]] = ..., walls: _Optional[_Iterable[int]] = ..., logicals: _Optional[_Iterable[int]] = ...) -> None: ...

class IncrementalScanResponse(_message.Message):
    __slots__ = ("keys", "values", "deleted", "walls", "logicals", "complete")
    KEYS_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    WALLS_FIELD_NUMBER: _ClassVar[int]
    LOGICALS_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_FIELD_NUMBER: _ClassVar[int]
    keys: _containers.RepeatedScalarFieldContainer[bytes]
    values: _containers.RepeatedScalarFieldContainer[bytes]
    deleted: _containers.RepeatedScalarFieldContainer[bool]
    walls: _containers.RepeatedScalarFieldContainer[int]
    logicals: _containers.RepeatedScalarFieldContainer[int]
    complete: bool
    def __init__(self, keys: _Optional[_Iterable[bytes]] = ..., values: _Optional[_Iterable[bytes]] = ..., deleted: _Optional[_Iterable[bool]] = ..., walls: _Optional[_Iterable[int]] = ..., logicals: _Optional[_Iterable[int]] = ..., complete: _Optional[bool] = ...) -> None: ...

class EndTxnResponse(_message.Message):
    __slots__ = ("status", "one_phase")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ONE_PHASE_FIELD_NUMBER: _ClassVar[int]
    status: TxnStatus
    one_phase: bool
    def __init__(self, status: _Optional[_Union[TxnStatus, str]] = ..., one_phase: _Optional[bool] = ...) -> None: ...

class HeartbeatTxnResponse(_message.Message):
    __slots__ = ("record",)
    RECORD_FIELD_NUMBER: _ClassVar[int]
    record: TxnRecord
    def __init__(self, record: _Optional[_Union[TxnRecord, _Mapping]] = ...) -> None: ...

class PushTxnResponse(_message.Message):
    __slots__ = ("record", "dependents")
    RECORD_FIELD_NUMBER: _ClassVar[int]
    DEPENDENTS_FIELD_NUMBER: _ClassVar[int]
    record: TxnRecord
    dependents: _containers.RepeatedCompositeFieldContainer[WaitEdge]
    def __init__(self, record: _Optional[_Union[TxnRecord, _Mapping]] = ..., dependents: _Optional[_Iterable[_Union[WaitEdge, _Mapping]]] = ...) -> None: ...

class ResolveIntentResponse(_message.Message):
    __slots__ = ("resolved",)
    RESOLVED_FIELD_NUMBER: _ClassVar[int]
    resolved: int
    def __init__(self, resolved: _Optional[int] = ...) -> None: ...

class RefreshRangeResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SplitResponse(_message.Message):
    __slots__ = ("left", "right")
    LEFT_FIELD_NUMBER: _ClassVar[int]
    RIGHT_FIELD_NUMBER: _ClassVar[int]
    left: RangeDescriptor
    right: RangeDescriptor
    def __init__(self, left: _Optional[_Union[RangeDescriptor, _Mapping]] = ..., right: _Optional[_Union[RangeDescriptor, _Mapping]] = ...) -> None: ...

class MergeResponse(_message.Message):
    __slots__ = ("merged",)
    MERGED_FIELD_NUMBER: _ClassVar[int]
    merged: RangeDescriptor
    def __init__(self, merged: _Optional[_Union[RangeDescriptor, _Mapping]] = ...) -> None: ...

class RelocateResponse(_message.Message):
    __slots__ = ("moved",)
    MOVED_FIELD_NUMBER: _ClassVar[int]
    moved: RangeDescriptor
    def __init__(self, moved: _Optional[_Union[RangeDescriptor, _Mapping]] = ...) -> None: ...

class ExportedVersion(_message.Message):
    __slots__ = ("key", "ts", "value", "prev_value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    TS_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    PREV_VALUE_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    ts: Timestamp
    value: Value
    prev_value: Value
    def __init__(self, key: _Optional[bytes] = ..., ts: _Optional[_Union[Timestamp, _Mapping]] = ..., value: _Optional[_Union[Value, _Mapping]] = ..., prev_value: _Optional[_Union[Value, _Mapping]] = ...) -> None: ...

class ExportResponse(_message.Message):
    __slots__ = ("versions", "resume")
    VERSIONS_FIELD_NUMBER: _ClassVar[int]
    RESUME_FIELD_NUMBER: _ClassVar[int]
    versions: _containers.RepeatedCompositeFieldContainer[ExportedVersion]
    resume: ExportPosition
    def __init__(self, versions: _Optional[_Iterable[_Union[ExportedVersion, _Mapping]]] = ..., resume: _Optional[_Union[ExportPosition, _Mapping]] = ...) -> None: ...

class RangeLookupResponse(_message.Message):
    __slots__ = ("descriptors", "closed_timestamps")
    DESCRIPTORS_FIELD_NUMBER: _ClassVar[int]
    CLOSED_TIMESTAMPS_FIELD_NUMBER: _ClassVar[int]
    descriptors: _containers.RepeatedCompositeFieldContainer[RangeDescriptor]
    closed_timestamps: _containers.RepeatedCompositeFieldContainer[Timestamp]
    def __init__(self, descriptors: _Optional[_Iterable[_Union[RangeDescriptor, _Mapping]]] = ..., closed_timestamps: _Optional[_Iterable[_Union[Timestamp, _Mapping]]] = ...) -> None: ...

class ResponseUnion(_message.Message):
    __slots__ = ("get", "put", "conditional_put", "delete_range", "scan", "end_txn", "heartbeat_txn", "push_txn", "resolve_intent", "refresh_range", "split", "merge", "range_lookup", "export", "relocate", "ingest", "incremental_scan")
    GET_FIELD_NUMBER: _ClassVar[int]
    PUT_FIELD_NUMBER: _ClassVar[int]
    CONDITIONAL_PUT_FIELD_NUMBER: _ClassVar[int]
    DELETE_RANGE_FIELD_NUMBER: _ClassVar[int]
    SCAN_FIELD_NUMBER: _ClassVar[int]
    END_TXN_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_TXN_FIELD_NUMBER: _ClassVar[int]
    PUSH_TXN_FIELD_NUMBER: _ClassVar[int]
    RESOLVE_INTENT_FIELD_NUMBER: _ClassVar[int]
    REFRESH_RANGE_FIELD_NUMBER: _ClassVar[int]
    SPLIT_FIELD_NUMBER: _ClassVar[int]
    MERGE_FIELD_NUMBER: _ClassVar[int]
    RANGE_LOOKUP_FIELD_NUMBER: _ClassVar[int]
    EXPORT_FIELD_NUMBER: _ClassVar[int]
    RELOCATE_FIELD_NUMBER: _ClassVar[int]
    INGEST_FIELD_NUMBER: _ClassVar[int]
    INCREMENTAL_SCAN_FIELD_NUMBER: _ClassVar[int]
    get: GetResponse
    put: PutResponse
    conditional_put: ConditionalPutResponse
    delete_range: DeleteRangeResponse
    scan: ScanResponse
    end_txn: EndTxnResponse
    heartbeat_txn: HeartbeatTxnResponse
    push_txn: PushTxnResponse
    resolve_intent: ResolveIntentResponse
    refresh_range: RefreshRangeResponse
    split: SplitResponse
    merge: MergeResponse
    range_lookup: RangeLookupResponse
    export: ExportResponse
    relocate: RelocateResponse
    ingest: IngestResponse
    incremental_scan: IncrementalScanResponse
    def __init__(self, get: _Optional[_Union[GetResponse, _Mapping]] = ..., put: _Optional[_Union[PutResponse, _Mapping]] = ..., conditional_put: _Optional[_Union[ConditionalPutResponse, _Mapping]] = ..., delete_range: _Optional[_Union[DeleteRangeResponse, _Mapping]] = ..., scan: _Optional[_Union[ScanResponse, _Mapping]] = ..., end_txn: _Optional[_Union[EndTxnResponse, _Mapping]] = ..., heartbeat_txn: _Optional[_Union[HeartbeatTxnResponse, _Mapping]] = ..., push_txn: _Optional[_Union[PushTxnResponse, _Mapping]] = ..., resolve_intent: _Optional[_Union[ResolveIntentResponse, _Mapping]] = ..., refresh_range: _Optional[_Union[RefreshRangeResponse, _Mapping]] = ..., split: _Optional[_Union[SplitResponse, _Mapping]] = ..., merge: _Optional[_Union[MergeResponse, _Mapping]] = ..., range_lookup: _Optional[_Union[RangeLookupResponse, _Mapping]] = ..., export: _Optional[_Union[ExportResponse, _Mapping]] = ..., relocate: _Optional[_Union[RelocateResponse, _Mapping]] = ..., ingest: _Optional[_Union[IngestResponse, _Mapping]] = ..., incremental_scan: _Optional[_Union[IncrementalScanResponse, _Mapping]] = ...) -> None: ...

class Error(_message.Message):
    __slots__ = ("type", "message", "descriptors", "range_id", "reason", "ts", "key", "expected", "actual", "lease_holder")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTORS_FIELD_NUMBER: _ClassVar[int]
    RANGE_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    TS_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_FIELD_NUMBER: _ClassVar[int]
    ACTUAL_FIELD_NUMBER: _ClassVar[int]
    LEASE_HOLDER_FIELD_NUMBER: _ClassVar[int]
    type: str
    message: str
    descriptors: _containers.RepeatedCompositeFieldContainer[RangeDescriptor]
    range_id: int
    reason: str
    ts: Timestamp
    key: bytes
    expected: Value
    actual: Value
    lease_holder: int
    def __init__(self, type: _Optional[str] = ..., message: _Optional[str] = ..., descriptors: _Optional[_Iterable[_Union[RangeDescriptor, _Mapping]]] = ..., range_id: _Optional[int] = ..., reason: _Optional[str] = ..., ts: _Optional[_Union[Timestamp, _Mapping]] = ..., key: _Optional[bytes] = ..., expected: _Optional[_Union[Value, _Mapping]] = ..., actual: _Optional[_Union[Value, _Mapping]] = ..., lease_holder: _Optional[int] = ...) -> None: ...

class BatchResponse(_message.Message):
    __slots__ = ("responses", "timestamp", "txn", "error")
    RESPONSES_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    TXN_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    responses: _containers.RepeatedCompositeFieldContainer[ResponseUnion]
    timestamp: Timestamp
    txn: Transaction
    error: Error
    def __init__(self, responses: _Optional[_Iterable[_Union[ResponseUnion, _Mapping]]] = ..., timestamp: _Optional[_Union[Timestamp, _Mapping]] = ..., txn: _Optional[_Union[Transaction, _Mapping]] = ..., error: _Optional[_Union[Error, _Mapping]] = ...) -> None: ...

class BatchCall(_message.Message):
    __slots__ = ("id", "request")
    ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    id: int
    request: BatchRequest
    def __init__(self, id: _Optional[int] = ..., request: _Optional[_Union[BatchRequest, _Mapping]] = ...) -> None: ...

class BatchCalls(_message.Message):
    __slots__ = ("calls",)
    CALLS_FIELD_NUMBER: _ClassVar[int]
    calls: _containers.RepeatedCompositeFieldContainer[BatchCall]
    def __init__(self, calls: _Optional[_Iterable[_Union[BatchCall, _Mapping]]] = ...) -> None: ...

class BatchReply(_message.Message):
    __slots__ = ("id", "response")
    ID_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    id: int
    response: BatchResponse
    def __init__(self, id: _Optional[int] = ..., response: _Optional[_Union[BatchResponse, _Mapping]] = ...) -> None: ...

class BatchReplies(_message.Message):
    __slots__ = ("replies",)
    REPLIES_FIELD_NUMBER: _ClassVar[int]
    replies: _containers.RepeatedCompositeFieldContainer[BatchReply]
    def __init__(self, replies: _Optional[_Iterable[_Union[BatchReply, _Mapping]]] = ...) -> None: ...

class CancelCallRequest(_message.Message):
    __slots__ = ("token",)
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    token: bytes
    def __init__(self, token: _Optional[bytes] = ...) -> None: ...

class CancelCallResponse(_message.Message):
    __slots__ = ("running",)
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    running: bool
    def __init__(self, running: _Optional[bool] = ...) -> None: ...

class NowRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class NowResponse(_message.Message):
    __slots__ = ("now",)
    NOW_FIELD_NUMBER: _ClassVar[int]
    now: Timestamp
    def __init__(self, now: _Optional[_Union[Timestamp, _Mapping]] = ...) -> None: ...

class RangeFeedRegister(_message.Message):
    __slots__ = ("tag", "span", "start_ts", "with_diff", "checkpoints_only", "timestamp_runs", "timestamp_order")
    TAG_FIELD_NUMBER: _ClassVar[int]
    SPAN_FIELD_NUMBER: _ClassVar[int]
    START_TS_FIELD_NUMBER: _ClassVar[int]
    WITH_DIFF_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINTS_ONLY_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_RUNS_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_ORDER_FIELD_NUMBER: _ClassVar[int]
    tag: int
    span: Span
    start_ts: Timestamp
    with_diff: bool
    checkpoints_only: bool
    timestamp_runs: bool
    timestamp_order: bool
    def __init__(self, tag: _Optional[int] = ..., span: _Optional[_Union[Span, _Mapping]] = ..., start_ts: _Optional[_Union[Timestamp, _Mapping]] = ..., with_diff: _Optional[bool] = ..., checkpoints_only: _Optional[bool] = ..., timestamp_runs: _Optional[bool] = ..., timestamp_order: _Optional[bool] = ...) -> None: ...

class RangeFeedUnregister(_message.Message):
    __slots__ = ("tag",)
    TAG_FIELD_NUMBER: _ClassVar[int]
    tag: int
    def __init__(self, tag: _Optional[int] = ...) -> None: ...

class RangeFeedRequest(_message.Message):
    __slots__ = ("register", "unregister")
    REGISTER_FIELD_NUMBER: _ClassVar[int]
    UNREGISTER_FIELD_NUMBER: _ClassVar[int]
    register: RangeFeedRegister
    unregister: RangeFeedUnregister
    def __init__(self, register: _Optional[_Union[RangeFeedRegister, _Mapping]] = ..., unregister: _Optional[_Union[RangeFeedUnregister, _Mapping]] = ...) -> None: ...

class RangeFeedCheckpoint(_message.Message):
    __slots__ = ("span", "ts")
    SPAN_FIELD_NUMBER: _ClassVar[int]
    TS_FIELD_NUMBER: _ClassVar[int]
    span: Span
    ts: Timestamp
    def __init__(self, span: _Optional[_Union[Span, _Mapping]] = ..., ts: _Optional[_Union[Timestamp, _Mapping]] = ...) -> None: ...

class RangeFeedError(_message.Message):
    __slots__ = ("reason", "message", "threshold")
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    reason: str
    message: str
    threshold: Timestamp
    def __init__(self, reason: _Optional[str] = ..., message: _Optional[str] = ..., threshold: _Optional[_Union[Timestamp, _Mapping]] = ...) -> None: ...

class RangeFeedValues(_message.Message):
    __slots__ = ("tags", "keys", "values", "deleted", "walls", "logicals", "prev_values", "no_prev", "max_ts", "ts_runs")
    TAGS_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    WALLS_FIELD_NUMBER: _ClassVar[int]
    LOGICALS_FIELD_NUMBER: _ClassVar[int]
    PREV_VALUES_FIELD_NUMBER: _ClassVar[int]
    NO_PREV_FIELD_NUMBER: _ClassVar[int]
    MAX_TS_FIELD_NUMBER: _ClassVar[int]
    TS_RUNS_FIELD_NUMBER: _ClassVar[int]
    tags: _containers.RepeatedScalarFieldContainer[int]
    keys: _containers.RepeatedScalarFieldContainer[bytes]
    values: _containers.RepeatedScalarFieldContainer[bytes]
    deleted: _containers.RepeatedScalarFieldContainer[int]
    walls: _containers.RepeatedScalarFieldContainer[int]
    logicals: _containers.RepeatedScalarFieldContainer[int]
    prev_values: _containers.RepeatedScalarFieldContainer[bytes]
    no_prev: _containers.RepeatedScalarFieldContainer[int]
    max_ts: Timestamp
    ts_runs: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, tags: _Optional[_Iterable[int]] = ..., keys: _Optional[_Iterable[bytes]] = ..., values: _Optional[_Iterable[bytes]] = ..., deleted: _Optional[_Iterable[int]] = ..., walls: _Optional[_Iterable[int]] = ..., logicals: _Optional[_Iterable[int]] = ..., prev_values: _Optional[_Iterable[bytes]] = ..., no_prev: _Optional[_Iterable[int]] = ..., max_ts: _Optional[_Union[Timestamp, _Mapping]] = ..., ts_runs: _Optional[_Iterable[int]] = ...) -> None: ...

class RangeFeedEvent(_message.Message):
    __slots__ = ("tag", "checkpoint", "error", "values")
    TAG_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    tag: int
    checkpoint: RangeFeedCheckpoint
    error: RangeFeedError
    values: RangeFeedValues
    def __init__(self, tag: _Optional[int] = ..., checkpoint: _Optional[_Union[RangeFeedCheckpoint, _Mapping]] = ..., error: _Optional[_Union[RangeFeedError, _Mapping]] = ..., values: _Optional[_Union[RangeFeedValues, _Mapping]] = ...) -> None: ...

class RangeFeedEvents(_message.Message):
    __slots__ = ("events",)
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[RangeFeedEvent]
    def __init__(self, events: _Optional[_Iterable[_Union[RangeFeedEvent, _Mapping]]] = ...) -> None: ...
