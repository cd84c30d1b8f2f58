import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Op(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OP_UNSPECIFIED: _ClassVar[Op]
    OP_CREATE: _ClassVar[Op]
    OP_UPDATE: _ClassVar[Op]
    OP_DELETE: _ClassVar[Op]
OP_UNSPECIFIED: Op
OP_CREATE: Op
OP_UPDATE: Op
OP_DELETE: Op

class MessageBatch(_message.Message):
    __slots__ = ("payload",)
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    payload: _containers.RepeatedCompositeFieldContainer[Message]
    def __init__(self, payload: _Optional[_Iterable[_Union[Message, _Mapping]]] = ...) -> None: ...

class Message(_message.Message):
    __slots__ = ("wrapped", "bare", "enriched", "resolved", "bareResolved")
    WRAPPED_FIELD_NUMBER: _ClassVar[int]
    BARE_FIELD_NUMBER: _ClassVar[int]
    ENRICHED_FIELD_NUMBER: _ClassVar[int]
    RESOLVED_FIELD_NUMBER: _ClassVar[int]
    BARERESOLVED_FIELD_NUMBER: _ClassVar[int]
    wrapped: WrappedEnvelope
    bare: BareEnvelope
    enriched: EnrichedEnvelope
    resolved: Resolved
    bareResolved: BareResolved
    def __init__(self, wrapped: _Optional[_Union[WrappedEnvelope, _Mapping]] = ..., bare: _Optional[_Union[BareEnvelope, _Mapping]] = ..., enriched: _Optional[_Union[EnrichedEnvelope, _Mapping]] = ..., resolved: _Optional[_Union[Resolved, _Mapping]] = ..., bareResolved: _Optional[_Union[BareResolved, _Mapping]] = ...) -> None: ...

class WrappedEnvelope(_message.Message):
    __slots__ = ("after", "before", "updated", "mvcc_timestamp", "key", "topic")
    AFTER_FIELD_NUMBER: _ClassVar[int]
    BEFORE_FIELD_NUMBER: _ClassVar[int]
    UPDATED_FIELD_NUMBER: _ClassVar[int]
    MVCC_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    after: Record
    before: Record
    updated: str
    mvcc_timestamp: str
    key: Key
    topic: str
    def __init__(self, after: _Optional[_Union[Record, _Mapping]] = ..., before: _Optional[_Union[Record, _Mapping]] = ..., updated: _Optional[str] = ..., mvcc_timestamp: _Optional[str] = ..., key: _Optional[_Union[Key, _Mapping]] = ..., topic: _Optional[str] = ...) -> None: ...

class BareEnvelope(_message.Message):
    __slots__ = ("values", "__crdb__")
    class ValuesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Value
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Value, _Mapping]] = ...) -> None: ...
    VALUES_FIELD_NUMBER: _ClassVar[int]
    __CRDB___FIELD_NUMBER: _ClassVar[int]
    values: _containers.MessageMap[str, Value]
    __crdb__: Metadata
    def __init__(self, values: _Optional[_Mapping[str, Value]] = ..., __crdb__: _Optional[_Union[Metadata, _Mapping]] = ...) -> None: ...

class BareResolved(_message.Message):
    __slots__ = ("__crdb__",)
    __CRDB___FIELD_NUMBER: _ClassVar[int]
    __crdb__: Resolved
    def __init__(self, __crdb__: _Optional[_Union[Resolved, _Mapping]] = ...) -> None: ...

class EnrichedEnvelope(_message.Message):
    __slots__ = ("after", "before", "op", "ts_ns", "source")
    AFTER_FIELD_NUMBER: _ClassVar[int]
    BEFORE_FIELD_NUMBER: _ClassVar[int]
    OP_FIELD_NUMBER: _ClassVar[int]
    TS_NS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    after: Record
    before: Record
    op: Op
    ts_ns: int
    source: EnrichedSource
    def __init__(self, after: _Optional[_Union[Record, _Mapping]] = ..., before: _Optional[_Union[Record, _Mapping]] = ..., op: _Optional[_Union[Op, str]] = ..., ts_ns: _Optional[int] = ..., source: _Optional[_Union[EnrichedSource, _Mapping]] = ...) -> None: ...

class Resolved(_message.Message):
    __slots__ = ("resolved",)
    RESOLVED_FIELD_NUMBER: _ClassVar[int]
    resolved: str
    def __init__(self, resolved: _Optional[str] = ...) -> None: ...

