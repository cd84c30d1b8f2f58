"""Merging two replicated ranges: the right-hand one ends, and the left one takes its span.

A range's data lives in each store's engine under its keys, so on a node that holds both
ranges a merge is only a change of descriptors, as for ranges held alone, provided the
right-hand range's replica there holds the right-hand range's *final* data. Each replica
applies the merge in its own time, so the right-hand range must stop changing first,
everywhere, and stay stopped under any leader. The steps (as CockroachDB's merge
freezes its right-hand range, waits for its replicas to apply, then commits):

1. **Freeze** the right-hand range through its own log: a marker ``freezing`` into the
   left range, written with the entry, so every replica (and any later leader, which
   applies it before it serves) refuses the range's commands and membership changes.
2. **Wait** until every replica of the right-hand range applied the freeze (followers
   tell their applied index in their heartbeat answers), so each holds the final data.
   If that does not happen in time (a replica's node is down), **thaw**: the marker goes,
   through the log, and the range serves again.
3. **Decide**, through the right-hand range's log again: the marker becomes ``merging``.
   From then on no replica may thaw it (a thaw is evaluated against the marker, and a
   leader applies every committed entry before it evaluates), so the decision and a
   thaw can never both happen: the right-hand range's log orders them.
4. **Merge** through the left range's log: the descriptors are rewritten and the marker
   removed; every replica of the left range ends its replica of the right-hand one,
   whose Raft state it deletes in the same transaction (its data stays: it is the left
   range's now), and ends both ranges' feeds with ``RANGE_MERGED``.

Only a store that holds both ranges' leases coordinates, and only ranges with the same
members (voters and learners), with no membership change pending on the left one; the
merge checks that again when it is evaluated. A coordinator that dies after step 3
leaves the merge to the left range's next lease holder; one that dies before leaves the
right-hand range frozen until its lease holder thaws it (:func:`unfinished`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import msgpack

from feedkv.errors import InvalidArgumentError, RangeKeyMismatchError, RangeUnavailableError
from feedkv.kv.api import BatchRequest, BatchResponse, Header, Merge, MergeResponse
from feedkv.kv.command import Applied, CommandContext, evaluate
from feedkv.kv.range_descriptor import META, RangeDescriptor, descriptor_by_id, descriptor_for_key
from feedkv.kv.replicated_command import Effects
from feedkv.storage.engine import Engine, Reader, ReadWriter
from feedkv.util.keys import KEY_MAX, prefix_end

if TYPE_CHECKING:
    from feedkv.kv.replica_loop import ReplicaLoop

__all__ = [
    "APPLY_WAIT_S",
    "MergeMarker",
    "merge",
    "neighbour",
    "read_marker",
    "thaw",
    "unfinished",
    "tombstones",
    "write_marker",
    "write_tombstone",
]

APPLY_WAIT_S = 10.0  # how long step 2 waits for every replica to apply the freeze
_POLL_S = 0.02
FREEZING, MERGING = "freezing", "merging"
_TOMBSTONE = b"merged/"


@dataclass(frozen=True, slots=True)
class MergeMarker:
    """A right-hand range's state in a merge: frozen for ``into`` (``freezing``), or
    decided (``merging``)."""

    into: int
    state: str


def _key(range_id: int) -> bytes:
    return b"merging/" + range_id.to_bytes(8, "big")


def neighbour(reader: Reader, desc: RangeDescriptor) -> RangeDescriptor | None:
    """The range right of ``desc`` if this store holds it too (a merge needs both here;
    in a sharded cluster the neighbour is often on another node)."""
    if desc.end == KEY_MAX:
        return None
    try:
        return descriptor_for_key(reader, desc.end)
    except RangeKeyMismatchError:
        return None


def write_tombstone(rw: ReadWriter, range_id: int) -> None:
    """``range_id`` merged away here: a message for it (from a replica that has not
    applied the merge yet) must never make this store start an empty replica of it,
    which the range's leader would take for the one it knew (its log long gone)."""
    rw.put(META, _TOMBSTONE + range_id.to_bytes(8, "big"), b"")


