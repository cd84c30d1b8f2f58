"""``feedkv://host:port?certs_dir=...&user=...``: the parameters a client takes from a
node's URL, and any other input refused with a clear error."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from feedkv.errors import InvalidURLError
from feedkv.kv.address import node_url_params, parse_node_url


def test_the_url_carries_a_certs_dir_and_a_user() -> None:
    url = "feedkv://127.0.0.1:26258?certs_dir=%2Fetc%2Ffeedkv%20certs&user=node"
    assert parse_node_url(url) == ("127.0.0.1", 26258)
    assert node_url_params(url) == {"certs_dir": "/etc/feedkv certs", "user": "node"}
    assert node_url_params("feedkv://h:1") == {}


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("feedkv://h:1?password=x", "unknown parameter"),
        ("feedkv://h:1?user=a&user=b", "user given twice"),
        ("feedkv://h:1?&&", "bad parameters"),
        ("feedkv://h:1?certs_dir", "bad parameters"),
    ],
)
def test_bad_parameters_are_refused(url: str, message: str) -> None:
    with pytest.raises(InvalidURLError, match=message):
        node_url_params(url)


@settings(max_examples=3000, deadline=None)
@given(tail=hs.text(max_size=80))
def test_any_url_parses_or_raises_invalid_url_error(tail: str) -> None:
    url = f"feedkv://{tail}"
    try:
        parse_node_url(url)
        node_url_params(url)
    except InvalidURLError:
        pass
