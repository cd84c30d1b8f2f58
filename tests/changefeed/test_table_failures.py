"""The pure state of per-table failure isolation (:mod:`feedkv.changefeed.table_failures`):
what is held, when a table is tried again, what the job's status says."""

from __future__ import annotations

from feedkv.changefeed.table_failures import TableFailures
from feedkv.util.hlc import Timestamp

NS = 1_795_000_000_000_000_000


def ts(wall: int) -> Timestamp:
    return Timestamp(wall, 0)


def test_the_high_water_mark_is_held_at_the_oldest_table_set_aside() -> None:
    failures = TableFailures(first_s=1.0, max_s=8.0)
    assert failures.hold() is None and not failures
    failures.fail(52, "a", "refused", ts(100), now=0.0, at_ns=NS)
    failures.fail(53, "b", "refused", ts(90), now=0.0, at_ns=NS)
    assert failures.hold() == ts(90)
    failures.recovered(53)
    assert failures.hold() == ts(100) and 53 not in failures and 52 in failures


def test_a_table_failing_again_waits_longer_and_keeps_its_oldest_owed_point() -> None:
    failures = TableFailures(first_s=1.0, max_s=3.0)
    first = failures.fail(52, "a", "e1", ts(100), now=10.0, at_ns=NS)
    assert (first.attempt, first.retry_at) == (1, 11.0)
    assert failures.due(10.5) == [] and failures.due(11.0) == [first]
    again = failures.fail(52, "a", "e2", ts(150), now=11.0, at_ns=NS)
    assert again is first and (again.attempt, again.retry_at, again.since) == (2, 13.0, ts(100))
    failures.fail(52, "a", "e3", ts(150), now=13.0, at_ns=NS)
    assert first.retry_at == 16.0  # capped at max_s
    assert first.error == "e3"


def test_backfills_due_while_set_aside_are_kept_in_order_once_each() -> None:
    failures = TableFailures(first_s=1.0, max_s=3.0)
    failures.fail(52, "a", "refused", ts(100), now=0.0, at_ns=NS)
    for at in (300, 200, 300, 50):
        failures.defer_backfill(52, ts(at))
    failure = failures.get(52)
    assert failure is not None and failure.backfills == [ts(200), ts(300)]  # 50: not owed


def test_the_status_names_each_table_its_error_and_the_next_try() -> None:
    failures = TableFailures(first_s=2.0, max_s=8.0)
    assert failures.status(0.0) is None
    failures.fail(52, "orders", "HTTP 409", ts(100), now=0.0, at_ns=NS)
    status = failures.status(0.5)
    assert status is not None
    assert status.startswith("running: table orders failing since ")
    assert "(attempt 1, retrying in 1.5 s): HTTP 409" in status
    assert status.endswith("the other tables go on")
    failures.clear()
    assert failures.status(0.5) is None and failures.hold() is None
