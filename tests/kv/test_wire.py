"""The wire form of batch responses: scan rows travel as columns and come back as the
same rows; a response whose columns do not line up is refused, not misread."""

from __future__ import annotations

import pytest

from feedkv.errors import (
    InvalidArgumentError,
    LockNotAvailableError,
    NotLeaseHolderError,
    RangeNotFoundError,
)
from feedkv.kv import api
from feedkv.kv.proto import feedkv_pb2 as pb
from feedkv.kv.range_descriptor import RangeDescriptor
from feedkv.kv.wire import (
    batch_request_from_proto,
    batch_request_to_proto,
    batch_response_from_proto,
    batch_response_to_proto,
    error_from_proto,
    error_to_proto,
)
from feedkv.storage.mvcc import KeyValue
from feedkv.util.hlc import MAX_LOGICAL, Timestamp
from feedkv.util.keys import Span

ROWS = (
    KeyValue(b"a", b"1", Timestamp(10, 0)),
    KeyValue(b"b\x00", b"", Timestamp(11, MAX_LOGICAL)),
    KeyValue(b"c", b"\xff" * 300, Timestamp((1 << 63) - 1, 2)),
)


def round_trip(response: api.Response) -> api.Response:
    batch = api.BatchResponse((response,), Timestamp(5, 1))
    data = batch_response_to_proto(batch).SerializeToString()
    (decoded,) = batch_response_from_proto(pb.BatchResponse.FromString(data)).responses
    return decoded


@pytest.mark.parametrize("rows", [(), ROWS[:1], ROWS])
@pytest.mark.parametrize("resume", [None, b"d"])
def test_scan_rows_cross_the_wire_unchanged(
    rows: tuple[KeyValue, ...], resume: bytes | None
) -> None:
    assert round_trip(api.ScanResponse(rows, resume)) == api.ScanResponse(rows, resume)


def test_a_scan_response_whose_columns_differ_is_refused() -> None:
    msg = batch_response_to_proto(api.BatchResponse((api.ScanResponse(ROWS, None),), Timestamp(5)))
    del msg.responses[0].scan.walls[-1]
    with pytest.raises(InvalidArgumentError, match="columns differ"):
        batch_response_from_proto(msg)


def test_a_scan_response_with_a_negative_timestamp_is_refused() -> None:
    msg = batch_response_to_proto(api.BatchResponse((api.ScanResponse(ROWS, None),), Timestamp(5)))
    msg.responses[0].scan.walls[0] = -1
    with pytest.raises(InvalidArgumentError, match="negative timestamp"):
        batch_response_from_proto(msg)


@pytest.mark.parametrize(
    "request_",
    [
        api.ConditionalPut(b"k", b"v", b"old"),
        api.ConditionalPut(b"k", None, None),
        api.ConditionalPut(b"k", b"v", None, exists=True),
    ],
    ids=["expected value", "expected absent", "expected any value"],
)
def test_a_conditional_put_crosses_the_wire_with_its_condition(
    request_: api.ConditionalPut,
) -> None:
    batch = api.BatchRequest(api.Header(), (request_,))
    data = batch_request_to_proto(batch).SerializeToString()
    decoded = batch_request_from_proto(pb.BatchRequest.FromString(data))
    assert decoded.requests == (request_,)


@pytest.mark.parametrize(
    "header",
    [
        api.Header(),
        api.Header(3, 7, Timestamp(5, 1)),
        api.Header(deadline=Timestamp(9, 2)),
    ],
    ids=["empty", "addressed and stamped", "with a deadline"],
)
def test_a_batch_header_crosses_the_wire_unchanged(header: api.Header) -> None:
    batch = api.BatchRequest(header, (api.Put(b"k", b"v"),))
    data = batch_request_to_proto(batch).SerializeToString()
    assert batch_request_from_proto(pb.BatchRequest.FromString(data)) == batch


def test_an_ingest_and_its_response_cross_the_wire_unchanged() -> None:
    request_ = api.Ingest(Span(b"a", b"d"), (b"a", b"b\x00", b"c"), (b"1", b"", b"\xff" * 300))
    batch = api.BatchRequest(api.Header(timestamp=Timestamp(5, 1)), (request_,))
    data = batch_request_to_proto(batch).SerializeToString()
    assert batch_request_from_proto(pb.BatchRequest.FromString(data)) == batch
    assert round_trip(api.IngestResponse(3)) == api.IngestResponse(3)


@pytest.mark.parametrize(
    "request_",
    [
        api.Scan(Span(b"a", b"d")),
        api.Scan(Span(b"a", b"d"), 5, True),
        api.Scan(Span(b"a", b"d"), None, False, lock=True),
        api.Scan(Span(b"a", b"d"), None, False, lock=True, nowait=True),
        api.Scan(Span(b"a", b"d"), 2, False, lock=True, skip_locked=True),
    ],
    ids=["plain", "limited and reversed", "locking", "locking without waiting", "skip locked"],
)
def test_a_scan_crosses_the_wire_with_its_options(request_: api.Scan) -> None:
    batch = api.BatchRequest(api.Header(), (request_,))
    data = batch_request_to_proto(batch).SerializeToString()
    assert batch_request_from_proto(pb.BatchRequest.FromString(data)).requests == (request_,)


@pytest.mark.parametrize(
    "reason", [LockNotAvailableError.NOWAIT, LockNotAvailableError.LOCK_TIMEOUT]
)
def test_a_lock_error_crosses_the_wire_with_its_key_and_reason(reason: str) -> None:
    out = pb.Error()
    error_to_proto(LockNotAvailableError(b"row\x00", reason), out)
    back = error_from_proto(pb.Error.FromString(out.SerializeToString()))
    assert isinstance(back, LockNotAvailableError)
    assert (back.key, back.reason) == (b"row\x00", reason)
    assert str(back) == str(LockNotAvailableError(b"row\x00", reason))


def test_a_batchs_lock_timeout_crosses_the_wire() -> None:
    batch = api.BatchRequest(api.Header(lock_timeout_ms=250), (api.Get(b"k"),))
    data = batch_request_to_proto(batch).SerializeToString()
    assert batch_request_from_proto(pb.BatchRequest.FromString(data)) == batch


@pytest.mark.parametrize(
    "refusal",
    [
        NotLeaseHolderError(3, 2, 4, RangeDescriptor(3, Span(b"a", b"m"), 7, replicas=(4, 2))),
        NotLeaseHolderError(3, 2, 0),
        RangeNotFoundError(3, RangeDescriptor(3, Span(b"a", b"m"), 7, replicas=(5,))),
        RangeNotFoundError(3),
    ],
    ids=["not-lease-holder", "not-lease-holder-bare", "not-found", "not-found-bare"],
)
def test_a_range_refusal_crosses_the_wire_with_the_descriptor_it_carries(
    refusal: NotLeaseHolderError[RangeDescriptor] | RangeNotFoundError[RangeDescriptor],
) -> None:
    out = pb.Error()
    error_to_proto(refusal, out)
    back = error_from_proto(pb.Error.FromString(out.SerializeToString()))
    assert type(back) is type(refusal) and str(back) == str(refusal)
    assert isinstance(back, NotLeaseHolderError | RangeNotFoundError)
    assert (back.range_id, back.descriptor) == (refusal.range_id, refusal.descriptor)
    if isinstance(refusal, NotLeaseHolderError):
        assert isinstance(back, NotLeaseHolderError)
        assert back.lease_holder == refusal.lease_holder
