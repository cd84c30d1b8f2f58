"""What a SQL client sees of feedkv's errors that carry no SQLSTATE of their own: a code
for what to do, never "internal error: <class name>" for a fault that is not one."""

from __future__ import annotations

import pytest

from feedkv.errors import (
    BatchTimestampBeforeGCError,
    ClockOffsetError,
    FeedKVError,
    InvalidArgumentError,
    NodeUnavailableError,
    PermissionDeniedError,
    RangeUnavailableError,
)
from feedkv.pgwire.connection import _as_sql_error

REFUSAL = (
    "node n3 refuses to serve: this node's clock is 826 ms behind node n2's, beyond the "
    "maximum offset of 500 ms"
)


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (ClockOffsetError(REFUSAL), "58000"),
        (NodeUnavailableError("no feedkv node answered"), "58000"),
        (PermissionDeniedError("user alice may not read table 7"), "42501"),
        (InvalidArgumentError("bad"), "22023"),
        (RangeUnavailableError("r3 has no quorum"), "40001"),
        (BatchTimestampBeforeGCError("1.0000000000", "5.0000000000"), "XXUUU"),
    ],
)
def test_a_known_fault_gets_its_sqlstate_and_reads_as_itself(error: Exception, code: str) -> None:
    answer = _as_sql_error(error)
    assert answer.code == code
    assert "internal error" not in answer.message and type(error).__name__ not in answer.message
    assert str(error) in answer.message


def test_an_unexpected_fault_is_an_internal_error_naming_it() -> None:
    answer = _as_sql_error(FeedKVError("what happened"))
    assert (answer.code, answer.message) == ("XX000", "internal error: FeedKVError: what happened")
