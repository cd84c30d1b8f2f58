"""Routing a batch to a range's replicas: a replica on a node known to be down is tried
after the others (fake transports recording each dial)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from feedkv.errors import (
    NodeUnavailableError,
    NotLeaseHolderError,
    RangeKeyMismatchError,
    RangeNotFoundError,
)
from feedkv.kv.api import BatchRequest, BatchResponse, Get, GetResponse, Header
from feedkv.kv.range_descriptor import RangeDescriptor
from feedkv.kv.router import Router
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import KEY_MAX, KEY_MIN, Span

RANGE = RangeDescriptor(1, Span(KEY_MIN, KEY_MAX), 1, replicas=(1, 2, 3))
BATCH = BatchRequest(Header(range_id=1, generation=1), (Get(b"k"),))


class _Node:
    def __init__(self, node_id: int, cluster: _Cluster) -> None:
        self.node_id = node_id
        self.cluster = cluster

    def send(self, batch: BatchRequest) -> BatchResponse:
        if self.node_id in self.cluster.down:
            raise NodeUnavailableError(f"n{self.node_id} is down")
        told = self.cluster.told
        if self.node_id in self.cluster.left:
            raise RangeNotFoundError(1, told)
        if self.node_id != self.cluster.lease_holder:
            raise NotLeaseHolderError(1, self.node_id, self.cluster.hint, told)
        return BatchResponse((GetResponse(None),), Timestamp(1, 0))

    def now(self) -> Timestamp:
        return Timestamp(1, 0)

    def close(self) -> None:
        pass


class _Cluster:
    """A dialer of the nodes; ``down``: those that refuse; ``seen``: those that
    liveness sees dead; ``left``: those the range left (they answer RangeNotFound);
    ``hint``: where the replicas without the lease point; ``told``: the descriptor
    their refusals carry."""

    def __init__(
        self,
        lease_holder: int,
        *,
        down: set[int],
        seen: set[int],
        hint: int,
        left: frozenset[int] = frozenset(),
        told: RangeDescriptor | None = None,
    ) -> None:
        self.lease_holder = lease_holder
        self.told = told
        self.left = left
        self.down = down
        self.seen = seen
        self.hint = hint
        self.dials: list[int] = []

    def dial(self, node_id: int) -> _Node:
        self.dials.append(node_id)
        return _Node(node_id, self)

    def seen_dead(self, node_id: int) -> bool:
        return node_id in self.seen

    def send(self, batch: BatchRequest) -> BatchResponse:
        raise AssertionError("an addressed batch goes to a replica's node")

    def now(self) -> Timestamp:
        return Timestamp(1, 0)

    def close(self) -> None:
        pass


def _route(cluster: _Cluster, router: Router | None = None) -> list[int]:
    (router or Router(cluster))._send(BATCH, RANGE)
    return cluster.dials


def test_the_cached_lease_holder_is_tried_first_while_it_is_not_seen_dead() -> None:
    cluster = _Cluster(2, down=set(), seen=set(), hint=2)
    assert _route(cluster) == [1, 2]


def test_a_lease_holder_seen_dead_is_tried_after_the_live_replicas() -> None:
    """n1 died holding the lease; n2 took it over: the dead node is never dialled."""
    cluster = _Cluster(2, down={1}, seen={1}, hint=2)
    assert _route(cluster) == [2]


def test_a_hint_naming_a_node_seen_dead_waits_for_the_other_replicas() -> None:
    """n2 still points at the dead n1 (its lease not yet expired there): n3 next."""
    cluster = _Cluster(3, down={1}, seen={1}, hint=1)
    assert _route(cluster) == [2, 3]


def test_a_replica_seen_dead_is_still_tried_when_no_other_is_left() -> None:
    """Liveness may be behind a node that came back: it is the last resort, not skipped."""
    cluster = _Cluster(1, down={2, 3}, seen={1, 2, 3}, hint=0)
    assert _route(cluster) == [1]
    cluster = _Cluster(1, down={2, 3}, seen={1}, hint=0)
    assert _route(cluster) == [2, 3, 1]


def test_a_lease_holder_the_range_left_sends_the_batch_to_the_others_and_the_cache_learns() -> None:
    """The range moved off n1 to n4 (the lease with it): a node holding no replica still
    has the old descriptor from gossip. n1 answers it has no replica: n2 is asked at
    once, points to n4, which answers; the cache drops n1 and names n4 first."""
    cluster = _Cluster(4, down=set(), seen=set(), hint=4, left=frozenset({1}))
    router = Router(cluster)
    router.ranges.insert([RANGE])
    router.send_key(b"k", Header(), (Get(b"k"),))
    assert cluster.dials == [1, 2, 4]
    assert router.ranges.get(b"k").replicas == (4, 2, 3)
    router.send_key(b"k", Header(), (Get(b"k"),))
    assert cluster.dials == [1, 2, 4, 4]  # the next goes to the lease holder at once


def test_a_range_no_replica_holds_any_more_is_not_found() -> None:
    """Merged away: every replica says so, and the caller refreshes its address."""
    cluster = _Cluster(1, down=set(), seen=set(), hint=0, left=frozenset({1, 2, 3}))
    with pytest.raises(RangeNotFoundError):
        _route(cluster)
    assert cluster.dials == [1, 2, 3]


def test_a_refusal_carrying_the_ranges_new_replicas_is_followed_without_a_lookup() -> None:
    """The range moved to n4 and n5 (a newer generation); n1, which the range left,
    says so: the batch goes to n4, the lease holder it names, and the cache learns the
    new replicas (a lookup would fail: the fake answers none)."""
    moved = replace(RANGE, generation=3, replicas=(4, 5))
    cluster = _Cluster(4, down=set(), seen=set(), hint=4, left=frozenset({1, 2, 3}), told=moved)
    router = Router(cluster)
    router.ranges.insert([RANGE])
    router.send_key(b"k", Header(), (Get(b"k"),))
    assert cluster.dials == [1, 4]
    assert router.ranges.get(b"k") == moved
    assert router.ranges.lookups == 0


def test_a_replica_without_the_lease_tells_the_replicas_the_cache_lacks() -> None:
    """The range gained n4, which holds its lease; the client's cache names n1-n3
    only: n1's refusal carries the descriptor with n4, so the batch goes there."""
    grown = replace(RANGE, generation=2, replicas=(4, 1, 2, 3))
    cluster = _Cluster(4, down=set(), seen=set(), hint=4, told=grown)
    router = Router(cluster)
    router.ranges.insert([RANGE])
    router.send_key(b"k", Header(), (Get(b"k"),))
    assert cluster.dials == [1, 4]
    assert router.ranges.get(b"k").replicas == (4, 1, 2, 3)


