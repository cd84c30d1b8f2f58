"""ALTER TABLE with several changes runs them in turn in one transaction, as CockroachDB:
a later change sees the earlier ones (a computed column reads a column added before it);
one that fails undoes them all. ``CREATE IF NOT EXISTS FAMILY f`` joins ``f`` when it
exists."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError


@pytest.fixture
def abcd(db: DB) -> DB:
    db.sql(
        "CREATE TABLE abcd (a INT PRIMARY KEY, b INT, c INT, d INT, "
        "FAMILY f1 (a, b), FAMILY (c, d))"
    )
    db.sql("INSERT INTO abcd VALUES (1, 2, 3, 4)")
    return db


def _create(db: DB) -> str:
    ((_name, text),) = db.sql("SHOW CREATE TABLE abcd").rows
    return text


def test_several_columns_are_added_and_dropped_in_one_statement(abcd: DB) -> None:
    abcd.sql("ALTER TABLE abcd ADD COLUMN e STRING FAMILY f1, ADD COLUMN g INT CREATE FAMILY")
    abcd.sql("ALTER TABLE abcd DROP c, DROP d, DROP COLUMN e")
    assert _create(abcd).endswith(
        "\tg INT8 NULL,\n"
        "\tCONSTRAINT abcd_pkey PRIMARY KEY (a ASC),\n"
        "\tFAMILY f1 (a, b),\n"
        "\tFAMILY fam_2_g (g)\n"
        ");"
    )
    assert abcd.sql("SELECT * FROM abcd").rows == [(1, 2, None)]


def test_a_computed_column_reads_a_column_added_before_it(abcd: DB) -> None:
    session = abcd.session()
    session.execute("BEGIN")
    session.execute(
        "ALTER TABLE abcd ADD COLUMN o INT DEFAULT (10), ADD COLUMN p INT AS (o + b) STORED"
    )
    session.execute("UPDATE abcd SET a = 5 WHERE b = 2")
    session.execute("COMMIT")
    assert abcd.sql("SELECT a, o, p FROM abcd").rows == [(5, 10, 12)]


def test_a_failing_change_undoes_the_others(abcd: DB) -> None:
    before = _create(abcd)
    with pytest.raises(SQLError) as raised:
        abcd.sql("ALTER TABLE abcd ADD COLUMN e INT, DROP COLUMN nope")
    assert raised.value.code == "42703"
    assert _create(abcd) == before


def test_create_if_not_exists_family_joins_an_existing_family(abcd: DB) -> None:
    abcd.sql("ALTER TABLE abcd ADD COLUMN h INT CREATE FAMILY f_h")
    abcd.sql("ALTER TABLE abcd ADD COLUMN i INT CREATE IF NOT EXISTS FAMILY F_H")
    abcd.sql("ALTER TABLE abcd ADD COLUMN j INT CREATE IF NOT EXISTS FAMILY f_j")
    text = _create(abcd)
    assert "\tFAMILY f_h (h, i),\n\tFAMILY f_j (j)\n" in text
    with pytest.raises(SQLError, match='family "f1" already exists'):
        abcd.sql("ALTER TABLE abcd ADD COLUMN k INT CREATE FAMILY F1")
    with pytest.raises(SQLError, match='unknown family "foo"') as raised:
        abcd.sql("ALTER TABLE abcd ADD COLUMN k INT FAMILY foo")
    assert raised.value.code == "42704"
