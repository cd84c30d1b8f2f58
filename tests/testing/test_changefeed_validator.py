"""The changefeed validators: each contract they check is caught when broken, a stream
that keeps them all (with at-least-once duplicates) passes clean, and a real changefeed
over a random workload passes too."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import feedkv
from feedkv import DB
from feedkv.changefeed.sinkless import FeedResult
from feedkv.errors import InvalidArgumentError
from feedkv.kv.store import StoreConfig
from feedkv.sql.session import Session
from feedkv.testing.changefeed_validator import (
    BeforeAfterValidator,
    ChangefeedMessage,
    ChangefeedValidator,
    FingerprintValidator,
    OrderValidator,
    Row,
    Validator,
    assert_no_failures,
    parse_json_message,
    sql_row_reader,
    sql_table_reader,
)
from feedkv.util.hlc import Timestamp

ABSENT: Any = object()  # a message without a "before" (no diff)


def ts(wall: int, logical: int = 0) -> Timestamp:
    return Timestamp(wall, logical)


def row(
    k: int,
    updated: int,
    after: Row | None,
    before: Row | None = ABSENT,
    *,
    mvcc: int | None = None,
    topic: str = "t",
) -> ChangefeedMessage:
    """A row message of table ``topic`` keyed ``[k]``, as the wrapped envelope has it."""
    value: dict[str, Any] = {"after": after}
    if before is not ABSENT:
        value["before"] = before
    value["updated"] = str(ts(updated))
    if mvcc is not None:
        value["mvcc_timestamp"] = str(ts(mvcc))
    return ChangefeedMessage(topic, [k], value, ts(updated))


def resolved(wall: int) -> ChangefeedMessage:
    return ChangefeedMessage(None, None, None, resolved=ts(wall))


def r(k: int, v: str) -> Row:
    return {"k": k, "v": v}


class History:
    """A table's committed versions, built by hand: ``row_at`` and ``table_at`` for it."""

    def __init__(self, versions: Sequence[tuple[int, int, Row | None]]) -> None:
        self.versions = sorted(versions, key=lambda v: v[1])  # (k, wall, row)
        self.table_reads: list[Timestamp] = []

    def row_at(self, topic: str, key: list[Any], at: Timestamp) -> Row | None:
        found = None
        for k, wall, value in self.versions:
            if [k] == key and ts(wall) <= at:
                found = value
        return found

    def table_at(self, topic: str, at: Timestamp) -> dict[tuple[Any, ...], Row]:
        self.table_reads.append(at)
        rows: dict[tuple[Any, ...], Row | None] = {}
        for k, wall, value in self.versions:
            if ts(wall) <= at:
                rows[(k,)] = value
        return {key: value for key, value in rows.items() if value is not None}


# k=1: created at 10, updated at 20, deleted at 30; k=2: created at 15, updated at 25.
HISTORY = [
    (1, 10, r(1, "a")),
    (2, 15, r(2, "x")),
    (1, 20, r(1, "b")),
    (2, 25, r(2, "y")),
    (1, 30, None),
]

CLEAN: list[ChangefeedMessage] = [
    row(1, 10, r(1, "a"), None),
    row(2, 15, r(2, "x"), None),
    resolved(15),
    row(1, 20, r(1, "b"), r(1, "a")),
    row(1, 10, r(1, "a"), None),  # a duplicate, older than what came before and resolved
    resolved(20),
    row(2, 25, r(2, "y"), r(2, "x")),
    row(1, 30, None, r(1, "b")),
    row(2, 15, r(2, "x"), None),
    row(2, 25, r(2, "y"), r(2, "x")),
    resolved(30),
    resolved(25),  # a lower marker again: promises nothing new
    resolved(40),
]


def validate(
    messages: Sequence[ChangefeedMessage], history: Sequence[tuple[int, int, Row | None]]
) -> list[str]:
    table = History(history)
    validator = ChangefeedValidator(table.row_at, table.table_at)
    validator.note_all(messages)
    return validator.failures


def tags(failures: Sequence[str]) -> list[str]:
    return [failure.split("]")[0] + "]" for failure in failures]


# Parsing.


