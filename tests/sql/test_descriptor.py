"""Tests for feedkv.sql.descriptor: descriptors survive their JSON form, print as CREATE
TABLE statements, find their columns and families, and version their changes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import feedkv
from feedkv.errors import SQLError
from feedkv.sql.descriptor import (
    Column,
    DatabaseDescriptor,
    Family,
    TableDescriptor,
    decode_descriptor,
    quote_name,
)
from feedkv.sql.types import ColumnType, Kind

FAST = settings(max_examples=100, deadline=None)

INT = ColumnType(Kind.INT)
STRING = ColumnType(Kind.STRING)


def make_table(**overrides: object) -> TableDescriptor:
    """``orders``: a composite key listed in the opposite order to its columns, a hidden
    column, a DEFAULT and two named families."""
    fields: dict[str, object] = {
        "id": 53,
        "name": "orders",
        "database_id": 50,
        "columns": (
            Column(1, "region", STRING, nullable=False),
            Column(2, "id", INT, nullable=False),
            Column(3, "Total", ColumnType(Kind.DECIMAL, precision=10, scale=2), default="0"),
            Column(4, "note", ColumnType(Kind.STRING, width=20)),
            Column(5, "doc", ColumnType(Kind.JSONB), hidden=True),
        ),
        "primary_key": (2, 1),
        "families": (Family(0, "main", (1, 2, 3, 4)), Family(1, "docs", (5,))),
        "next_column_id": 6,
        "next_family_id": 2,
    }
    fields.update(overrides)
    return TableDescriptor(**fields)  # type: ignore[arg-type]


# JSON round trip.

column_types = st.builds(
    ColumnType,
    st.sampled_from(list(Kind)),
    width=st.none() | st.integers(1, 1000),
    precision=st.none() | st.integers(1, 100),
    scale=st.none() | st.integers(0, 100),
)


@st.composite
def descriptors(draw: st.DrawFn) -> TableDescriptor:
    ids = draw(st.lists(st.integers(1, 200), min_size=1, max_size=6, unique=True))
    names = draw(
        st.lists(
            st.text(min_size=1, max_size=10), min_size=len(ids), max_size=len(ids), unique=True
        )
    )
    columns = tuple(
        Column(
            column_id,
            name,
            draw(column_types),
            nullable=draw(st.booleans()),
            default=draw(st.none() | st.text(max_size=12)),
            hidden=draw(st.booleans()),
        )
        for column_id, name in zip(ids, names, strict=True)
    )
    primary_key = draw(st.lists(st.sampled_from(ids), min_size=1, max_size=3, unique=True))
    family_ids = [0, *draw(st.lists(st.integers(1, 20), max_size=3, unique=True))]
    families = tuple(
        Family(
            family_id,
            draw(st.text(min_size=1, max_size=8)),
            tuple(draw(st.lists(st.sampled_from(ids), unique=True, max_size=len(ids)))),
        )
        for family_id in family_ids
    )
    return TableDescriptor(
        id=draw(st.integers(1, 1 << 40)),
        name=draw(st.text(min_size=1, max_size=12)),
        database_id=draw(st.integers(1, 1 << 40)),
        columns=columns,
        primary_key=tuple(primary_key),
        families=families,
        version=draw(st.integers(1, 1 << 40)),
        next_column_id=max(ids) + draw(st.integers(1, 5)),
        next_family_id=max(family_ids) + draw(st.integers(1, 5)),
        dropped=draw(st.booleans()),
    )


@FAST
@given(descriptors())
def test_table_descriptor_round_trips_through_its_json(desc: TableDescriptor) -> None:
    decoded = decode_descriptor(desc.to_json())
    assert isinstance(decoded, TableDescriptor)
    assert decoded == desc
    assert decoded.to_json() == desc.to_json()
    # The decoded descriptor's lookups are rebuilt, not just its fields.
    for column in desc.columns:
        assert decoded.column(column.name) == column
        assert decoded.column_by_id(column.id) == column
    assert decoded.key_columns == desc.key_columns


def test_table_descriptor_json_leaves_out_column_defaults_it_does_not_need() -> None:
    data = json.loads(make_table().to_json())
    assert list(data) == ["table"]
    columns = data["table"]["columns"]
    assert columns[0] == {"id": 1, "name": "region", "type": {"kind": "STRING"}, "not_null": True}
    assert columns[2] == {
        "id": 3,
        "name": "Total",
        "type": {"kind": "DECIMAL", "precision": 10, "scale": 2},
        "default": "0",
    }
    assert columns[4]["hidden"] is True
    assert data["table"]["families"][1] == {"id": 1, "name": "docs", "columns": [5]}


def test_table_descriptor_without_a_dropped_field_is_not_dropped() -> None:
    data = json.loads(make_table(dropped=True).to_json())["table"]
    del data["dropped"]
    assert TableDescriptor.from_dict(data) == make_table()


@FAST
@given(st.integers(1, 1 << 40), st.text())
def test_database_descriptor_round_trips_through_its_json(db_id: int, name: str) -> None:
    db = DatabaseDescriptor(db_id, name)
    assert decode_descriptor(db.to_json()) == db


# CREATE TABLE text.


def test_create_statement_shows_types_constraints_key_order_and_families() -> None:
    assert make_table().create_statement() == (
        "CREATE TABLE public.orders (\n"
        "\tregion STRING NOT NULL,\n"
        "\tid INT8 NOT NULL,\n"
        '\t"Total" DECIMAL(10,2) NULL DEFAULT 0,\n'
        "\tnote STRING(20) NULL,\n"
        "\tdoc JSONB NOT VISIBLE NULL,\n"
        "\tCONSTRAINT orders_pkey PRIMARY KEY (id ASC, region ASC),\n"
        '\tFAMILY main (region, id, "Total", note),\n'
        "\tFAMILY docs (doc)\n"
        ")"
    )


def test_create_statement_leaves_out_a_lone_primary_family() -> None:
    desc = make_table(
        columns=(Column(1, "k", INT, nullable=False), Column(2, "v", STRING)),
        primary_key=(1,),
        families=(Family(0, "primary", (1, 2)),),
    )
    assert desc.create_statement("db.public.kv") == (
        "CREATE TABLE db.public.kv (\n"
        "\tk INT8 NOT NULL,\n"
        "\tv STRING NULL,\n"
        "\tCONSTRAINT orders_pkey PRIMARY KEY (k ASC)\n"
        ")"
    )


def test_create_statement_shows_a_lone_family_that_is_not_called_primary() -> None:
    desc = make_table(
        name="Kv",
        columns=(Column(1, "k", INT, nullable=False), Column(2, "v", STRING)),
        primary_key=(1,),
        families=(Family(0, "fam_0_k_v", (1, 2)),),
    )
    text = desc.create_statement()
    assert text.startswith('CREATE TABLE public."Kv" (\n')
    assert '\tCONSTRAINT "Kv_pkey" PRIMARY KEY (k ASC),\n' in text
    assert text.endswith("\tFAMILY fam_0_k_v (k, v)\n)")


def test_create_statement_skips_family_members_that_were_dropped() -> None:
    desc = make_table().bumped(columns=make_table().columns[:4])  # column 5 dropped
    assert "\tFAMILY docs ()\n" in desc.create_statement()


@pytest.mark.parametrize(
    ("name", "quoted"),
    [
        ("orders", "orders"),
        ("_x1", "_x1"),
        ("Orders", '"Orders"'),
        ("1st", '"1st"'),
        ("a b", '"a b"'),
        ("a-b", '"a-b"'),
        ('say "hi"', '"say ""hi"""'),
        ("café", '"café"'),
        ("", '""'),
    ],
)
def test_quote_name_leaves_plain_lower_case_names_bare(name: str, quoted: str) -> None:
    assert quote_name(name) == quoted


