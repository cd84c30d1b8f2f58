"""Tests for a processor that takes a commit group's ops together (``group=``).

A store's processors are given each command's ops as it applies; with a group list they
hold them until the store's feeds take the group (once it is applied), and any other
call first takes what they hold. Readers see the values once the group is taken, in the
same order and with the same checkpoints as a processor that takes each command's ops
at once: the property test runs random commands (plain writes and deletes in and out of
a registration's span, transactions' intents and commits), closed timestamps and group
ends through both and compares everything each registration reads.

Each test drives a real processor, registrations, streams and budget on one thread.
"""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from feedkv.rangefeed.budget import Budget
from feedkv.rangefeed.event import Checkpoint, Error, ErrorReason, Event, Value
from feedkv.rangefeed.processor import Processor
from feedkv.rangefeed.registration import Registration
from feedkv.rangefeed.stream import EventStream
from feedkv.storage.logical_ops import CommitIntent, LogicalOp, WriteIntent, WriteValue
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

RANGE = Span(b"a", b"z")
SPAN = Span(b"c", b"m")  # the partial registration's span
CLOSED = Timestamp(5, 0)
START = Timestamp(5, 0)  # exclusive


def t(wall: int) -> Timestamp:
    return Timestamp(wall, 0)


def grouped(budget: Budget) -> tuple[Processor, list[Processor]]:
    group: list[Processor] = []
    processor = Processor(1, RANGE, budget, group=group)
    processor.init([], CLOSED)
    return processor, group


def at_once(budget: Budget) -> Processor:
    processor = Processor(1, RANGE, budget)
    processor.init([], CLOSED)
    return processor


def live(processor: Processor, span: Span, *, per_registration: int = 1000) -> Registration:
    stream = EventStream(processor.budget, per_registration=per_registration)
    reg = Registration(str(span), span, START, False, stream)
    processor.register(reg)
    processor.finish_catch_up(reg)
    return reg


def taken(reg: Registration) -> list[Event]:
    return [event for _tag, event in reg.stream.take(timeout=0)]


def end_group(group: list[Processor]) -> None:
    """What the store's feeds do once a group is applied."""
    for processor in group:
        processor.take_group()
    group.clear()


def write(wall: int, key: bytes = b"k", value: bytes | None = b"v") -> WriteValue:
    return WriteValue(key, t(wall), value, None)


def test_a_groups_values_are_read_once_the_group_is_taken() -> None:
    processor, group = grouped(Budget(1 << 20))
    reg = live(processor, RANGE)
    assert taken(reg) == [Checkpoint(RANGE, CLOSED)]
    processor.on_ops([write(10, b"b")])
    processor.on_ops([write(11, b"d"), write(11, b"e")])
    assert group == [processor]
    assert taken(reg) == []  # held: the group is not applied yet
    end_group(group)
    assert taken(reg) == [
        Value(b"b", b"v", t(10)),
        Value(b"d", b"v", t(11)),
        Value(b"e", b"v", t(11)),
    ]


def test_a_closed_timestamp_in_the_middle_of_a_group_comes_after_its_values() -> None:
    # NB: the store publishes a replicated range's closed timestamp right after the ops
    # of the entry that carried it, in the same group: the resolved timestamp must not
    # pass a value the processor still holds (that would be an invariant violation)
    processor, group = grouped(Budget(1 << 20))
    reg = live(processor, RANGE)
    taken(reg)
    processor.on_ops([write(10), write(12, b"l")])
    processor.on_closed(t(20))
    assert taken(reg) == [
        Value(b"k", b"v", t(10)),
        Value(b"l", b"v", t(12)),
        Checkpoint(RANGE, t(20)),
    ]
    assert processor.ended is None
    end_group(group)  # nothing left to take
    assert taken(reg) == []


def test_a_write_at_or_below_the_resolved_timestamp_still_ends_every_registration() -> None:
    processor, group = grouped(Budget(1 << 20))
    reg = live(processor, RANGE)
    processor.on_closed(t(20))
    taken(reg)
    processor.on_ops([write(30, b"b"), write(20, b"c")])
    end_group(group)
    events = taken(reg)
    assert events[0] == Value(b"b", b"v", t(30))  # what came before it is delivered
    assert isinstance(events[-1], Error)
    assert events[-1].reason is ErrorReason.INVARIANT_VIOLATION
    assert processor.ended is ErrorReason.INVARIANT_VIOLATION


def test_a_group_over_the_budget_cuts_off_the_reader_holding_the_log() -> None:
    value = b"x" * 1000
    processor, group = grouped(Budget(2500))
    reg = live(processor, RANGE)
    taken(reg)
    processor.on_ops([write(10, b"b", value), write(10, b"c", value)])
    processor.on_ops([write(11, b"d", value)])
    end_group(group)
    (event,) = taken(reg)  # NB: as at once: the value that did not fit was not logged
    assert isinstance(event, Error)
    assert event.reason is ErrorReason.SLOW_CONSUMER
    assert processor.budget.used == 0  # the log went with its last reader