def test_parse_json_message_reads_rows_and_resolved_markers() -> None:
    message = parse_json_message(
        "t",
        b'[1, "a"]',
        b'{"after": {"k": 1, "v": "b"}, "before": null, '
        b'"updated": "20.0000000001", "mvcc_timestamp": "20.0000000001"}',
    )
    assert message == ChangefeedMessage(
        "t",
        [1, "a"],
        {
            "after": {"k": 1, "v": "b"},
            "before": None,
            "updated": "20.0000000001",
            "mvcc_timestamp": "20.0000000001",
        },
        ts(20, 1),
    )
    assert (message.after, message.before, message.has_before) == ({"k": 1, "v": "b"}, None, True)
    assert message.mvcc_timestamp == ts(20, 1) and not message.is_resolved
    plain = parse_json_message("t", "[2]", '{"after": null}')
    assert (plain.after, plain.has_before, plain.updated, plain.mvcc_timestamp) == (
        None,
        False,
        None,
        None,
    )
    marker = parse_json_message(None, None, '{"resolved": "30.0000000000"}')
    assert marker == ChangefeedMessage(None, None, None, resolved=ts(30))
    assert marker.is_resolved and str(marker) == "resolved marker at 30.0000000000"


@pytest.mark.parametrize(
    ("key", "value", "complaint"),
    [
        ("[1]", "[1]", "not a JSON object"),
        ("1", '{"after": null}', "not a JSON array"),
        ("[1]", '{"k": 1}', 'has no "after"'),
        ("[1", '{"after": null}', "not JSON"),
        (None, '{"after": null}', "resolved marker"),
        (None, None, "resolved marker"),
        (None, '{"resolved": "soon"}', "'resolved'"),
        ("[1]", '{"after": null, "updated": 5}', "not a timestamp"),
    ],
)
def test_parse_json_message_refuses_what_is_not_the_wrapped_envelope(
    key: str | None, value: str | None, complaint: str
) -> None:
    with pytest.raises(InvalidArgumentError, match=complaint):
        parse_json_message("t", key, value)


# Each contract.


def test_a_clean_stream_with_duplicates_passes_every_check() -> None:
    table = History(HISTORY)
    validator = ChangefeedValidator(table.row_at, table.table_at)
    validator.note_all(CLEAN)
    validator.check()
    assert validator.failures == []
    # at every version's timestamp and every higher marker, once
    assert table.table_reads == [ts(10), ts(15), ts(20), ts(25), ts(30), ts(40)]


def test_order_catches_an_older_unseen_version_after_a_newer_one() -> None:
    order = OrderValidator()
    for message in [row(1, 20, r(1, "b")), row(2, 10, r(2, "x")), row(1, 10, r(1, "a"))]:
        order.note(message)
    assert order.failures == [
        "[order] message #2: t [1] at 10.0000000000 is a previously unseen version older "
        "than the one at 20.0000000000 already emitted (message #0)"
    ]
    with pytest.raises(AssertionError, match=r"broke 1 promise\(s\)"):
        order.check()


def test_order_accepts_repeats_of_seen_versions_anywhere() -> None:
    order = OrderValidator()
    stream = [row(1, 10, r(1, "a")), row(1, 20, r(1, "b")), resolved(25)]
    for message in [*stream, row(1, 10, r(1, "a")), row(1, 20, r(1, "b")), row(1, 30, None)]:
        order.note(message)
    order.check()
    assert order.failures == []


def test_resolved_catches_an_unseen_row_at_or_below_a_marker() -> None:
    order = OrderValidator()
    for message in [resolved(20), row(1, 21, r(1, "c")), row(2, 20, r(2, "x")), resolved(19)]:
        order.note(message)
    order.note(row(3, 20, r(3, "z")))  # the lower marker did not lift the higher one
    assert order.failures == [
        "[resolved] message #2: t [2] at 20.0000000000 is a previously unseen version at or "
        "below the resolved marker at 20.0000000000 (message #0)",
        "[resolved] message #4: t [3] at 20.0000000000 is a previously unseen version at or "
        "below the resolved marker at 20.0000000000 (message #0)",
    ]


def test_before_after_catches_a_wrong_after() -> None:
    table = History(HISTORY)
    check = BeforeAfterValidator(table.row_at)
    check.note(row(1, 20, r(1, "a"), r(1, "a")))
    check.note(row(1, 30, r(1, "b")))  # a deletion sent as an update
    assert check.failures == [
        '[before/after] message #0: t [1] at 20.0000000000 has after {"k": 1, "v": "a"}, '
        'but the row as of 20.0000000000 is {"k": 1, "v": "b"}',
        '[before/after] message #1: t [1] at 30.0000000000 has after {"k": 1, "v": "b"}, '
        "but the row as of 30.0000000000 is null",
    ]


