"""A node's locality and a locality filter, as CockroachDB's ``--locality`` flag and
``Locality.Matches`` define them."""

from __future__ import annotations

from pathlib import Path

import pytest

from feedkv.cli.main import main
from feedkv.errors import InvalidArgumentError
from feedkv.util.locality import NO_LOCALITY, Locality


def test_tiers_keep_their_order_and_print_as_cockroachdb_does() -> None:
    locality = Locality.parse(" region=us-east1 , zone=a ")
    assert locality.tiers == (("region", "us-east1"), ("zone", "a"))
    assert str(locality) == "region=us-east1,zone=a"
    assert locality.find("zone") == "a" and locality.find("rack") is None
    assert Locality.parse("") == NO_LOCALITY and str(NO_LOCALITY) == ""


@pytest.mark.parametrize(
    ("wanted", "matches"),
    [
        ("region=us-east1", True),
        ("zone=a", True),  # a filter may name any tier, not only the first
        ("zone=a,region=us-east1", True),  # in any order
        ("region=us-east1,zone=b", False),  # every tier of the filter must match
        ("region=us-east1,rack=1", False),  # the node has no rack tier
        ("", True),  # the empty filter matches every node
    ],
)
def test_a_node_matches_a_filter_when_it_has_every_tier_of_it(wanted: str, matches: bool) -> None:
    node = Locality.parse("region=us-east1,zone=a")
    assert node.matches(Locality.parse(wanted)) is matches


def test_a_node_without_locality_matches_only_the_empty_filter() -> None:
    assert NO_LOCALITY.matches(NO_LOCALITY)
    assert not NO_LOCALITY.matches(Locality.parse("region=us-east1"))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("region", "'region' is not a locality tier"),
        ("region=", "'region=' is not a locality tier"),
        ("=us-east1", "'=us-east1' is not a locality tier"),
        ("region=us-east1,,zone=a", "'' is not a locality tier"),
        ("region=a,region=b", "names the locality tier 'region' more than once"),
    ],
)
def test_a_malformed_locality_is_refused_naming_the_bad_tier(text: str, message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        Locality.parse(text)


def test_feedkv_start_refuses_a_malformed_locality_before_starting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    code = main(["start", "--store", str(store), "--insecure", "--locality", "region"])
    assert code == 1
    assert "--locality: 'region' is not a locality tier" in capsys.readouterr().err
    assert not store.exists()  # refused before the store was opened