def test_a_refusal_naming_an_older_or_the_same_descriptor_is_no_news() -> None:
    """A replica that lags behind the client's cache: its descriptor is not followed,
    the other replicas are asked as before."""
    older = replace(RANGE, generation=0, replicas=(1, 9))
    cluster = _Cluster(3, down=set(), seen=set(), hint=0, left=frozenset({1}), told=older)
    assert _route(cluster) == [1, 2, 3]


def test_a_refusal_naming_the_parent_of_the_split_that_made_the_range_is_no_news() -> None:
    """The client addressed r2, the right-hand range of a split of r1 (which took r1 to
    generation 2); n1, which r2 left, still holds r1's report from before the split:
    following it would send the batch to r1, which refuses it too (a round trip more).
    The other replicas are asked instead."""
    child = RangeDescriptor(2, Span(b"m", KEY_MAX), 2, replicas=(1, 2, 3))
    parent = RangeDescriptor(1, Span(KEY_MIN, KEY_MAX), 1, replicas=(1, 2, 3))
    cluster = _Cluster(3, down=set(), seen=set(), hint=0, left=frozenset({1}), told=parent)
    Router(cluster)._send(BatchRequest(Header(range_id=2, generation=2), (Get(b"n"),)), child)
    assert cluster.dials == [1, 2, 3]


def test_a_refusal_naming_the_range_the_keys_merged_into_is_a_key_mismatch() -> None:
    merged = RangeDescriptor(7, Span(KEY_MIN, KEY_MAX), 5, replicas=(2, 3))
    cluster = _Cluster(1, down=set(), seen=set(), hint=0, left=frozenset({1, 2, 3}), told=merged)
    with pytest.raises(RangeKeyMismatchError) as raised:
        _route(cluster)
    assert raised.value.descriptors == [merged]
    assert cluster.dials == [1]