def test_before_after_catches_a_wrong_before() -> None:
    table = History(HISTORY)
    check = BeforeAfterValidator(table.row_at)
    check.note(resolved(5))
    check.note(row(1, 20, r(1, "b"), r(1, "b")))  # the new row, not the old one
    check.note(row(2, 25, r(2, "y"), None))  # a missing before, after the scan
    check.note(row(1, 10, r(1, "a"), r(1, "z")))  # a before where there was no row
    assert check.failures == [
        '[before/after] message #1: t [1] at 20.0000000000 has before {"k": 1, "v": "b"}, '
        'but the row as of 19.2147483647 (one tick earlier) is {"k": 1, "v": "a"}',
        "[before/after] message #2: t [2] at 25.0000000000 has before null, but the row as "
        'of 24.2147483647 (one tick earlier) is {"k": 2, "v": "x"}',
        '[before/after] message #3: t [1] at 10.0000000000 has before {"k": 1, "v": "z"}, '
        "but the row as of 9.2147483647 (one tick earlier) is null",
    ]


def test_before_after_leaves_the_null_before_of_scan_rows_alone() -> None:
    table = History(HISTORY)
    check = BeforeAfterValidator(table.row_at)
    check.note(row(1, 22, r(1, "b"), None))  # initial scan at 22: before the first marker
    check.note(resolved(22))
    check.note(row(2, 26, r(2, "y"), None, mvcc=25))  # a backfill at 26, known by its mvcc
    check.note(row(1, 20, r(1, "b")))  # no diff: nothing to compare
    check.note(row(2, 25, r(2, "y"), None, mvcc=25))  # a change: its before is checked
    assert tags(check.failures) == ["[before/after]"]
    assert check.failures[0].startswith("[before/after] message #4: t [2] at 25.0000000000")


def test_fingerprint_catches_a_version_the_feed_missed() -> None:
    missed = [m for m in CLEAN if m.updated != ts(25)]  # k=2's update at 25 never came
    failures = validate(missed, HISTORY)
    assert failures == [
        "[fingerprint] at 30.0000000000 (the resolved marker, message #8), replaying topic t "
        'differs from its table in 1 row(s): key [2]: the feed gives {"k": 2, "v": "x"} (at '
        '15.0000000000, message #1), the table has {"k": 2, "v": "y"}',
        "[fingerprint] at 40.0000000000 (the resolved marker, message #10), replaying topic t "
        'differs from its table in 1 row(s): key [2]: the feed gives {"k": 2, "v": "x"} (at '
        '15.0000000000, message #1), the table has {"k": 2, "v": "y"}',
    ]


def test_fingerprint_at_every_update_catches_a_missed_version_a_later_one_hides() -> None:
    # k=1's update at 20 never came; its deletion at 30 hides that by the marker
    stream = [
        row(1, 10, r(1, "a")),
        row(2, 15, r(2, "x")),
        row(2, 25, r(2, "y")),
        row(1, 30, None),
        resolved(30),
    ]
    table = History(HISTORY)
    fingerprint = FingerprintValidator(table.table_at)
    for message in stream:
        fingerprint.note(message)
    assert fingerprint.failures == [
        "[fingerprint] at 25.0000000000 (an updated timestamp; checked at message #4), "
        'replaying topic t differs from its table in 1 row(s): key [1]: the feed gives {"k": '
        '1, "v": "a"} (at 10.0000000000, message #0), the table has {"k": 1, "v": "b"}'
    ]
    assert table.table_reads == [ts(10), ts(15), ts(25), ts(30)]
    at_markers = History(HISTORY)
    only_markers = FingerprintValidator(at_markers.table_at, every_update=False)
    for message in stream:
        only_markers.note(message)
    assert only_markers.failures == [] and at_markers.table_reads == [ts(30)]


def test_completeness_catches_a_missed_version_by_the_next_before() -> None:
    table = History(HISTORY)
    check = BeforeAfterValidator(table.row_at)
    check.note(resolved(5))
    check.note(row(1, 10, r(1, "a"), None))
    check.note(row(2, 15, r(2, "x"), None))
    check.note(row(1, 30, None, r(1, "b")))  # the update at 20 was never emitted
    check.note(row(2, 25, r(2, "y"), r(2, "x")))
    check.note(row(1, 10, r(1, "a"), None))  # a repeat: not a version after 30
    assert check.failures == [
        '[completeness] message #3: t [1] at 30.0000000000 has before {"k": 1, "v": "b"}, '
        "but the version emitted before it, at 10.0000000000 (message #1), has after "
        '{"k": 1, "v": "a"}: a version in between was never emitted'
    ]


