from __future__ import annotations

from feedkv.raft.progress import Progress, ProgressState


def test_a_probe_sends_one_append_at_a_time() -> None:
    pr = Progress(next_index=10, max_inflight=4)
    assert not pr.is_paused()
    pr.sent(12)
    assert pr.is_paused()
    assert pr.next == 10  # a probe does not move on optimistically
    assert pr.maybe_update(12)
    assert not pr.is_paused()


def test_replicate_streams_up_to_the_inflight_limit() -> None:
    pr = Progress(next_index=5, max_inflight=2)
    pr.maybe_update(4)
    pr.become_replicate()
    pr.sent(6)
    assert not pr.is_paused()
    pr.sent(8)
    assert pr.is_paused()
    assert pr.next == 9
    pr.maybe_update(6)
    assert not pr.is_paused()
    assert list(pr.inflight) == [8]


def test_a_stale_rejection_does_not_move_next() -> None:
    pr = Progress(next_index=10, max_inflight=4)
    assert not pr.maybe_decrease_to(5, 3)  # answers an older probe
    assert pr.maybe_decrease_to(9, 3)
    assert pr.next == 4
    pr.maybe_update(3)
    pr.become_replicate()
    pr.sent(8)
    assert not pr.maybe_decrease_to(2, 0)
    assert pr.maybe_decrease_to(6, 0)
    assert pr.next == 4


def test_snapshot_pauses_until_acknowledged_then_resumes_after_it() -> None:
    pr = Progress(next_index=3, max_inflight=4)
    pr.become_snapshot(50)
    assert pr.state is ProgressState.SNAPSHOT
    assert pr.is_paused()
    pr.become_probe()
    assert pr.next == 51
