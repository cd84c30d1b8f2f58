"""Tests for feedkv.kv.txn_tombstones: which transactions may (re)create their record."""

from __future__ import annotations

from feedkv.kv.txn_tombstones import TxnTombstones
from feedkv.util.hlc import Timestamp

OPENED = Timestamp(1_000)


def txn(n: int) -> bytes:
    return n.to_bytes(16, "big")


def test_a_transaction_begun_after_the_store_opened_may_create_its_record() -> None:
    tombstones = TxnTombstones(OPENED)

    assert tombstones.may_create(txn(1), OPENED.next())
    assert not tombstones.was_removed(txn(1))


def test_a_transaction_begun_at_or_before_the_low_water_may_not() -> None:
    tombstones = TxnTombstones(OPENED)

    assert not tombstones.may_create(txn(1), OPENED)
    assert not tombstones.may_create(txn(1), Timestamp(5))


def test_a_removed_record_is_never_created_again_whenever_its_transaction_began() -> None:
    tombstones = TxnTombstones(OPENED)
    tombstones.removed(txn(1), Timestamp(2_000))

    assert tombstones.was_removed(txn(1))
    assert not tombstones.may_create(txn(1), Timestamp(3_000))
    assert tombstones.may_create(txn(2), Timestamp(3_000))


def test_covering_raises_the_low_water_and_never_lowers_it() -> None:
    tombstones = TxnTombstones(OPENED)

    tombstones.cover(Timestamp(5_000))
    tombstones.cover(Timestamp(4_000))

    assert tombstones.low_water == Timestamp(5_000)
    assert not tombstones.may_create(txn(1), Timestamp(5_000))
    assert tombstones.may_create(txn(1), Timestamp(5_001))


def test_an_overflow_forgets_the_oldest_half_and_answers_for_them_by_low_water() -> None:
    tombstones = TxnTombstones(OPENED, max_entries=4)
    for n in range(1, 6):
        tombstones.removed(txn(n), Timestamp(1_000 + 100 * n))

    assert len(tombstones) == 3
    assert tombstones.low_water == Timestamp(1_200)  # the newest of the two forgotten
    assert not tombstones.was_removed(txn(1)) and not tombstones.was_removed(txn(2))
    # forgotten, yet refused: they began before they were removed, below the low water
    assert not tombstones.may_create(txn(1), Timestamp(1_050))
    assert not tombstones.may_create(txn(2), Timestamp(1_150))
    assert all(tombstones.was_removed(txn(n)) for n in (3, 4, 5))


def test_removing_again_keeps_the_first_removal() -> None:
    tombstones = TxnTombstones(OPENED, max_entries=2)
    tombstones.removed(txn(1), Timestamp(2_000))
    tombstones.removed(txn(1), Timestamp(9_000))
    tombstones.removed(txn(2), Timestamp(3_000))
    tombstones.removed(txn(3), Timestamp(4_000))

    assert tombstones.low_water == Timestamp(2_000)