def test_fingerprint_catches_rows_the_table_never_had() -> None:
    made_up = validate([*CLEAN[:2], row(3, 12, r(3, "?"), None), *CLEAN[2:]], HISTORY)
    wrong_value = [row(1, 10, r(1, "A"), None), *CLEAN[1:]]
    assert tags(made_up) == ["[before/after]"] + ["[fingerprint]"] * 6  # 12 up to 40
    assert made_up[1].startswith("[fingerprint] at 12.0000000000 (an updated timestamp")
    assert 'key [3]: the feed gives {"k": 3, "v": "?"}' in made_up[1]
    assert made_up[1].endswith("the table has no row")
    # the replay of k=1 only differs until its next version comes, at 20
    assert tags(validate(wrong_value, HISTORY)) == ["[before/after]"] + ["[fingerprint]"] * 2


def test_fingerprint_waits_for_every_partition_to_pass_a_marker() -> None:
    table = History(HISTORY)
    fingerprint = FingerprintValidator(table.table_at, partitions=["a", "b"])
    fingerprint.note(row(1, 10, r(1, "a")), "a")
    fingerprint.note(resolved(20), "a")
    assert table.table_reads == []  # b promised nothing yet
    fingerprint.note(row(2, 15, r(2, "x")), "b")
    fingerprint.note(resolved(17), "b")
    fingerprint.note(resolved(18), "a")  # a moves back: the lowest is still b's
    assert table.table_reads == [ts(10), ts(15), ts(17)]
    fingerprint.check()
    assert fingerprint.failures == []
    with pytest.raises(InvalidArgumentError, match="partition 'c' was not declared"):
        fingerprint.note(resolved(20), "c")


def test_partitions_are_ordered_each_on_their_own_and_keep_their_keys() -> None:
    table = History(HISTORY)
    validator = ChangefeedValidator(table.row_at, table.table_at, partitions=["p0", "p1"])
    validator.note_partitions(
        {
            "p0": [row(1, 10, r(1, "a")), row(1, 20, r(1, "b")), resolved(30)],
            "p1": [row(2, 25, r(2, "y")), row(2, 15, r(2, "x")), row(1, 30, None), resolved(30)],
        }
    )
    assert validator.failures == [
        "[order] message #1 of partition p1: t [2] at 15.0000000000 is a previously unseen "
        "version older than the one at 25.0000000000 already emitted (message #0 of partition "
        "p1)",
        "[partitioning] message #2 of partition p1: t [1] at 30.0000000000 is in a second "
        "partition; message #0 of partition p0 carried it first",
    ]


def test_messages_without_updated_are_refused() -> None:
    plain = parse_json_message("t", "[1]", '{"after": {"k": 1, "v": "a"}}')
    table = History(HISTORY)
    checks: list[Validator] = [
        OrderValidator(),
        BeforeAfterValidator(table.row_at),
        FingerprintValidator(table.table_at),
    ]
    for check in checks:
        with pytest.raises(InvalidArgumentError, match="WITH updated"):
            check.note(plain)
        assert check.failures == []


def test_assert_no_failures_lists_twenty_and_counts_the_rest() -> None:
    assert_no_failures([])
    with pytest.raises(AssertionError) as raised:
        assert_no_failures([f"failure {i}" for i in range(23)])
    lines = str(raised.value).splitlines()
    assert lines[0] == "the changefeed broke 23 promise(s):"
    assert lines[1:3] == ["  failure 0", "  failure 1"] and lines[20] == "  failure 19"
    assert lines[21:] == ["  ... and 3 more"]


# On a real node.


@pytest.fixture
def db(tmp_path: Path) -> Iterator[DB]:
    """An embedded node on a real LMDB store, with fast closed timestamps and no fsync
    (as in ``tests/changefeed/conftest.py``)."""
    config = StoreConfig(
        closed_ts_interval_s=0.01, closed_ts_target_ns=50_000_000, push_poll_s=0.01, sync=False
    )
    database = feedkv.connect(tmp_path / "store", config=config)
    yield database
    database.close()


FAST = "resolved='0s', min_checkpoint_frequency='0s'"
DEADLINE = 60.0


def feed(db: DB, statement: str) -> FeedResult:
    result = db.sql(statement)
    assert isinstance(result, FeedResult)
    return result


