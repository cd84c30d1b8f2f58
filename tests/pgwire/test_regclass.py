"""The pure part of ``regclass`` (feedkv.pgwire.regclass): how a name is read and
resolved, and how an OID prints, as CockroachDB's pgoidtype logic test has them."""

from __future__ import annotations

import pytest

from feedkv.errors import SQLError
from feedkv.pgwire.regclass import name_parts, regclass_name, regclass_oid

RELATIONS = {"t": 104, "Mixed": 105, "pg_class": 1259}


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("t", ["t"]),
        ("  T ", ["t"]),
        ('"Mixed"', ["Mixed"]),
        ('public."a.b"', ["public", "a.b"]),
        ('"say ""hi"""', ['say "hi"']),
        ("db.public.t", ["db", "public", "t"]),
    ],
)
def test_a_name_is_read_as_an_identifier(text: str, parts: list[str]) -> None:
    assert name_parts(text) == parts


@pytest.mark.parametrize("text", ["", "a..b", '"open', "."])
def test_text_that_is_no_name_is_42p01(text: str) -> None:
    with pytest.raises(SQLError) as caught:
        name_parts(text)
    assert caught.value.code == "42P01"


@pytest.mark.parametrize(
    ("value", "oid"),
    [
        ("t", 104),
        ("public.t", 104),
        ("defaultdb.public.t", 104),
        ('"Mixed"', 105),
        ("pg_catalog.pg_class", 1259),
        ("4061301040", 4061301040),
        (7, 7),
        (None, None),
    ],
)
def test_a_relation_resolves_to_its_oid(value: object, oid: int | None) -> None:
    assert regclass_oid(value, RELATIONS, "defaultdb") == oid


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("nope", "nope"),
        ("Mixed", "mixed"),
        ("other.t", "other.t"),
        ("otherdb.public.t", "otherdb.public.t"),
    ],
)
def test_an_unknown_relation_is_42p01_or_null(value: str, shown: str) -> None:
    with pytest.raises(SQLError) as caught:
        regclass_oid(value, RELATIONS, "defaultdb")
    assert (caught.value.code, caught.value.message) == (
        "42P01",
        f'relation "{shown}" does not exist',
    )
    assert regclass_oid(value, RELATIONS, "defaultdb", missing_ok=True) is None


def test_an_oid_prints_as_its_relations_name_or_the_number() -> None:
    names = {104: "t", 105: "Mixed"}
    assert [regclass_name(oid, names) for oid in (104, 105, 9, None)] == ["t", '"Mixed"', "9", None]
