"""The pure parts of the cluster nemesis: the kill plan, resume times, percentiles."""

from __future__ import annotations

import math

import pytest

from feedkv.errors import InvalidArgumentError
from feedkv.testing.cluster_nemesis import ROLES, percentile, plan_kills, resume_times


def test_a_plan_covers_every_role_first_and_is_the_same_for_a_seed() -> None:
    plan = plan_kills(7, 20)
    assert [s.role for s in plan[:3]] == list(ROLES)
    assert {s.role for s in plan} <= set(ROLES)
    assert plan == plan_kills(7, 20) and plan != plan_kills(8, 20)
    assert all(0.5 <= s.pause_s <= 3.0 and 0.2 <= s.down_s <= 3.0 for s in plan)
    assert [s.role for s in plan_kills(7, 2)] == list(ROLES[:2])
    with pytest.raises(InvalidArgumentError):
        plan_kills(7, -1)


def test_writes_resume_at_the_end_of_the_first_success_that_started_after_the_kill() -> None:
    writes = [(0.0, 1.0), (9.5, 10.5), (10.2, 14.0), (11.0, 12.5), (20.0, 20.1)]
    # at 10: the write begun at 9.5 does not count; of those begun later, 11.0's ends first
    assert resume_times([10.0], writes) == [2.5]
    assert resume_times([20.0], writes) == [pytest.approx(0.1)]
    assert math.isinf(resume_times([30.0], writes)[0])  # never resumed


def test_percentiles_by_nearest_rank() -> None:
    values = [5.0, 1.0, 3.0, 2.0, 4.0]
    assert percentile(values, 0.5) == 3.0
    assert percentile(values, 1.0) == 5.0
    assert percentile(values, 0.0) == 1.0
    assert percentile([1.0, 2.0], 0.5) == 1.0
    with pytest.raises(InvalidArgumentError):
        percentile([], 0.5)