def read_until_resolved(result: FeedResult, past: Timestamp) -> list[ChangefeedMessage]:
    """Messages of ``result`` up to the first resolved marker at or above ``past``."""
    deadline = time.monotonic() + DEADLINE
    messages: list[ChangefeedMessage] = []
    while True:
        # NB: poll raises TimeoutError once the deadline has passed
        polled = result.poll(max(0.0, deadline - time.monotonic()))
        assert polled is not None, f"the changefeed ended after {len(messages)} messages"
        message = parse_json_message(*polled)
        messages.append(message)
        if message.resolved is not None and message.resolved >= past:
            return messages


def test_sql_readers_give_rows_in_the_changefeed_json_form(db: DB) -> None:
    db.sql(
        "CREATE TABLE kinds (b BYTES, day DATE, u UUID, atz TIMESTAMPTZ, d DECIMAL, f FLOAT, "
        "j JSONB, PRIMARY KEY (b, day, u, atz, d))"
    )
    db.sql("CREATE TABLE hidden (v INT)")  # keyed by the implicit, hidden rowid
    empty = db.now()
    db.sql(
        "INSERT INTO kinds VALUES (x'01ff', '2024-05-01', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', "
        "'2024-05-01 10:00:00+02', 12.50, 'NaN', '{\"x\": [1, null]}'), "
        "(x'', '1999-12-31', '00000000-0000-0000-0000-000000000000', '2000-01-01 00:00:00.25', "
        "-0.001, 1.5, NULL)"
    )
    db.sql("INSERT INTO hidden VALUES (7), (NULL)")
    for table in ["kinds", "hidden"]:
        # NB: not initial_scan='only', which refuses updated (as CockroachDB does)
        result = feed(db, f"EXPERIMENTAL CHANGEFEED FOR {table} WITH updated, {FAST}")
        try:
            messages = read_until_resolved(result, db.now())
        finally:
            result.close()
        scanned = [m for m in messages if m.resolved is None]
        assert len(scanned) == 2
        row_at, table_at = sql_row_reader(db, table), sql_table_reader(db, table)
        for message in scanned:
            assert message.updated is not None and message.key is not None
            assert row_at("", message.key, message.updated) == message.after
            assert row_at("", message.key, empty) is None
        at = scanned[0].updated
        assert at is not None
        assert table_at("", at) == {tuple(m.key or ()): m.after for m in scanned}
        assert table_at("", empty) == {}
    with pytest.raises(InvalidArgumentError, match="keyed by"):
        sql_row_reader(db, "kinds")("", [1], db.now())


Statement = tuple[str, tuple[Any, ...]]


def random_statement(rng: random.Random) -> Statement:
    a, b = rng.randrange(6), rng.choice(["x", "y"])
    roll = rng.random()
    if roll < 0.5:
        v = rng.choice([None, "p", "q", "r", "é"])
        n = Decimal(rng.randrange(-300, 300)) / 100
        return "UPSERT INTO t (a, b, v, n) VALUES ($1, $2, $3, $4)", (a, b, v, n)
    if roll < 0.75:
        return "UPDATE t SET n = n + 1, v = $1 WHERE a = $2", (rng.choice(["s", None]), a)
    return "DELETE FROM t WHERE a = $1 AND b = $2", (a, b)


def transaction(statements: Sequence[Statement]) -> Callable[[Session], None]:
    def run(session: Session) -> None:
        for text, params in statements:
            session.execute(text, *params)

    return run


def test_a_random_workload_keeps_every_changefeed_promise(db: DB) -> None:
    rng = random.Random(20240501)
    db.sql("CREATE TABLE t (a INT, b STRING, v STRING, n DECIMAL, PRIMARY KEY (a, b))")
    for a in range(3):  # rows for the initial scan
        db.sql("INSERT INTO t VALUES ($1, 'x', 'scanned', 1.5)", a)
    result = feed(db, f"EXPERIMENTAL CHANGEFEED FOR t WITH updated, diff, {FAST}")
    try:
        session = db.session()
        for _ in range(300):
            if rng.random() < 0.2:  # several statements, one transaction; rows change twice
                statements = [random_statement(rng) for _ in range(rng.randint(2, 5))]
                session.run_transaction(transaction(statements))
            else:
                text, params = random_statement(rng)
                session.execute(text, *params)
        last = db.now()
        messages = read_until_resolved(result, last)
    finally:
        result.close()

    validator = ChangefeedValidator(sql_row_reader(db, "t"), sql_table_reader(db, "t"))
    validator.note_all(messages)
    validator.check()
    assert validator.failures == []
    rows = [m for m in messages if m.resolved is None]
    assert len({(tuple(m.key or ()), m.updated) for m in rows}) > 200  # it did validate
    assert any(m.has_before and m.before is not None for m in rows)
