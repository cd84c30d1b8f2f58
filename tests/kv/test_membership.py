"""Node membership records: their keys and values."""

from __future__ import annotations

import pytest

from feedkv.errors import InvalidArgumentError
from feedkv.kv.membership import Membership, membership_key, membership_span, node_of_key


def test_every_nodes_record_is_in_the_span_and_names_its_node() -> None:
    span = membership_span()
    for node_id in (1, 9, 10, 12345):
        key = membership_key(node_id)
        assert span.contains_key(key)
        assert node_of_key(key) == node_id
    assert membership_key(9) < membership_key(10)  # in node order


def test_a_membership_is_parsed_from_its_name_and_a_bad_one_is_named() -> None:
    assert Membership.parse(b"decommissioning") is Membership.DECOMMISSIONING
    with pytest.raises(InvalidArgumentError, match="unknown membership 'gone'"):
        Membership.parse("gone")
