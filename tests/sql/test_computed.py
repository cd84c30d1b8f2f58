"""feedkv.sql.computed on descriptors alone (no store): the rules a computed column's
expression follows, the values a write and a read compute, and the descriptor a
changefeed sees without VIRTUAL columns. The statements are in
``testdata/computed_columns.test``."""

from __future__ import annotations

import pytest

from feedkv.errors import SQLError
from feedkv.sql.computed import (
    check_computed,
    fill_computed,
    fill_virtual,
    referencing,
    renamed_in,
)
from feedkv.sql.descriptor import Column, Family, TableDescriptor, decode_descriptor
from feedkv.sql.expr import Context
from feedkv.sql.parser import parse
from feedkv.sql.row_codec import decode_family_value, row_kvs
from feedkv.sql.statements import CreateTable
from feedkv.sql.types import ColumnType, Kind

INT, STRING = ColumnType(Kind.INT), ColumnType(Kind.STRING)


def table(*extra: Column, families: tuple[Family, ...] | None = None) -> TableDescriptor:
    columns = (Column(1, "k", INT, nullable=False), Column(2, "a", INT), Column(3, "s", STRING))
    columns += extra
    stored = tuple(c.id for c in columns if not c.virtual)
    return TableDescriptor(
        id=50,
        name="t",
        database_id=1,
        columns=columns,
        primary_key=(1,),
        families=families or (Family(0, "primary", stored),),
        next_column_id=len(columns) + 1,
    )


B = Column(4, "b", INT, computed="a * 2")
C = Column(5, "c", STRING, computed="lower(s)", virtual=True)


def test_a_write_computes_every_computed_column_and_stores_only_the_stored_ones() -> None:
    desc = table(B, C)
    check_computed(desc)
    row = {1: 1, 2: 21, 3: "MiXed"}
    fill_computed(desc, row, Context())
    assert row == {1: 1, 2: 21, 3: "MiXed", 4: 42, 5: "mixed"}
    [value] = [v for v in row_kvs(desc, row).values() if v is not None]
    assert decode_family_value(desc, value) == {2: 21, 3: "MiXed", 4: 42}


def test_a_read_computes_the_virtual_columns_in_place() -> None:
    desc = table(B, C)
    assert fill_virtual(desc, [1, 21, "ABC", 42, None], Context()) == [1, 21, "ABC", 42, "abc"]


@pytest.mark.parametrize(
    ("column", "code", "message"),
    [
        (Column(4, "b", INT, computed="nope + 1"), "42703", 'column "nope" does not exist'),
        (Column(4, "b", INT, computed="random()"), "0A000", "volatile functions"),
        (Column(4, "b", INT, computed="now()"), "0A000", "context-dependent operators"),
        (Column(4, "b", INT, computed="sum(a)"), "42803", "aggregate functions"),
        (Column(4, "b", INT, computed="(SELECT 1)"), "0A000", "subqueries"),
        (Column(4, "b", INT, computed="a", default="1"), "42P16", "DEFAULT"),
    ],
)
def test_bad_expressions_are_refused_with_cockroachdbs_sqlstate(
    column: Column, code: str, message: str
) -> None:
    with pytest.raises(SQLError) as caught:
        check_computed(table(column))
    assert caught.value.code == code
    assert message in caught.value.message


def test_a_computed_column_may_not_read_another() -> None:
    with pytest.raises(SQLError, match="cannot reference computed columns") as caught:
        check_computed(table(B, Column(5, "d", INT, computed="b + 1")))
    assert caught.value.code == "42P16"


def test_a_virtual_column_in_a_family_is_refused() -> None:
    family = Family(0, "primary", (1, 2, 3, 5))
    with pytest.raises(SQLError, match="cannot be part of a family"):
        check_computed(table(C, families=(family,)))


def test_a_changefeeds_descriptor_has_no_virtual_columns_and_decodes_the_same_rows() -> None:
    desc = table(B, C)
    seen = desc.without_virtual()
    assert [c.name for c in seen.columns] == ["k", "a", "s", "b"]
    assert table(B).without_virtual() == table(B)
    [value] = [v for v in row_kvs(desc, {1: 1, 2: 2, 3: "x", 4: 4}).values() if v]
    assert decode_family_value(seen, value) == decode_family_value(desc, value)


def test_renames_follow_into_expressions_and_uses_are_found() -> None:
    desc = table(B, C)
    assert referencing(desc, desc.column("s")) == C
    assert referencing(desc, desc.column("k")) is None
    assert renamed_in(C, "s", "name").computed == "lower(name)"
    assert renamed_in(C, "s", "Name").computed == 'lower("Name")'
    assert renamed_in(B, "s", "name") == B


def test_computed_columns_survive_the_descriptors_json() -> None:
    desc = table(B, C)
    again = decode_descriptor(desc.to_json())
    assert isinstance(again, TableDescriptor)
    assert again.columns == desc.columns


@pytest.mark.parametrize(
    ("text", "virtual"),
    [
        ("b INT AS (a * 2) STORED", False),
        ("b INT AS (a * 2) VIRTUAL", True),
        ("b INT GENERATED ALWAYS AS (a * 2) STORED", False),
        ("b INT GENERATED ALWAYS AS (a * 2) VIRTUAL", True),
        ("b INT NOT NULL AS (a * 2) STORED", False),
        ('"virtual" INT AS (a * 2) STORED', False),
        ("b INT AS (a * 2) VIRTUAL CHECK (b::STRING <> 'stored')", True),
    ],
)
def test_the_parser_reads_cockroachdbs_spellings(text: str, virtual: bool) -> None:
    [statement] = parse(f"CREATE TABLE t (a INT, {text})")
    assert isinstance(statement, CreateTable)
    spec = statement.columns[1]
    assert spec.computed is not None and spec.computed.sql() == "a * 2"
    assert spec.virtual is virtual


def test_the_parser_wants_stored_or_virtual() -> None:
    with pytest.raises(SQLError, match=r"use AS \( <expr> \) STORED") as caught:
        parse("CREATE TABLE t (a INT, b INT AS (a * 2))")
    assert caught.value.code == "42601"