def tombstones(reader: Reader) -> list[int]:
    """The ranges merged away on this store (:func:`write_tombstone`)."""
    found = reader.scan(META, _TOMBSTONE, prefix_end(_TOMBSTONE))
    return [int.from_bytes(key[len(_TOMBSTONE) :], "big") for key, _ in found]


def read_marker(reader: Reader, range_id: int) -> MergeMarker | None:
    raw = reader.get(META, _key(range_id))
    if raw is None:
        return None
    into, state = msgpack.unpackb(raw)
    return MergeMarker(into, state)


def write_marker(rw: ReadWriter, range_id: int, marker: MergeMarker | None) -> None:
    if marker is None:
        rw.delete(META, _key(range_id))
    else:
        rw.put(META, _key(range_id), msgpack.packb([marker.into, marker.state]))


def merge(
    ctx: CommandContext, loop: ReplicaLoop, engine: Engine, left_id: int, request: Merge
) -> Applied:
    """Merge ``left_id`` (replicated, its lease here) with its right-hand neighbour;
    see the module docstring. Returns the merge's result, as the left range's command."""
    with engine.snapshot() as snap:
        left = descriptor_by_id(snap, left_id)
        if left is None:
            raise RangeUnavailableError(f"range r{left_id} is not here")
        if left.end == KEY_MAX:
            raise InvalidArgumentError(f"cannot merge {left}: it is the last range")
        right = neighbour(snap, left)
        if right is None:
            raise InvalidArgumentError(f"cannot merge {left}: its neighbour is on other nodes")
        marker = read_marker(snap, right.range_id)
    if request.automatic and right.sticky:
        return Applied(BatchResponse((MergeResponse(left),), ctx.clock.now(), None), left_id)
    _check_together(loop, left, right)
    if marker is None:
        _set_marker(ctx, loop, right, None, MergeMarker(left.range_id, FREEZING))
        marker = MergeMarker(left.range_id, FREEZING)
    if marker.into != left.range_id:
        raise RangeUnavailableError(f"{right} is merging into r{marker.into}")
    if marker.state == FREEZING:
        if not _wait_applied_everywhere(loop, right.range_id):
            _set_marker(ctx, loop, right, marker, None)
            raise RangeUnavailableError(
                f"not every replica of {right} applied its freeze in {APPLY_WAIT_S:.0f} s "
                "(a node is down?): the merge is given up and the range serves again"
            )
        try:
            # NB: the members checked in the deciding command: a change of either
            # range's members after it is refused (Store.add_replica)
            decided = MergeMarker(left.range_id, MERGING)
            members = lambda: _check_members(loop, left, right)  # noqa: E731
            _set_marker(ctx, loop, right, marker, decided, members)
        except RangeUnavailableError:
            _set_marker(ctx, loop, right, marker, None)
            raise
    return _merge_left(ctx, loop, left, right)


def _check_members(loop: ReplicaLoop, left: RangeDescriptor, right: RangeDescriptor) -> None:
    settled = loop.members_settled(left.range_id) and loop.members_settled(right.range_id)
    members = loop.members(left.range_id), loop.members(right.range_id)
    # NB: 0 is a member whose node this store does not know: two such are not alike
    unknown = any(0 in conf.voters or 0 in conf.learners for conf in members)
    if not settled or unknown or members[0] != members[1]:
        raise RangeUnavailableError(f"{left} or {right} changed members under the merge")


def _check_together(loop: ReplicaLoop, left: RangeDescriptor, right: RangeDescriptor) -> None:
    if loop.members(left.range_id) != loop.members(right.range_id):
        raise InvalidArgumentError(
            f"cannot merge {left} and {right}: their replicas are on different nodes "
            f"({sorted(left.replicas)} and {sorted(right.replicas)}); move them together first"
        )
    if not (loop.holds_lease(left.range_id) and loop.holds_lease(right.range_id)):
        raise RangeUnavailableError(
            f"cannot merge {left} and {right} here: this node must hold both their leases"
        )


