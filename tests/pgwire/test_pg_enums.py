"""Enum columns over the SQL port carry their type's own OID (100000 + its descriptor
id, as CockroachDB numbers user-defined types), which pg_type (typtype e) and pg_enum
describe: psycopg's EnumInfo finds the type and its labels in declaration order, and
with the enum registered it reads values as Python enums and sends them (in binary,
whose form is the label)."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from psycopg.types.enum import EnumInfo, register_enum

from feedkv import DB


@pytest.fixture
def conn(db: DB) -> Iterator[psycopg.Connection]:
    with psycopg.connect(db.serve_sql(), autocommit=True) as connection:
        connection.execute("CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')")
        connection.execute("CREATE TABLE people (name STRING PRIMARY KEY, feeling mood)")
        connection.execute("INSERT INTO people VALUES ('ann', 'happy'), ('bob', 'ok')")
        connection.execute("ALTER TYPE mood ADD VALUE 'meh' BEFORE 'ok'")
        yield connection


def test_an_enum_column_goes_out_with_its_types_oid(conn: psycopg.Connection) -> None:
    (oid,) = conn.execute("SELECT oid FROM pg_type WHERE typname = 'mood'").fetchone() or ()
    assert oid > 100_000
    assert conn.execute("SELECT typtype FROM pg_type WHERE oid = %s", (oid,)).fetchone() == ("e",)
    cursor = conn.execute("SELECT feeling, 'sad'::mood FROM people ORDER BY name")
    assert cursor.description is not None
    assert [d.type_code for d in cursor.description] == [oid, oid]
    assert cursor.fetchall() == [("happy", "sad"), ("ok", "sad")]  # unregistered: text


def test_psycopg_reads_and_sends_the_registered_enum(conn: psycopg.Connection) -> None:
    info = EnumInfo.fetch(conn, "mood")
    assert info is not None
    assert info.labels == ["sad", "meh", "ok", "happy"]
    register_enum(info, conn)
    mood = info.enum
    rows = conn.execute("SELECT name, feeling FROM people ORDER BY feeling").fetchall()
    assert rows == [("bob", mood.ok), ("ann", mood.happy)]
    for binary in (False, True):
        cursor = conn.cursor(binary=binary)
        cursor.execute("SELECT name FROM people WHERE feeling > %s", (mood.meh,))
        assert sorted(cursor.fetchall()) == [("ann",), ("bob",)]
    conn.execute("INSERT INTO people VALUES (%s, %s)", ("cy", mood.meh))
    assert conn.execute(
        "SELECT feeling::STRING FROM people WHERE name = %s", ("cy",)
    ).fetchone() == ("meh",)