class EnrichedSource(_message.Message):
    __slots__ = ("job_id", "changefeed_sink", "db_version", "cluster_name", "cluster_id", "source_node_locality", "node_name", "node_id", "mvcc_timestamp", "ts_ns", "ts_hlc", "origin", "database_name", "schema_name", "table_name", "primary_keys")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    CHANGEFEED_SINK_FIELD_NUMBER: _ClassVar[int]
    DB_VERSION_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_NODE_LOCALITY_FIELD_NUMBER: _ClassVar[int]
    NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    MVCC_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    TS_NS_FIELD_NUMBER: _ClassVar[int]
    TS_HLC_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    DATABASE_NAME_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_NAME_FIELD_NUMBER: _ClassVar[int]
    TABLE_NAME_FIELD_NUMBER: _ClassVar[int]
    PRIMARY_KEYS_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    changefeed_sink: str
    db_version: str
    cluster_name: str
    cluster_id: str
    source_node_locality: str
    node_name: str
    node_id: str
    mvcc_timestamp: str
    ts_ns: int
    ts_hlc: str
    origin: str
    database_name: str
    schema_name: str
    table_name: str
    primary_keys: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, job_id: _Optional[str] = ..., changefeed_sink: _Optional[str] = ..., db_version: _Optional[str] = ..., cluster_name: _Optional[str] = ..., cluster_id: _Optional[str] = ..., source_node_locality: _Optional[str] = ..., node_name: _Optional[str] = ..., node_id: _Optional[str] = ..., mvcc_timestamp: _Optional[str] = ..., ts_ns: _Optional[int] = ..., ts_hlc: _Optional[str] = ..., origin: _Optional[str] = ..., database_name: _Optional[str] = ..., schema_name: _Optional[str] = ..., table_name: _Optional[str] = ..., primary_keys: _Optional[_Iterable[str]] = ...) -> None: ...

class Metadata(_message.Message):
    __slots__ = ("updated", "mvcc_timestamp", "key", "topic")
    UPDATED_FIELD_NUMBER: _ClassVar[int]
    MVCC_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    updated: str
    mvcc_timestamp: str
    key: Key
    topic: str
    def __init__(self, updated: _Optional[str] = ..., mvcc_timestamp: _Optional[str] = ..., key: _Optional[_Union[Key, _Mapping]] = ..., topic: _Optional[str] = ...) -> None: ...

class Value(_message.Message):
    __slots__ = ("string_value", "bytes_value", "int32_value", "int64_value", "float_value", "double_value", "bool_value", "timestamp_value", "array_value", "tuple_value", "decimal_value", "date_value", "interval_value", "time_value", "uuid_value")
    STRING_VALUE_FIELD_NUMBER: _ClassVar[int]
    BYTES_VALUE_FIELD_NUMBER: _ClassVar[int]
    INT32_VALUE_FIELD_NUMBER: _ClassVar[int]
    INT64_VALUE_FIELD_NUMBER: _ClassVar[int]
    FLOAT_VALUE_FIELD_NUMBER: _ClassVar[int]
    DOUBLE_VALUE_FIELD_NUMBER: _ClassVar[int]
    BOOL_VALUE_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_VALUE_FIELD_NUMBER: _ClassVar[int]
    ARRAY_VALUE_FIELD_NUMBER: _ClassVar[int]
    TUPLE_VALUE_FIELD_NUMBER: _ClassVar[int]
    DECIMAL_VALUE_FIELD_NUMBER: _ClassVar[int]
    DATE_VALUE_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_VALUE_FIELD_NUMBER: _ClassVar[int]
    TIME_VALUE_FIELD_NUMBER: _ClassVar[int]
    UUID_VALUE_FIELD_NUMBER: _ClassVar[int]
    string_value: str
    bytes_value: bytes
    int32_value: int
    int64_value: int
    float_value: float
    double_value: float
    bool_value: bool
    timestamp_value: _timestamp_pb2.Timestamp
    array_value: Array
    tuple_value: Record
    decimal_value: Decimal
    date_value: str
    interval_value: str
    time_value: str
    uuid_value: str
    def __init__(self, string_value: _Optional[str] = ..., bytes_value: _Optional[bytes] = ..., int32_value: _Optional[int] = ..., int64_value: _Optional[int] = ..., float_value: _Optional[float] = ..., double_value: _Optional[float] = ..., bool_value: _Optional[bool] = ..., timestamp_value: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., array_value: _Optional[_Union[Array, _Mapping]] = ..., tuple_value: _Optional[_Union[Record, _Mapping]] = ..., decimal_value: _Optional[_Union[Decimal, _Mapping]] = ..., date_value: _Optional[str] = ..., interval_value: _Optional[str] = ..., time_value: _Optional[str] = ..., uuid_value: _Optional[str] = ...) -> None: ...

class Key(_message.Message):
    __slots__ = ("key",)
    class KeyEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Value
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Value, _Mapping]] = ...) -> None: ...
    KEY_FIELD_NUMBER: _ClassVar[int]
    key: _containers.MessageMap[str, Value]
    def __init__(self, key: _Optional[_Mapping[str, Value]] = ...) -> None: ...

class Array(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedCompositeFieldContainer[Value]
    def __init__(self, values: _Optional[_Iterable[_Union[Value, _Mapping]]] = ...) -> None: ...

class Decimal(_message.Message):
    __slots__ = ("value",)
    VALUE_FIELD_NUMBER: _ClassVar[int]
    value: str
    def __init__(self, value: _Optional[str] = ...) -> None: ...

class Record(_message.Message):
    __slots__ = ("values",)
    class ValuesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Value
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Value, _Mapping]] = ...) -> None: ...
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.MessageMap[str, Value]
    def __init__(self, values: _Optional[_Mapping[str, Value]] = ...) -> None: ...