@pytest.mark.parametrize("keyword", ["select", "from", "where", "order", "table", "primary"])
def test_quote_name_quotes_reserved_keywords(keyword: str) -> None:
    # A bare reserved word is not an identifier: SHOW CREATE TABLE of a table with a
    # column named "select" must still be valid SQL.
    assert quote_name(keyword) == f'"{keyword}"'


# Lookups.


def test_column_lookup_by_name_is_exact() -> None:
    desc = make_table()
    assert desc.column("Total").id == 3
    assert desc.find_column("total") is None
    assert desc.column_by_id(4) == desc.column("note")
    assert desc.column_by_id(99) is None


@pytest.mark.parametrize("name", ["total", "missing", "", 'we"ird'])
def test_unknown_column_is_42703_and_names_the_column(name: str) -> None:
    with pytest.raises(SQLError) as info:
        make_table().column(name)
    assert info.value.code == "42703"
    assert info.value.message == f'column "{name}" does not exist'  # CockroachDB's text


def test_key_columns_follow_the_primary_key_not_the_column_order() -> None:
    assert [c.name for c in make_table().key_columns] == ["id", "region"]


def test_visible_columns_leave_out_hidden_ones() -> None:
    assert [c.name for c in make_table().visible_columns] == ["region", "id", "Total", "note"]


