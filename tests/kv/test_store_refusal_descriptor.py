"""A store refusing a batch for a range it does not hold tells the client where the
batch's keys are, as its cluster's reports put them, only when that is news to the
client: a range of a higher generation than the one it addressed. A report of an
ancestor (the parent of the split that made the client's range) is left out: following
it would cost the client a round trip more."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from feedkv.errors import RangeNotFoundError
from feedkv.kv.api import BatchRequest, Get, Header, PushTxn, PushTxnResponse, ResolveIntent
from feedkv.kv.range_descriptor import RangeDescriptor
from feedkv.kv.store import Store
from feedkv.util.keys import KEY_MAX, KEY_MIN, Span

GONE = 999  # a range id the store holds no replica of
CHILD = RangeDescriptor(GONE, Span(b"m", KEY_MAX), 2, replicas=(2, 3))


class _Reports:
    """The cluster as the store's directory knows it: ``found`` holds every key."""

    def __init__(self, found: RangeDescriptor) -> None:
        self.found = found

    def locate(self, key: bytes) -> RangeDescriptor | None:
        return self.found

    def push(self, request: PushTxn) -> PushTxnResponse:
        raise AssertionError("nothing to push here")

    def resolve(self, request: ResolveIntent) -> None:
        raise AssertionError("nothing to resolve here")


@pytest.fixture
def reported(store: Store) -> Iterator[_Reports]:
    reports = _Reports(CHILD)
    store.cluster = reports
    try:
        yield reports
    finally:
        store.cluster = None


def _refusal(store: Store) -> RangeNotFoundError[RangeDescriptor]:
    batch = BatchRequest(Header(range_id=GONE, generation=CHILD.generation), (Get(b"n"),))
    with pytest.raises(RangeNotFoundError) as refused:
        store.send(batch)
    return refused.value


def test_a_refusal_names_the_range_a_merge_put_the_keys_in(
    store: Store, reported: _Reports
) -> None:
    reported.found = RangeDescriptor(7, Span(KEY_MIN, KEY_MAX), 3, replicas=(1, 2))
    assert _refusal(store).descriptor == reported.found


def test_a_refusal_leaves_out_the_parent_of_the_split_that_made_the_range(
    store: Store, reported: _Reports
) -> None:
    reported.found = RangeDescriptor(7, Span(KEY_MIN, KEY_MAX), 1, replicas=(1, 2, 3))
    assert _refusal(store).descriptor is None


def test_a_refusal_leaves_out_the_range_as_the_client_has_it(
    store: Store, reported: _Reports
) -> None:
    assert _refusal(store).descriptor is None
