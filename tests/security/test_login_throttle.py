"""The failed-login throttle: per user and host, with a window, in bounded memory."""

from __future__ import annotations

from feedkv.security.login_throttle import LoginThrottle


def test_failures_past_the_limit_hold_the_pair_for_the_window() -> None:
    throttle = LoginThrottle(max_failures=2, window_s=10)
    throttle.failed("u", "h", 0.0)
    assert throttle.retry_after("u", "h", 0.5) == 0
    throttle.failed("u", "h", 1.0)
    assert throttle.retry_after("u", "h", 2.0) == 9.0
    assert throttle.retry_after("u", "other-host", 2.0) == 0
    assert throttle.retry_after("other-user", "h", 2.0) == 0
    assert throttle.retry_after("u", "h", 11.0) == 0


def test_old_failures_do_not_add_up_and_a_success_clears_them() -> None:
    throttle = LoginThrottle(max_failures=2, window_s=10)
    throttle.failed("u", "h", 0.0)
    throttle.failed("u", "h", 20.0)  # the first is too old to count
    assert throttle.retry_after("u", "h", 21.0) == 0
    throttle.failed("u", "h", 22.0)
    assert throttle.retry_after("u", "h", 23.0) > 0
    throttle.succeeded("u", "h")
    assert throttle.retry_after("u", "h", 23.0) == 0


def test_memory_stays_bounded_under_many_hosts() -> None:
    throttle = LoginThrottle(max_failures=1, window_s=1000, max_keys=100)
    for i in range(1000):
        throttle.failed("u", f"h{i}", float(i))
    assert len(throttle._failures) <= 100
    assert throttle.retry_after("u", "h999", 999.0) > 0
