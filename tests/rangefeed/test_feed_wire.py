"""The wire form of rangefeed values: a batch travels as one run of columns and comes
back as the same values (deletions, empty values and previous values told apart); a run
whose columns do not line up is refused, not misread."""

from __future__ import annotations

import pytest

from feedkv.errors import InvalidArgumentError
from feedkv.kv.proto import feedkv_pb2 as pb
from feedkv.rangefeed.event import Value, ValueColumns
from feedkv.rangefeed.registration import event_size, values_size
from feedkv.rangefeed.stream import ValueBatch
from feedkv.rangefeed.wire import values_from_proto, values_to_proto
from feedkv.util.hlc import MAX_LOGICAL, MAX_WALL, Timestamp

PLAIN = [
    Value(b"a", b"1", Timestamp(10, 0)),
    Value(b"b", None, Timestamp(11, 3)),  # deleted
    Value(b"c", b"", Timestamp(12, MAX_LOGICAL)),  # an empty value is not a deletion
    Value(b"d\x00", b"\xff" * 300, Timestamp(MAX_WALL, 0)),
]
WITH_DIFF = [
    Value(b"a", b"2", Timestamp(13, 0), b"1"),
    Value(b"b", b"x", Timestamp(14, 0), None),  # no previous value
    Value(b"c", None, Timestamp(15, 0), b""),  # the previous value was empty
    Value(b"d", b"", Timestamp(16, 0), None),
]


def round_trip(
    batch: ValueBatch, tags: list[int], *, ts_runs: bool = False
) -> tuple[ValueBatch, list[int]]:
    msg = pb.RangeFeedValues()
    values_to_proto(tags, batch, msg, ts_runs=ts_runs)
    decoded = pb.RangeFeedValues.FromString(msg.SerializeToString())
    return values_from_proto(decoded), list(decoded.tags)


@pytest.mark.parametrize(
    "values", [[], PLAIN[:1], PLAIN, WITH_DIFF], ids=["none", "one", "plain", "diff"]
)
def test_a_run_comes_back_as_the_same_values_for_every_tag(values: list[Value]) -> None:
    batch = ValueBatch(values, Timestamp(MAX_WALL, MAX_LOGICAL))
    assert round_trip(batch, [7, 3, 99]) == (batch, [7, 3, 99])


def transaction(ts: Timestamp, keys: int) -> list[Value]:
    return [Value(b"t%03d" % i, b"v%d" % i, ts) for i in range(keys)]


@pytest.mark.parametrize(
    ("values", "runs"),
    [
        (transaction(Timestamp(5, 1), 40), [40]),
        (transaction(Timestamp(5), 30) + transaction(Timestamp(6), 20) + PLAIN, [30, 20] + [1] * 4),
        ([Value(b"k", b"v", Timestamp(i)) for i in range(1, 40)], []),  # a timestamp a row
        (transaction(Timestamp(7), 20) + transaction(Timestamp(5), 20), [20, 20]),
    ],
    ids=["one transaction", "two and single writes", "single writes", "out of order"],
)
def test_a_run_mostly_of_transactions_goes_with_a_timestamp_a_transaction(
    values: list[Value], runs: list[int]
) -> None:
    batch = ValueBatch(values, Timestamp(MAX_WALL, MAX_LOGICAL))
    msg = pb.RangeFeedValues()
    values_to_proto([1], batch, msg, ts_runs=True)
    assert list(msg.ts_runs) == runs
    assert len(msg.walls) == len(msg.logicals) == len(runs or values)
    assert round_trip(batch, [1], ts_runs=True) == (batch, [1])
    assert round_trip(batch, [1, 2], ts_runs=True) == (batch, [1, 2])
    plain = pb.RangeFeedValues()
    values_to_proto([1], batch, plain)  # for a client that does not read runs
    assert not plain.ts_runs and len(plain.walls) == len(values)


def test_a_run_for_several_feeds_makes_its_values_once_and_one_for_a_feed_as_read() -> None:
    batch = ValueBatch(PLAIN, Timestamp(20, 0))
    shared, _tags = round_trip(batch, [7, 3])
    first, again = list(shared.values), list(shared.values)
    assert all(a is b for a, b in zip(first, again, strict=True))
    alone, _tags = round_trip(batch, [7])
    first, again = list(alone.values), list(alone.values)
    assert first == again == PLAIN
    assert all(a is not b for a, b in zip(first, again, strict=True))


def columns_of(values: list[Value], *, diff: bool) -> ValueColumns:
    return ValueColumns(
        [v.key for v in values],
        [v.value for v in values],
        [v.ts for v in values],
        [v.prev_value for v in values] if diff else None,
    )


@pytest.mark.parametrize(
    ("values", "diff"),
    [([], False), (PLAIN, False), (WITH_DIFF, True)],
    ids=["none", "plain", "diff"],
)
def test_columns_from_a_scan_travel_and_read_as_their_values(
    values: list[Value], diff: bool
) -> None:
    columns = columns_of(values, diff=diff)
    # iterated, the columns make their values afresh each time (indexing keeps them)
    assert list(columns) == list(columns) == values
    assert all(type(v) is Value for v in columns)
    assert values_size(columns) == sum(map(event_size, values))
    sent, made = pb.RangeFeedValues(), pb.RangeFeedValues()
    values_to_proto([5], ValueBatch(columns, Timestamp(20, 0)), sent)
    values_to_proto([5], ValueBatch(values, Timestamp(20, 0)), made)
    assert sent == made
    assert round_trip(ValueBatch(columns, Timestamp(20, 0)), [5])[0].values == values
    # read as a sequence, the columns are the values
    assert len(columns) == len(values)
    assert list(columns) == values and columns == values and values == columns
    assert columns[1:] == values[1:]
    if values:
        assert columns[-1] == values[-1]
        assert all(type(v) is Value for v in columns)


def run(**columns: list[object]) -> pb.RangeFeedValues:
    msg = pb.RangeFeedValues()
    values_to_proto([1], ValueBatch(WITH_DIFF, Timestamp(20, 0)), msg)
    for name, column in columns.items():
        field = getattr(msg, name)
        del field[:]
        field.extend(column)
    return msg


@pytest.mark.parametrize(
    ("columns", "complaint"),
    [
        ({"keys": [b"a"]}, "columns differ in length"),
        ({"walls": [1, 2, 3]}, "columns differ in length"),
        ({"prev_values": [b""]}, "columns differ in length"),
        ({"walls": [1, -2, 3, 4]}, "negative timestamp"),
        ({"ts_runs": [2, 1, 1]}, "columns differ in length"),  # a timestamp a row, 3 runs
        ({"ts_runs": [2, 1, 2, 0], "walls": [1, 2, 3, 4]}, "columns differ in length"),
        ({"ts_runs": [2, 0, 2], "walls": [1, 2, 3]}, "none empty"),  # would drop a timestamp
        ({"deleted": [4]}, "names row 4 in deleted, of 4 rows"),
        ({"no_prev": [1, 9]}, "names row 9 in no_prev, of 4 rows"),
    ],
)
def test_a_run_whose_columns_do_not_line_up_is_refused(
    columns: dict[str, list[object]], complaint: str
) -> None:
    with pytest.raises(InvalidArgumentError, match=complaint):
        values_from_proto(run(**columns))
