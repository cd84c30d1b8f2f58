"""Tests for feedkv.kv.txn_tombstones: which transactions may (re)create their record."""

from __future__ import annotations

from feedkv.kv.txn_tombstones import TxnTombstones
from feedkv.util.hlc import Timestamp

OPENED = Timestamp(1_000)
R, OTHER = 1, 2  # range ids


def txn(n: int) -> bytes:
    return n.to_bytes(16, "big")


def test_a_transaction_begun_after_the_store_opened_may_create_its_record() -> None:
    tombstones = TxnTombstones(OPENED)

    assert tombstones.may_create(txn(1), OPENED.next(), R)
    assert not tombstones.was_removed(txn(1))


def test_a_transaction_begun_at_or_before_the_low_water_may_not() -> None:
    tombstones = TxnTombstones(OPENED)

    assert not tombstones.may_create(txn(1), OPENED, R)
    assert not tombstones.may_create(txn(1), Timestamp(5), R)


def test_a_removed_record_is_never_created_again_whenever_its_transaction_began() -> None:
    tombstones = TxnTombstones(OPENED)
    tombstones.removed(txn(1), Timestamp(2_000))

    assert tombstones.was_removed(txn(1))
    assert not tombstones.may_create(txn(1), Timestamp(3_000), R)
    assert tombstones.may_create(txn(2), Timestamp(3_000), R)


def test_a_covered_range_refuses_txns_begun_up_to_its_lease_other_ranges_do_not() -> None:
    tombstones = TxnTombstones(OPENED)

    tombstones.cover(R, Timestamp(5_000))
    tombstones.cover(R, Timestamp(4_000))  # never lowered

    assert not tombstones.may_create(txn(1), Timestamp(5_000), R)
    assert tombstones.may_create(txn(1), Timestamp(5_001), R)
    assert tombstones.may_create(txn(1), Timestamp(2_000), OTHER)


def test_a_split_off_range_keeps_its_cover_and_a_merged_one_hands_it_on() -> None:
    tombstones = TxnTombstones(OPENED)
    tombstones.cover(R, Timestamp(5_000))

    tombstones.split(R, OTHER)
    assert not tombstones.may_create(txn(1), Timestamp(5_000), OTHER)

    tombstones.cover(OTHER, Timestamp(7_000))
    tombstones.merge(R, OTHER)
    assert not tombstones.may_create(txn(1), Timestamp(7_000), R)
    assert tombstones.may_create(txn(1), Timestamp(7_000), OTHER)  # it is gone


def test_an_overflow_forgets_the_oldest_half_and_answers_for_them_by_low_water() -> None:
    tombstones = TxnTombstones(OPENED, max_entries=4)
    for n in range(1, 6):
        tombstones.removed(txn(n), Timestamp(1_000 + 100 * n))

    assert len(tombstones) == 3
    assert tombstones.low_water == Timestamp(1_200)  # the newest of the two forgotten
    assert not tombstones.was_removed(txn(1)) and not tombstones.was_removed(txn(2))
    # forgotten, yet refused: they began before they were removed, below the low water
    assert not tombstones.may_create(txn(1), Timestamp(1_050), R)
    assert not tombstones.may_create(txn(2), Timestamp(1_150), R)
    assert all(tombstones.was_removed(txn(n)) for n in (3, 4, 5))


def test_removing_again_keeps_the_first_removal() -> None:
    tombstones = TxnTombstones(OPENED, max_entries=2)
    tombstones.removed(txn(1), Timestamp(2_000))
    tombstones.removed(txn(1), Timestamp(9_000))
    tombstones.removed(txn(2), Timestamp(3_000))
    tombstones.removed(txn(3), Timestamp(4_000))

    assert tombstones.low_water == Timestamp(2_000)
