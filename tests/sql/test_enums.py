"""Enum codes: a new type's labels get ascending codes, and a label added anywhere gets
one strictly between its neighbours' however many were added there before, so no key
written earlier ever changes its place."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from feedkv.errors import InvariantViolation, SQLError
from feedkv.sql.descriptor import decode_descriptor
from feedkv.sql.enums import EnumValue, code_between, first_codes
from feedkv.util.encoding import encode_value

FAST = settings(max_examples=100, deadline=None)


@pytest.mark.parametrize("count", [1, 2, 3, 254, 255, 256, 70_000])
def test_first_codes_ascend_and_leave_room(count: int) -> None:
    codes = first_codes(count)
    assert len(codes) == count
    assert list(codes) == sorted(set(codes))
    assert all(code and code[-1] != 0 for code in codes)


@FAST
@given(st.integers(min_value=1, max_value=20), st.integers(min_value=0, max_value=2**32))
def test_labels_added_anywhere_keep_every_code_in_order(labels: int, seed: int) -> None:
    rng = random.Random(seed)
    codes = list(first_codes(labels))
    for _ in range(200):
        at = rng.randrange(len(codes) + 1)
        low = codes[at - 1] if at else None
        high = codes[at] if at < len(codes) else None
        code = code_between(low, high)
        assert (low is None or low < code) and (high is None or code < high)
        assert code[-1] != 0
        codes.insert(at, code)
    # the key encoding keeps that order, so an enum key sorts by its label's place
    encoded = [encode_value(code) for code in codes]
    assert encoded == sorted(encoded)


def test_adding_at_one_place_again_and_again_stays_short() -> None:
    low, high = first_codes(2)
    for _ in range(100):
        high = code_between(low, high)
    assert low < high and len(high) <= 20


def test_labels_added_at_either_end_stay_short() -> None:
    codes = list(first_codes(3))
    for _ in range(1000):
        codes.append(code_between(codes[-1], None))
        codes.insert(0, code_between(None, codes[0]))
    assert codes == sorted(set(codes)) and all(code[-1] != 0 for code in codes)
    assert max(map(len, codes)) <= 10


def test_no_code_between_bounds_out_of_order() -> None:
    with pytest.raises(InvariantViolation):
        code_between(b"\x80", b"\x40")


def test_a_value_orders_by_its_labels_place_not_its_text() -> None:
    labels, codes = ("sad", "ok", "happy"), first_codes(3)
    sad, happy = (EnumValue.of(label, labels, "mood", codes) for label in ("sad", "happy"))
    assert sad < happy and sad.code < happy.code
    with pytest.raises(InvariantViolation):
        _ = EnumValue("sad", labels, "mood").code  # a value without codes has no key


def test_an_enum_type_written_before_codes_is_refused_clearly() -> None:
    """A store from before enum codes held label positions: its type is refused with a
    SQL error saying so, not a KeyError."""
    raw = json.dumps(
        {"type": {"id": 60, "name": "mood", "database_id": 50, "labels": ["sad", "ok"]}}
    ).encode()
    with pytest.raises(SQLError, match="written by an older feedkv") as refused:
        decode_descriptor(raw)
    assert refused.value.code == "XX000"
