"""What a leader knows of one follower's log, and how fast it may send to it.

``match`` is the highest index known to be on the follower; ``next`` the index of the
next entry to send. A follower is in one of three states (as in etcd's raft):

- ``PROBE``: the leader does not know where the logs match. It sends one append at a
  time and waits for the answer (or the next heartbeat answer) before the next one,
  stepping ``next`` back on each rejection.
- ``REPLICATE``: the logs match up to ``match``. The leader streams appends
  optimistically (``next`` moves on at send), at most ``max_inflight`` unacknowledged.
- ``SNAPSHOT``: the entries the follower needs are compacted away; a snapshot is on its
  way and nothing else is sent until the caller reports how it went
  (``RaftState.report_snapshot``) or the follower acknowledges it.
"""

from __future__ import annotations

from collections import deque
from enum import Enum

__all__ = ["Progress", "ProgressState"]


class ProgressState(Enum):
    PROBE = "probe"
    REPLICATE = "replicate"
    SNAPSHOT = "snapshot"


class Progress:
    __slots__ = (
        "applied",
        "commit_sent",
        "inflight",
        "is_learner",
        "match",
        "max_inflight",
        "next",
        "pending_snapshot",
        "probe_sent",
        "recent_active",
        "round",
        "state",
    )

    def __init__(self, next_index: int, max_inflight: int, *, is_learner: bool = False) -> None:
        self.match = 0
        self.applied = 0  # the highest applied index the follower told (heartbeat answers)
        self.next = next_index
        self.state = ProgressState.PROBE
        self.probe_sent = False
        self.pending_snapshot = 0
        self.recent_active = False
        self.round = 0  # the newest heartbeat round the follower answered
        self.commit_sent = 0  # the commit index the last append to it carried
        self.is_learner = is_learner
        self.max_inflight = max_inflight
        self.inflight: deque[int] = deque()  # last index of each unacknowledged append

    def __repr__(self) -> str:
        return (
            f"Progress({self.state.value}, match={self.match}, next={self.next}, "
            f"inflight={len(self.inflight)})"
        )

    def become_probe(self) -> None:
        if self.state is ProgressState.SNAPSHOT:
            self.next = max(self.match + 1, self.pending_snapshot + 1)
        else:
            self.next = self.match + 1
        self._reset(ProgressState.PROBE)

    def become_replicate(self) -> None:
        self.next = self.match + 1
        self._reset(ProgressState.REPLICATE)

    def become_snapshot(self, index: int) -> None:
        self._reset(ProgressState.SNAPSHOT)
        self.pending_snapshot = index

    def _reset(self, state: ProgressState) -> None:
        self.state = state
        self.probe_sent = False
        self.pending_snapshot = 0
        self.inflight.clear()

    def is_paused(self) -> bool:
        """Whether the leader must hold back appends to this follower for now."""
        if self.state is ProgressState.PROBE:
            return self.probe_sent
        if self.state is ProgressState.REPLICATE:
            return len(self.inflight) >= self.max_inflight
        return True

    def maybe_update(self, index: int) -> bool:
        """The follower holds the leader's log up to ``index``; whether ``match`` moved
        (a stale or duplicated acknowledgement does not move it)."""
        updated = index > self.match
        if updated:
            self.match = index
            self.probe_sent = False
        self.next = max(self.next, index + 1)
        while self.inflight and self.inflight[0] <= index:
            self.inflight.popleft()
        return updated

    def sent(self, last_index: int) -> None:
        """An append carrying entries up to ``last_index`` went out."""
        if self.state is ProgressState.REPLICATE:
            self.next = last_index + 1
            self.inflight.append(last_index)
        elif self.state is ProgressState.PROBE:
            self.probe_sent = True

    def maybe_decrease_to(self, rejected: int, hint: int) -> bool:
        """The follower rejected an append after ``rejected``, and holds nothing that
        could match above ``hint``; whether ``next`` moved back (a stale rejection does
        not move it)."""
        if self.state is ProgressState.REPLICATE:
            if rejected <= self.match:
                return False
            self.next = self.match + 1
            return True
        if self.next - 1 != rejected:
            return False
        self.next = max(min(rejected, hint + 1), self.match + 1, 1)
        self.probe_sent = False
        return True
