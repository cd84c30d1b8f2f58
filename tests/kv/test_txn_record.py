"""Tests for feedkv.kv.txn_record: the record that decides a transaction's fate."""

from __future__ import annotations

import pytest

from feedkv.kv.txn_record import TxnRecord
from feedkv.storage.intent import TxnMeta, TxnStatus
from feedkv.util.hlc import MAX_LOGICAL, Timestamp
from feedkv.util.keys import Span

TXN_ID = bytes(range(16))
WRITE_TS = Timestamp(1_700_000_000_000_000_000, 4)
LIVENESS = 5_000
LAST_ACTIVE = 1_000_000


def make_record(
    *,
    anchor: bytes = b"anchor",
    status: TxnStatus = TxnStatus.PENDING,
    write_ts: Timestamp = WRITE_TS,
    epoch: int = 2,
    priority: int = 7,
    last_active_ns: int = LAST_ACTIVE,
    lock_spans: tuple[Span, ...] = (),
) -> TxnRecord:
    meta = TxnMeta(TXN_ID, anchor, epoch, write_ts)
    return TxnRecord(meta, status, priority, last_active_ns, lock_spans)


# --- Encoding -------------------------------------------------------------------------


@pytest.mark.parametrize("status", list(TxnStatus))
def test_a_record_round_trips_in_every_status(status: TxnStatus) -> None:
    record = make_record(status=status)

    assert TxnRecord.decode(record.encode()) == record


@pytest.mark.parametrize(
    "record",
    [
        make_record(anchor=b"\x00\xff\x00"),
        make_record(anchor=b"k" * 400),
        make_record(write_ts=Timestamp(0, 0), epoch=0, priority=0, last_active_ns=0),
        make_record(
            write_ts=Timestamp(2**63 - 1, MAX_LOGICAL),
            epoch=2**32 - 1,
            priority=2**32 - 1,
            last_active_ns=2**64 - 1,
        ),
    ],
    ids=["binary anchor", "long anchor", "zero fields", "largest fields"],
)
def test_a_record_round_trips_at_the_edges_of_its_fields(record: TxnRecord) -> None:
    assert TxnRecord.decode(record.encode()) == record


@pytest.mark.parametrize("status", [TxnStatus.COMMITTED, TxnStatus.ABORTED])
def test_a_finished_record_round_trips_with_its_lock_spans(status: TxnStatus) -> None:
    spans = (Span(b"", b"\x00"), Span(b"m", b"n\xff" * 300), Span(b"z", b"z\x00"))
    record = make_record(status=status, anchor=b"\x80anchor", lock_spans=spans)

    decoded = TxnRecord.decode(record.encode())

    assert decoded == record
    assert decoded.lock_spans == spans and decoded.meta.key == b"\x80anchor"


def test_a_record_encoded_without_lock_spans_keeps_its_old_form() -> None:
    # NB: records written before lock spans were kept are read the same way
    record = make_record(status=TxnStatus.COMMITTED)

    assert record.encode().endswith(b"anchor")
    assert len(record.encode()) == 45 + len(b"anchor")
    assert TxnRecord.decode(record.encode()).lock_spans == ()


def test_an_id_of_zero_and_0xff_bytes_survives_encoding() -> None:
    meta = TxnMeta(b"\x00" * 8 + b"\xff" * 8, b"a", 0, WRITE_TS)
    record = TxnRecord(meta, TxnStatus.PENDING, 1, 1)

    assert TxnRecord.decode(record.encode()).meta.id == meta.id


# --- Liveness -------------------------------------------------------------------------


def test_a_pending_record_heartbeated_within_the_window_is_alive() -> None:
    record = make_record()

    assert not record.expired(LAST_ACTIVE, LIVENESS)
    assert not record.expired(LAST_ACTIVE + LIVENESS, LIVENESS)


def test_a_pending_record_not_heartbeated_past_the_window_is_expired() -> None:
    assert make_record().expired(LAST_ACTIVE + LIVENESS + 1, LIVENESS)


@pytest.mark.parametrize("status", [TxnStatus.COMMITTED, TxnStatus.ABORTED])
def test_a_finalized_record_never_expires(status: TxnStatus) -> None:
    record = make_record(status=status)

    assert not record.expired(LAST_ACTIVE + 100 * LIVENESS, LIVENESS)


@pytest.mark.parametrize("status", list(TxnStatus))
def test_a_record_is_idle_only_once_untouched_for_longer_than_the_threshold(
    status: TxnStatus,
) -> None:
    record = make_record(status=status)

    assert not record.idle(LAST_ACTIVE + 10, 10)
    assert record.idle(LAST_ACTIVE + 11, 10)


def test_only_a_pending_record_is_unfinished() -> None:
    assert [make_record(status=s).finished() for s in TxnStatus] == [False, True, True]


# --- Updates --------------------------------------------------------------------------


def test_with_status_changes_only_the_status() -> None:
    record = make_record()

    committed = record.with_status(TxnStatus.COMMITTED)

    assert committed.status is TxnStatus.COMMITTED
    assert committed.meta == record.meta
    assert (committed.priority, committed.last_active_ns) == (7, LAST_ACTIVE)
    assert record.status is TxnStatus.PENDING  # records are immutable


def test_a_push_raises_the_commit_timestamp() -> None:
    record = make_record()
    later = WRITE_TS.next()

    pushed = record.pushed_to(later)

    assert pushed.meta.write_ts == later
    assert pushed.meta.id == TXN_ID
    assert pushed.meta.key == b"anchor"
    assert pushed.meta.epoch == 2
    assert pushed.status is TxnStatus.PENDING


@pytest.mark.parametrize("to", [WRITE_TS, WRITE_TS.prev(), Timestamp(0)])
def test_a_push_never_lowers_the_commit_timestamp(to: Timestamp) -> None:
    assert make_record().pushed_to(to).meta.write_ts == WRITE_TS
