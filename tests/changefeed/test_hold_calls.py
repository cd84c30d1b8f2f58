"""The ``HoldHistory`` message: what a client sends parses back to the same request, and
anything else gets a clear InvalidArgumentError."""

from __future__ import annotations

import contextlib

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from feedkv.changefeed.hold_calls import HoldRequest, hold_request
from feedkv.errors import InvalidArgumentError
from feedkv.util.hlc import Timestamp


@pytest.mark.parametrize("since", [Timestamp(1_700_000_000_000_000_000, 3), None])
def test_a_request_parses_back(since: Timestamp | None) -> None:
    request = HoldRequest("a" * 32, 104, since, 3_600_000_000_000)
    assert HoldRequest.parse(hold_request(request)) == request


@pytest.mark.parametrize(
    ("message", "error"),
    [
        ({"id": "h", "table": 1, "since": None}, "expected id, table, since and after_ns"),
        ({"id": "", "table": 1, "since": None, "after_ns": 0}, "id must be 1 to 64"),
        ({"id": "h" * 65, "table": 1, "since": None, "after_ns": 0}, "id must be 1 to 64"),
        ({"id": "h", "table": "1", "since": None, "after_ns": 0}, "must be integers"),
        ({"id": "h", "table": 1, "since": None, "after_ns": -1}, "must be integers"),
        ({"id": "h", "table": True, "since": None, "after_ns": 0}, "must be integers"),
        ({"id": "h", "table": 1, "since": None, "after_ns": 2**63}, "at most"),
        ({"id": "h", "table": 1, "since": 5, "after_ns": 0}, "since must be a timestamp"),
        ({"id": "h", "table": 1, "since": "soon", "after_ns": 0}, "timestamp"),
    ],
)
def test_a_bad_request_is_refused_saying_why(message: dict[str, object], error: str) -> None:
    with pytest.raises(InvalidArgumentError, match=error):
        HoldRequest.parse(msgpack.packb(message))


# thousands of inputs, however slow a loaded machine draws them
MANY = settings(max_examples=1000, deadline=None, suppress_health_check=list(HealthCheck))


@MANY
@given(st.binary(max_size=200))
def test_any_bytes_parse_or_fail_clearly(raw: bytes) -> None:
    with contextlib.suppress(InvalidArgumentError):
        HoldRequest.parse(raw)


@MANY
@given(
    st.dictionaries(
        st.sampled_from(["id", "table", "since", "after_ns", "x"]),
        st.one_of(
            st.none(),
            st.booleans(),
            st.integers(-(2**63), 2**64 - 1),
            st.text(max_size=80),
            st.binary(),
        ),
    )
)
def test_any_message_parses_or_fails_clearly(message: dict[str, object]) -> None:
    with contextlib.suppress(InvalidArgumentError):
        HoldRequest.parse(msgpack.packb(message))