def test_families_are_found_by_name_and_by_member_column() -> None:
    desc = make_table()
    assert desc.family("docs").id == 1
    assert desc.family_of(5).name == "docs"
    assert desc.family_of(3).name == "main"
    assert desc.family_of(99).id == 0  # a column in no family lives in family 0
    with pytest.raises(SQLError) as info:
        desc.family("nope")
    assert info.value.code == "42704"
    assert "'nope'" in info.value.message


# Versions.


def test_bumped_is_the_next_version_and_leaves_the_original_alone() -> None:
    desc = make_table(version=7)
    renamed = desc.bumped(name="orders_v2")
    assert renamed.version == 8
    assert renamed.name == "orders_v2"
    assert desc.version == 7
    assert desc.name == "orders"
    assert renamed.bumped().version == 9
    assert renamed.bumped() != renamed


def test_bumped_with_new_columns_rebuilds_the_lookups() -> None:
    desc = make_table()
    added = Column(6, "shipped", ColumnType(Kind.BOOL))
    grown = desc.bumped(
        columns=(*desc.columns, added),
        families=(*desc.families[:1], Family(1, "docs", (5, 6))),
        next_column_id=7,
    )
    assert grown.column("shipped") == added
    assert grown.column_by_id(6) == added
    assert grown.family_of(6).name == "docs"
    assert desc.find_column("shipped") is None
    assert decode_descriptor(grown.to_json()) == grown


def test_equal_descriptors_compare_equal_whatever_their_lookups() -> None:
    assert make_table() == make_table()
    assert make_table() != make_table(version=2)
    assert make_table().bumped().bumped() == make_table(version=3)


def test_show_create_table_output_recreates_the_same_table(tmp_path: Path) -> None:
    with feedkv.connect(tmp_path / "s") as db:
        db.sql(
            'CREATE TABLE "Odd" (k INT, "select" STRING NOT NULL DEFAULT \'x\', d DECIMAL(8,2), '
            'j JSONB, PRIMARY KEY ("select", k), FAMILY a (k, "select", d), FAMILY b (j))'
        )
        db.sql("CREATE TABLE plain (v STRING)")
        for name in ('"Odd"', "plain"):
            text = db.sql(f"SHOW CREATE TABLE {name}").rows[0][1]
            before = db.sql(f"SHOW CREATE TABLE {name}").rows
            db.sql(f"DROP TABLE {name}")
            db.sql(text)
            assert db.sql(f"SHOW CREATE TABLE {name}").rows == before
