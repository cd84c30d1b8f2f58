"""Bad input gets a clear error and changes nothing in the store."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from feedkv.errors import (
    InvalidArgumentError,
    InvalidKeyError,
    InvalidSpanError,
    TimestampParseError,
    ValueTooLargeError,
)
from feedkv.storage import export, mvcc
from feedkv.storage.engine import ReadWriter
from feedkv.storage.intent import TxnMeta
from feedkv.storage.lmdb_engine import LMDBEngine
from feedkv.storage.mvcc import MAX_VALUE_BYTES
from feedkv.storage.schema import MVCC_DATABASES
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import MAX_KEY_BYTES, Span

TS = Timestamp(100, 0)
TXN = TxnMeta(b"t".ljust(16, b"-"), b"a", 0, TS, 1)


def dump(engine: LMDBEngine) -> dict[str, list[tuple[bytes, bytes]]]:
    with engine.snapshot() as snap:
        return {db: list(snap.scan(db, b"")) for db in MVCC_DATABASES}


@pytest.fixture
def seeded(mvcc_engine: LMDBEngine) -> LMDBEngine:
    mvcc_engine.write(lambda rw: mvcc.put(rw, b"a", Timestamp(10), b"first"))
    mvcc_engine.write(lambda rw: mvcc.put(rw, b"b", Timestamp(20), b"second", txn=TXN))
    return mvcc_engine


BAD_WRITES: list[tuple[str, Callable[[ReadWriter], object], type[Exception], str]] = [
    ("empty key", lambda rw: mvcc.put(rw, b"", TS, b"v"), InvalidKeyError, "empty key"),
    (
        "key too long",
        lambda rw: mvcc.put(rw, b"k" * (MAX_KEY_BYTES + 1), TS, b"v"),
        InvalidKeyError,
        "longer than the limit",
    ),
    ("str key", lambda rw: mvcc.put(rw, "a", TS, b"v"), InvalidKeyError, "not str"),  # type: ignore[arg-type]
    ("key at KEY_MAX", lambda rw: mvcc.put(rw, b"\xff\xff", TS, b"v"), InvalidKeyError, "KEY_MAX"),
    (
        "value too large",
        lambda rw: mvcc.put(rw, b"a", TS, b"x" * (MAX_VALUE_BYTES + 1)),
        ValueTooLargeError,
        "exceeds the limit",
    ),
    ("str value", lambda rw: mvcc.put(rw, b"a", TS, "v"), InvalidArgumentError, "not str"),  # type: ignore[arg-type]
    (
        "oversized cput",
        lambda rw: mvcc.conditional_put(rw, b"a", TS, b"x" * (MAX_VALUE_BYTES + 1), b"first"),
        ValueTooLargeError,
        "exceeds the limit",
    ),
    (
        "second op of a batch is bad",
        lambda rw: [mvcc.put(rw, b"c", TS, b"ok"), mvcc.put(rw, b"", TS, b"bad")],
        InvalidKeyError,
        "empty key",
    ),
]


@pytest.mark.parametrize(
    ("fn", "error", "message"),
    [case[1:] for case in BAD_WRITES],
    ids=[case[0] for case in BAD_WRITES],
)
def test_bad_writes_fail_clearly_and_change_nothing(
    seeded: LMDBEngine,
    fn: Callable[[ReadWriter], object],
    error: type[Exception],
    message: str,
) -> None:
    before = dump(seeded)
    with pytest.raises(error, match=message):
        seeded.write(fn)
    assert dump(seeded) == before


@pytest.mark.parametrize(
    "text",
    ["", "abc", "-1.0000000000", "1.5", "1.00000000001", " 1.0000000000", "1e9", "1.000000000x"],
)
def test_malformed_timestamps_are_rejected_with_the_expected_form(text: str) -> None:
    with pytest.raises(TimestampParseError, match="invalid timestamp"):
        Timestamp.parse(text)


@pytest.mark.parametrize(("start", "end"), [(b"b", b"a"), (b"a", b"a"), (b"z", b"")])
def test_inverted_or_empty_spans_are_rejected(start: bytes, end: bytes) -> None:
    with pytest.raises(InvalidSpanError, match="must sort after the start"):
        Span(start, end)


def test_bad_reads_fail_clearly(seeded: LMDBEngine) -> None:
    with seeded.snapshot() as snap:
        with pytest.raises(InvalidKeyError):
            mvcc.get(snap, b"", TS)
        with pytest.raises(InvalidArgumentError, match="limit"):
            mvcc.scan(snap, Span(b"a", b"z"), TS, limit=-1)
        with pytest.raises(InvalidArgumentError, match="inverted"):
            export.export(snap, Span(b"a", b"z"), TS, Timestamp(1))


def test_a_failed_job_does_not_disturb_the_others_in_its_group(seeded: LMDBEngine) -> None:
    good = seeded.submit(lambda rw: mvcc.put(rw, b"g", TS, b"good"))
    bad = seeded.submit(lambda rw: mvcc.put(rw, b"", TS, b"bad"))
    assert good.result(timeout=10)
    with pytest.raises(InvalidKeyError):
        bad.result(timeout=10)
    with seeded.snapshot() as snap:
        kv = mvcc.get(snap, b"g", TS)
    assert kv is not None
    assert kv.value == b"good"