def _set_marker(
    ctx: CommandContext,
    loop: ReplicaLoop,
    right: RangeDescriptor,
    expected: MergeMarker | None,
    marker: MergeMarker | None,
    check: Callable[[], None] | None = None,
) -> None:
    """Change the right-hand range's marker through its log, if it still is ``expected``
    (a later leader may have changed it) and ``check`` passes when the command is
    evaluated."""

    def change(rw: ReadWriter) -> tuple[None, Effects]:
        held = read_marker(rw, right.range_id)
        if held != expected:
            raise RangeUnavailableError(
                f"{right}'s merge changed meanwhile ({held} instead of {expected})"
            )
        if check is not None:
            check()
        write_marker(rw, right.range_id, marker)
        return None, Effects(closed=ctx.closed.get(right.range_id), freeze=1)

    loop.propose(right.range_id, change).result(timeout=APPLY_WAIT_S)


def _wait_applied_everywhere(loop: ReplicaLoop, range_id: int) -> bool:
    """Whether every replica of ``range_id`` applied everything this store's (leading)
    replica committed so far, within ``APPLY_WAIT_S``."""
    _, committed, _ = loop.status(range_id)
    deadline = time.monotonic() + APPLY_WAIT_S
    while time.monotonic() < deadline:
        if loop.applied_everywhere(range_id, committed):
            return True
        time.sleep(_POLL_S)
    return False


def _merge_left(
    ctx: CommandContext, loop: ReplicaLoop, left: RangeDescriptor, right: RangeDescriptor
) -> Applied:
    batch = BatchRequest(Header(range_id=left.range_id), (Merge(left.start),))

    def command(view: ReadWriter) -> tuple[Applied, Effects]:
        marker = read_marker(view, right.range_id)
        if marker != MergeMarker(left.range_id, MERGING):
            raise RangeUnavailableError(f"{right} is not decided to merge into {left}: {marker}")
        _check_members(loop, left, right)
        applied = evaluate(ctx, view, batch, replicated=True)
        write_marker(view, right.range_id, None)
        closed = ctx.closed.get(left.range_id)
        return applied, Effects(closed=closed, merges=((left.range_id, right.range_id),))

    result: Applied = loop.propose(left.range_id, command).result(timeout=APPLY_WAIT_S)
    return result


def unfinished(
    reader: Reader, loop: ReplicaLoop, coordinating: set[int]
) -> tuple[list[RangeDescriptor], list[tuple[RangeDescriptor, MergeMarker]]]:
    """The merges nobody carries on, among the ranges whose lease this store holds:
    left ranges whose right-hand neighbour was decided to merge into them (to finish:
    :func:`merge` goes on from the marker), and right-hand ranges still ``freezing``
    that this store does not coordinate (to thaw: a coordinator elsewhere can no longer
    decide them, as deciding goes through the right-hand range's log, whose lease is
    here now)."""
    finish: list[RangeDescriptor] = []
    thaw: list[tuple[RangeDescriptor, MergeMarker]] = []
    for range_id in loop.leases():
        desc = descriptor_by_id(reader, range_id)
        if desc is None:
            continue
        marker = read_marker(reader, range_id)
        if marker is not None and marker.state == FREEZING and range_id not in coordinating:
            thaw.append((desc, marker))
        right = neighbour(reader, desc)
        if right is not None and read_marker(reader, right.range_id) == MergeMarker(
            range_id, MERGING
        ):
            finish.append(desc)
    return finish, thaw


def thaw(
    ctx: CommandContext, loop: ReplicaLoop, right: RangeDescriptor, marker: MergeMarker
) -> None:
    """Give up the merge ``right`` froze for (see :func:`unfinished`)."""
    _set_marker(ctx, loop, right, marker, None)
