"""Listen addresses: host and port, with a clear error for bad input."""

from __future__ import annotations

import pytest

from feedkv.errors import InvalidArgumentError, InvalidURLError
from feedkv.kv.address import node_url_params, parse_listen, parse_node_url, parse_node_urls


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


@pytest.mark.parametrize(
    "url", ["postgresql://root@127.0.0.1:26257/defaultdb?sslmode=disable", "postgres://h:26257"]
)
def test_a_sql_url_given_for_a_node_url_points_to_the_grpc_port(url: str) -> None:
    """``cockroach node status --url postgresql://...`` works; feedkv's node commands
    call the gRPC port, and say so rather than only what form they expected."""
    with pytest.raises(InvalidURLError, match=r"SQL port.*feedkv sql --url.*feedkv://HOST:PORT"):
        parse_node_url(url)
    # NB: its parameters first: libpq's sslmode once made the error an unknown parameter
    with pytest.raises(InvalidURLError, match=r"SQL port.*feedkv sql --url.*feedkv://HOST:PORT"):
        node_url_params(url)


def test_a_node_url_may_list_several_nodes_to_try_in_order() -> None:
    """As libpq's and CockroachDB's multi-host URLs: ``feedkv://h1:p1,h2:p2``."""
    assert parse_node_urls("feedkv://127.0.0.1:1,[::1]:2,h:3?certs_dir=c") == [
        ("127.0.0.1", 1),
        ("::1", 2),
        ("h", 3),
    ]
    assert parse_node_urls("feedkv://h:4") == [("h", 4)]
    with pytest.raises(InvalidURLError, match="expected feedkv://host:port"):
        parse_node_urls("feedkv://h:1,,h:2")


@pytest.mark.parametrize("url", ["feedkv://127.0.0.1:99999", "feedkv://h:65536/"])
def test_a_node_url_whose_port_is_out_of_range_says_so(url: str) -> None:
    with pytest.raises(InvalidURLError, match="is out of range"):
        parse_node_url(url)


@pytest.mark.parametrize("text", ["/tmp/store", "file:///tmp/store"])
def test_a_path_where_a_node_is_needed_says_how_to_reach_a_store(text: str) -> None:
    with pytest.raises(InvalidURLError, match=r"expected feedkv://host:port: .*serving_url"):
        parse_node_url(text)