# --- the same reads as a processor that takes each command at once ---------------------

KEYS = [b"b", b"c", b"f", b"l", b"m", b"q"]  # in and out of SPAN, and at its bounds

steps = st.one_of(
    st.tuples(
        st.just("write"),
        st.lists(st.tuples(st.sampled_from(KEYS), st.booleans()), min_size=1, max_size=4),
    ),
    st.tuples(st.just("intent"), st.integers(0, 2), st.sampled_from(KEYS)),
    st.tuples(st.just("commit"), st.integers(0, 2)),
    st.tuples(st.just("closed"), st.integers(1, 5)),
    st.tuples(st.just("group"), st.none()),
)


def script_ops(script: list[tuple[object, ...]]) -> list[tuple[str, object]]:
    """The script as calls: ("ops", [op...]) per command, ("closed", ts), ("group", None).
    Timestamps rise by one per command; a closed timestamp stays below the next write."""
    calls: list[tuple[str, object]] = []
    now = 10
    closed = 5
    intents: dict[int, list[tuple[bytes, int]]] = {}  # txn -> (key, intent's wall)
    for kind, *args in script:
        now += 1
        if kind == "write":
            (pairs,) = args
            ops: list[LogicalOp] = [
                write(now, key, None if delete else b"v%d" % now)
                for key, delete in pairs  # type: ignore[union-attr]
            ]
            calls.append(("ops", ops))
        elif kind == "intent":
            txn, key = args
            txn_id = b"txn%d" % txn  # type: ignore[str-bytes-safe]
            assert isinstance(key, bytes)
            intents.setdefault(txn, []).append((key, now))  # type: ignore[arg-type]
            calls.append(("ops", [WriteIntent(txn_id, b"a", key, t(now))]))
        elif kind == "commit":
            (txn,) = args
            held = intents.pop(txn, [])  # type: ignore[call-overload]
            if held:
                txn_id = b"txn%d" % txn  # type: ignore[str-bytes-safe]
                ops = [CommitIntent(txn_id, key, t(now), b"c", None) for key, _ in held]
                calls.append(("ops", ops))
        elif kind == "closed":
            (step,) = args
            closed = min(closed + step, now)  # type: ignore[operator]
            calls.append(("closed", t(closed)))
        else:
            calls.append(("group", None))
    return calls


READERS = [  # the registrations' spans: one of the whole range, or only partial ones
    [RANGE, SPAN],
    [SPAN],
    [SPAN, Span(b"f", b"r")],
]


@settings(max_examples=500, deadline=None)
@example(  # the group's trim cut the whole-range reader after values only it read
    script=[
        ("write", [(b"b", False)] * 2),
        ("write", [(b"b", False)] * 4),
        ("closed", 1),
        ("write", [(b"c", False)] * 3),
    ],
    budget=600,
    spans=READERS[0],
)
@example(  # a mark moved by one command of a group, and a reader cut off in the next
    script=[
        ("closed", 4),
        ("intent", 1, b"b"),
        ("closed", 3),
        ("intent", 1, b"b"),
        ("write", [(b"b", False)] * 4),
    ],
    budget=1 << 20,
    spans=READERS[0],
)
@given(
    script=st.lists(steps, max_size=40),
    budget=st.sampled_from([1 << 20, 600]),
    spans=st.sampled_from(READERS),
)
def test_a_processor_taking_groups_reads_as_one_taking_each_command(
    script: list[tuple[object, ...]], budget: int, spans: list[Span]
) -> None:
    calls = script_ops(script)
    results = []
    for make_group in (True, False):
        budget_of = Budget(budget)
        if make_group:
            processor, group = grouped(budget_of)
        else:
            processor, group = at_once(budget_of), []
        # NB: the first reader's bound is tight (a group cuts it off), the others' loose
        regs = [
            live(processor, span, per_registration=(3, 50)[min(i, 1)])
            for i, span in enumerate(spans)
        ]
        read: list[list[Event]] = [[] for _ in regs]
        for kind, arg in calls:
            if kind == "ops":
                processor.on_ops(arg)  # type: ignore[arg-type]
            elif kind == "closed":
                processor.on_closed(arg)  # type: ignore[arg-type]
            else:
                end_group(group)
                for i, reg in enumerate(regs):  # NB: readers take between groups
                    read[i] += taken(reg)
        end_group(group)
        for i, reg in enumerate(regs):
            read[i] += taken(reg)
        results.append((read, processor.ended))
    assert results[0] == results[1]
