"""The feed validator: every rangefeed contract it checks is caught when broken, and a
feed that keeps them all (once, or redelivered at least once) passes clean."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest

from feedkv.errors import InvalidArgumentError
from feedkv.rangefeed.event import Checkpoint, Error, ErrorReason, Event, Value
from feedkv.storage.export import ExportedVersion
from feedkv.testing.feed_validator import (
    CommittedVersion,
    Contract,
    FeedValidator,
    Version,
    Violation,
    assert_valid,
    check_resolved_feed,
)
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

SPAN = Span(b"a", b"n")
SINCE = Timestamp(10)


def ts(wall: int, logical: int = 0) -> Timestamp:
    return Timestamp(wall, logical)


def val(key: bytes, wall: int, value: bytes | None, prev: bytes | None = None) -> Value:
    return Value(key, value, ts(wall), prev)


def cp(wall: int, span: Span = SPAN) -> Checkpoint:
    return Checkpoint(span, ts(wall))


def run(
    events: Sequence[Event],
    history: Sequence[CommittedVersion],
    *,
    spans: Sequence[Span] = (SPAN,),
    since: Timestamp = SINCE,
    with_diff: bool = False,
    allow_duplicates: bool = False,
    up_to: Timestamp | None = None,
) -> list[Violation]:
    validator = FeedValidator(spans, since, with_diff, allow_duplicates=allow_duplicates)
    validator.observe_all(events)
    assert validator.events == len(events)
    return validator.check(history, up_to)


def contracts(violations: Sequence[Violation]) -> list[str]:
    return [v.contract for v in violations]


# b"b": written below the base, updated twice, deleted; b"c": created after the base;
# b"d": deleted below the base, then written again.
HISTORY = [
    Version(b"b", ts(5), b"b5"),
    Version(b"d", ts(6), b"d6"),
    Version(b"d", ts(8), None),
    Version(b"b", ts(12), b"b12"),
    Version(b"c", ts(13), b"c13"),
    Version(b"d", ts(14), b"d14"),
    Version(b"b", ts(15), None),
    Version(b"c", ts(16), b"c16"),
    Version(b"b", ts(17), b"b17"),
]

CLEAN_FEED: list[Event] = [
    val(b"c", 13, b"c13", None),
    val(b"b", 12, b"b12", b"b5"),  # another key's older value may come later
    cp(13),
    val(b"d", 14, b"d14", None),  # its previous version is a deletion
    cp(14),
    val(b"b", 15, None, b"b12"),
    val(b"c", 16, b"c16", b"c13"),
    cp(16),
    cp(16),  # the same checkpoint again promises nothing new
    val(b"b", 17, b"b17", None),
    cp(20),
    Error(ErrorReason.UNREGISTERED),
]


def without_diffs(events: Sequence[Event]) -> list[Event]:
    return [Value(e.key, e.value, e.ts) if isinstance(e, Value) else e for e in events]


@pytest.mark.parametrize("with_diff", [False, True])
def test_a_feed_that_keeps_every_promise_has_no_violations(with_diff: bool) -> None:
    events = CLEAN_FEED if with_diff else without_diffs(CLEAN_FEED)
    assert run(events, HISTORY, with_diff=with_diff) == []


def test_redelivered_values_pass_when_duplicates_are_allowed() -> None:
    # A consumer stored checkpoint 13, died after checkpoint 16 and resumed from 13: the
    # values above 13 come again, some of them below checkpoint 16.
    first_run = CLEAN_FEED[:8]
    resumed = [val(b"d", 14, b"d14", None), val(b"b", 15, None, b"b12"), *CLEAN_FEED[6:]]
    events = first_run + resumed
    assert run(events, HISTORY, with_diff=True, allow_duplicates=True) == []
    strict = run(events, HISTORY, with_diff=True)
    assert set(contracts(strict)) == {Contract.PER_KEY_ORDER, Contract.CHECKPOINT}


def test_a_resumed_run_that_checkpoints_lower_is_reported_only_as_checkpoint_order() -> None:
    first_run = without_diffs(CLEAN_FEED[:8])  # ends with checkpoint 16
    resumed: list[Event] = [
        val(b"d", 14, b"d14"),
        cp(14),
        val(b"b", 15, None),
        val(b"b", 17, b"b17"),
        cp(20),
    ]
    violations = run(first_run + resumed, HISTORY, allow_duplicates=True)
    assert contracts(violations) == [Contract.CHECKPOINT_ORDER]
    assert violations[0].event_index == 9


def test_a_value_at_or_below_the_base_timestamp_is_reported() -> None:
    history = [Version(b"b", ts(9), b"old"), Version(b"b", SINCE, b"base")]
    violations = run([val(b"b", 9, b"old"), val(b"b", 10, b"base")], history)
    assert contracts(violations) == [Contract.EXCLUSIVE_BASE] * 2
    assert [v.event_index for v in violations] == [0, 1]
    assert "at or below the feed's base timestamp 10.0000000000" in violations[1].message


def test_values_of_one_key_out_of_timestamp_order_are_reported() -> None:
    history = [Version(b"b", ts(12), b"x"), Version(b"b", ts(13), b"y")]
    violations = run([val(b"b", 13, b"y"), val(b"b", 12, b"x")], history)
    assert contracts(violations) == [Contract.PER_KEY_ORDER]
    assert violations[0].key == b"b"
    assert violations[0].message == (
        "event #1: value of key b'b' at 12.0000000000 is older than event #0 of the same key "
        "at 13.0000000000"
    )


def test_a_repeated_value_is_reported_unless_duplicates_are_allowed() -> None:
    history = [Version(b"b", ts(12), b"x"), Version(b"c", ts(13), b"y")]
    events = [val(b"b", 12, b"x"), val(b"c", 13, b"y"), val(b"b", 12, b"x")]
    violations = run(events, history)
    assert contracts(violations) == [Contract.PER_KEY_ORDER]
    assert "repeats event #0" in violations[0].message
    assert run(events, history, allow_duplicates=True) == []


def test_an_unseen_older_value_is_reported_even_when_duplicates_are_allowed() -> None:
    history = [Version(b"b", ts(12), b"x"), Version(b"b", ts(13), b"y")]
    events = [val(b"b", 13, b"y"), val(b"b", 12, b"x"), val(b"b", 13, b"y")]
    violations = run(events, history, allow_duplicates=True)
    assert contracts(violations) == [Contract.PER_KEY_ORDER]
    assert violations[0].event_index == 1


def test_a_different_value_at_a_seen_timestamp_is_not_a_duplicate() -> None:
    history = [Version(b"b", ts(12), b"x")]
    events = [val(b"b", 12, b"x"), val(b"b", 12, b"intermediate")]
    violations = run(events, history, allow_duplicates=True)
    assert contracts(violations) == [Contract.PER_KEY_ORDER, Contract.COMMITTED_ONLY]
    assert "second value at the timestamp of event #0" in violations[0].message


def test_a_value_below_a_checkpoint_is_reported() -> None:
    history = [Version(b"b", ts(12), b"x"), Version(b"c", ts(15), b"y")]
    events: list[Event] = [val(b"c", 15, b"y"), cp(15), val(b"b", 12, b"x")]
    violations = run(events, history)
    assert contracts(violations) == [Contract.CHECKPOINT]
    assert violations[0].message == (
        "event #2: value of key b'b' at 12.0000000000 follows checkpoint #1 of [b'a', b'n') "
        "at 15.0000000000, which promised nothing at or below it"
    )


def test_a_value_at_exactly_the_checkpoint_timestamp_is_reported() -> None:
    history = [Version(b"b", ts(15), b"x")]
    assert contracts(run([cp(15), val(b"b", 15, b"x")], history)) == [Contract.CHECKPOINT]


def test_a_checkpoint_binds_only_its_own_span() -> None:
    left, right = Span(b"a", b"g"), Span(b"g", b"n")
    history = [Version(b"b", ts(12), b"x"), Version(b"h", ts(12), b"y")]
    events: list[Event] = [
        val(b"b", 12, b"x"),
        Checkpoint(left, ts(20)),
        val(b"h", 12, b"y"),
        cp(20),
    ]
    assert run(events, history, spans=[left, right]) == []


def test_a_checkpoint_that_goes_backwards_is_reported() -> None:
    events = [cp(15), cp(15), Checkpoint(Span(b"c", b"e"), ts(12)), cp(16)]
    violations = run(events, [])
    assert contracts(violations) == [Contract.CHECKPOINT_ORDER]
    assert violations[0].message == (
        "event #2: checkpoint of [b'c', b'e') at 12.0000000000 goes back from checkpoint #0 "
        "of [b'a', b'n') at 15.0000000000"
    )


def test_a_committed_version_that_was_never_emitted_is_reported() -> None:
    history = [Version(b"b", ts(12), b"x"), Version(b"c", ts(13), b"lost")]
    violations = run([val(b"b", 12, b"x"), cp(13)], history)
    assert contracts(violations) == [Contract.COMPLETENESS]
    assert violations[0].key == b"c"
    assert violations[0].event_index is None
    assert violations[0].message == (
        "committed value b'lost' of key b'c' at 13.0000000000 was never emitted, though it is "
        "above the base 10.0000000000 and at or below checkpoint #1 of [b'a', b'n') at "
        "13.0000000000"
    )


def test_completeness_is_required_only_up_to_each_keys_checkpoint() -> None:
    left, right, unchecked = Span(b"a", b"g"), Span(b"g", b"n"), Span(b"p", b"q")
    history = [
        Version(b"b", ts(14), b"missing"),  # left is resolved to 15: reported
        Version(b"b", ts(16), b"later"),  # above left's checkpoint
        Version(b"h", ts(14), b"pending"),  # right is resolved to 12 only
        Version(b"p", ts(11), b"unresolved"),  # no checkpoint ever covered p
        Version(b"x", ts(11), b"elsewhere"),  # outside the feed's spans
    ]
    events = [Checkpoint(left, ts(15)), Checkpoint(right, ts(12))]
    violations = run(events, history, spans=[left, right, unchecked])
    assert contracts(violations) == [Contract.COMPLETENESS]
    assert violations[0].key == b"b"


def test_an_explicit_up_to_bounds_completeness() -> None:
    history = [Version(b"b", ts(12), b"x"), Version(b"c", ts(14), b"y")]
    events: list[Event] = [val(b"b", 12, b"x")]
    assert run(events, history, up_to=ts(13)) == []
    violations = run(events, history, up_to=ts(14))
    assert contracts(violations) == [Contract.COMPLETENESS]
    assert "at or below up_to 14.0000000000" in violations[0].message


def test_an_aborted_or_intermediate_write_that_was_emitted_is_reported() -> None:
    history = [Version(b"b", ts(12), b"final")]
    events = [val(b"b", 11, b"intermediate"), val(b"b", 12, b"final"), val(b"c", 13, b"aborted")]
    violations = run(events, history)
    assert contracts(violations) == [Contract.COMMITTED_ONLY] * 2
    assert [v.key for v in violations] == [b"b", b"c"]
    assert "is not a committed version" in violations[1].message


def test_a_value_that_differs_from_the_committed_one_is_reported() -> None:
    history = [Version(b"b", ts(12), b"right"), Version(b"c", ts(12), None)]
    violations = run([val(b"b", 12, b"wrong"), val(b"c", 12, b"resurrected")], history)
    assert contracts(violations) == [Contract.COMMITTED_ONLY] * 2
    assert violations[0].message == (
        "event #0: value b'wrong' of key b'b' at 12.0000000000 differs from the committed "
        "value b'right'"
    )
    assert "the committed value None (a deletion)" in violations[1].message


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        (
            val(b"b", 12, b"b12", b"stale"),
            "the committed value below it is b'b5' (at 5.0000000000)",
        ),
        (val(b"b", 12, b"b12", None), "the committed value below it is b'b5' (at 5.0000000000)"),
        (
            val(b"b", 17, b"b17", b"b12"),
            "the committed value below it is None (a deletion) (at 15.0000000000)",
        ),
        (val(b"c", 13, b"c13", b"c16"), "there is no earlier version"),
    ],
)
def test_a_wrong_prev_value_is_reported(event: Value, expected: str) -> None:
    violations = run([event], HISTORY, with_diff=True)
    assert contracts(violations) == [Contract.DIFF]
    assert violations[0].message.endswith(expected)


def test_a_prev_value_without_with_diff_is_reported() -> None:
    history = [Version(b"b", ts(5), b"b5"), Version(b"b", ts(12), b"b12")]
    violations = run([val(b"b", 12, b"b12", b"b5")], history)
    assert contracts(violations) == [Contract.DIFF]
    assert "did not ask for diffs" in violations[0].message


def test_an_event_after_an_error_is_reported() -> None:
    history = [Version(b"b", ts(12), b"x")]
    events: list[Event] = [
        cp(11),
        Error(ErrorReason.RANGE_SPLIT, "r1 split"),
        val(b"b", 12, b"x"),
        cp(12),
    ]
    violations = run(events, history)
    assert contracts(violations) == [Contract.ERROR_LAST]
    assert violations[0].event_index == 2
    assert violations[0].message == (
        "event #2 (value of key b'b' at 12.0000000000) follows the stream's end, "
        "error #1 (RANGE_SPLIT: 'r1 split') (1 more follow)"
    )


def test_an_error_as_the_last_event_is_accepted() -> None:
    assert run([cp(12), Error(ErrorReason.SLOW_CONSUMER)], []) == []


def test_a_value_or_checkpoint_outside_the_spans_is_reported() -> None:
    history = [Version(b"b", ts(12), b"x")]
    events: list[Event] = [
        val(b"b", 12, b"x"),
        val(b"x", 12, b"y"),
        Checkpoint(Span(b"m", b"p"), ts(12)),
    ]
    violations = run(events, history)
    assert contracts(violations) == [Contract.IN_SPANS] * 2
    assert [v.event_index for v in violations] == [1, 2]
    assert "outside the feed's spans [b'a', b'n')" in violations[0].message


def test_exported_versions_serve_as_history() -> None:
    history = [ExportedVersion(v.key, v.ts, v.value) for v in HISTORY]
    assert run(CLEAN_FEED, list(reversed(history)), with_diff=True) == []
    validator = FeedValidator([SPAN], SINCE, True)
    validator.observe_all(CLEAN_FEED)
    assert validator.check(history) == []


def test_a_history_with_two_values_for_one_version_is_rejected() -> None:
    history = [
        Version(b"b", ts(12), b"x"),
        Version(b"b", ts(12), b"x"),
        Version(b"b", ts(12), b"y"),
    ]
    with pytest.raises(InvalidArgumentError, match=r"two values for key b'b' at 12\.0000000000"):
        run([], history)


def test_a_validator_needs_a_span() -> None:
    with pytest.raises(InvalidArgumentError, match="at least one non-empty span"):
        FeedValidator([], SINCE)


def test_check_can_be_called_again_after_more_events() -> None:
    validator = FeedValidator([SPAN], SINCE)
    history = [Version(b"b", ts(12), b"x")]
    validator.observe(cp(12))
    assert contracts(validator.check(history)) == [Contract.COMPLETENESS]
    assert contracts(validator.check(history)) == [Contract.COMPLETENESS]
    validator.observe(val(b"b", 12, b"x"))
    assert contracts(validator.check(history)) == [Contract.CHECKPOINT]


def test_assert_valid_accepts_no_violations() -> None:
    assert_valid([])


def test_assert_valid_lists_at_most_twenty_violations() -> None:
    violations = [Violation(Contract.COMPLETENESS, f"missing {i}") for i in range(23)]
    with pytest.raises(AssertionError) as raised:
        assert_valid(violations)
    text = str(raised.value)
    assert text.startswith("the feed broke 23 promise(s):\n  [completeness] missing 0\n")
    assert "missing 19" in text
    assert "missing 20" not in text
    assert text.endswith("... and 3 more")


def random_feed(
    rng: random.Random, *, with_diff: bool, redeliver: bool
) -> tuple[list[Event], list[Version]]:
    """A feed over random history that keeps every promise: per-key queues merged in a
    random order, checkpoints just below the oldest value not yet sent."""
    keys = [b"k%d" % i for i in range(6)]
    history: list[Version] = []
    for wall in range(1, 120):
        for key in rng.sample(keys, rng.randrange(3)):
            value = None if rng.random() < 0.2 else b"%s@%d" % (key, wall)
            history.append(Version(key, ts(wall, rng.randrange(2)), value))
    since = ts(30)
    prev: dict[bytes, bytes | None] = {}
    queues: dict[bytes, list[Value]] = {}
    for version in history:
        if version.ts > since:
            diff = prev.get(version.key) if with_diff else None
            queues.setdefault(version.key, []).append(
                Value(version.key, version.value, version.ts, diff)
            )
        prev[version.key] = version.value
    events: list[Event] = []
    sent: list[Value] = []
    while queues:
        key = rng.choice(sorted(queues))
        sent.append(queues[key].pop(0))
        events.append(sent[-1])
        if not queues[key]:
            del queues[key]
        if redeliver and rng.random() < 0.1:
            events.append(rng.choice(sent))
        if rng.random() < 0.2:
            pending = [q[0].ts for q in queues.values()]
            resolved = min(pending).prev() if pending else ts(200)
            if resolved > since:
                events.append(Checkpoint(Span(b"k", b"l"), resolved))
    events.append(Checkpoint(Span(b"k", b"l"), ts(200)))
    return events, history


@pytest.mark.parametrize("seed", range(6))
def test_random_clean_feeds_pass_and_a_dropped_value_is_found(seed: int) -> None:
    rng = random.Random(seed)
    with_diff, redeliver = seed % 2 == 0, seed % 3 == 0
    events, history = random_feed(rng, with_diff=with_diff, redeliver=redeliver)
    spans = [Span(b"k", b"l")]
    since = ts(30)
    clean = run(
        events, history, spans=spans, since=since, with_diff=with_diff, allow_duplicates=redeliver
    )
    assert clean == []
    sent_once = [i for i, e in enumerate(events) if isinstance(e, Value) and events.count(e) == 1]
    dropped = events.pop(rng.choice(sent_once))
    assert isinstance(dropped, Value)
    violations = run(
        events, history, spans=spans, since=since, with_diff=with_diff, allow_duplicates=redeliver
    )
    assert contracts(violations) == [Contract.COMPLETENESS]
    assert violations[0].key == dropped.key
    assert f"at {dropped.ts} was never emitted" in violations[0].message


class _History:
    """What a store holds, as ``db.export`` gives it."""

    def __init__(self, versions: Sequence[Version]) -> None:
        self.versions = versions

    def export(self, span: Span, lo: Timestamp, hi: Timestamp) -> list[Version]:
        return [v for v in self.versions if span.contains_key(v.key) and lo < v.ts <= hi]


def test_a_resolved_feed_is_checked_against_the_exported_history() -> None:
    history = _History([Version(b"b", ts(11), b"1"), Version(b"c", ts(12), b"2")])
    events = [val(b"b", 11, b"1"), val(b"c", 12, b"2"), cp(12)]
    assert check_resolved_feed(events, history, SPAN, SINCE, ts(12)) == history.versions
    with pytest.raises(AssertionError, match=r"broke 1 promise"):
        check_resolved_feed(events[1:], history, SPAN, SINCE, ts(12))


def test_a_feed_short_of_the_last_write_fails_the_check() -> None:
    history = _History([Version(b"b", ts(11), b"1")])
    with pytest.raises(AssertionError, match=r"did not resolve .* checkpoint of .* at 10"):
        check_resolved_feed([cp(10)], history, SPAN, SINCE, ts(11))
    with pytest.raises(AssertionError, match=r"its last event: none"):
        check_resolved_feed([], history, SPAN, SINCE, ts(11))
