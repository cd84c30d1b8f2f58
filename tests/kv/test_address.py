"""Listen addresses: host and port, with a clear error for bad input."""

from __future__ import annotations

import pytest

from feedkv.errors import InvalidArgumentError
from feedkv.kv.address import parse_listen


@pytest.mark.parametrize(
    ("text", "expected"),
    [("127.0.0.1:26257", ("127.0.0.1", 26257)), (":0", ("127.0.0.1", 0)), ("[::1]:9", ("::1", 9))],
)
def test_listen_addresses_parse_to_host_and_port(text: str, expected: tuple[str, int]) -> None:
    assert parse_listen(text) == expected


@pytest.mark.parametrize("text", ["", "localhost", "host:port", "1.2.3.4:70000"])
def test_a_bad_listen_address_is_refused_with_the_expected_form(text: str) -> None:
    with pytest.raises(InvalidArgumentError, match="HOST:PORT"):
        parse_listen(text)
