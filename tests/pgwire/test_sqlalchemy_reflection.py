"""SQLAlchemy's inspector (sqlalchemy-cockroachdb over psycopg) reflects what feedkv's
catalog now shows: secondary indexes, UNIQUE, FOREIGN KEY and CHECK constraints, views
and sequences."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa


@pytest.fixture
def engine(pg_url: str) -> Iterator[sa.Engine]:
    eng = sa.create_engine(pg_url.replace("postgresql://", "cockroachdb+psycopg://"))
    yield eng
    eng.dispose()


def test_the_inspector_reflects_indexes_constraints_views_and_sequences(
    engine: sa.Engine,
) -> None:
    with engine.begin() as conn:
        for statement in (
            "CREATE TABLE p (id INT PRIMARY KEY, code INT UNIQUE)",
            "CREATE TABLE c (id INT PRIMARY KEY, p_id INT REFERENCES p (id), "
            "n INT CHECK (n > 0), INDEX c_n (n) STORING (p_id))",
            "CREATE VIEW v AS SELECT id FROM p",
            "CREATE SEQUENCE s",
        ):
            conn.execute(sa.text(statement))
    inspector = sa.inspect(engine)
    assert inspector.get_view_names() == ["v"]
    assert inspector.get_sequence_names() == ["s"]
    indexes = inspector.get_indexes("c")
    assert [(i["name"], i["unique"], i["column_names"]) for i in indexes] == [("c_n", False, ["n"])]
    uniques = inspector.get_unique_constraints("p")
    assert [(u["name"], u["column_names"]) for u in uniques] == [("p_code_key", ["code"])]
    (fk,) = inspector.get_foreign_keys("c")
    assert (fk["name"], fk["constrained_columns"], fk["referred_table"]) == (
        "c_p_id_fkey",
        ["p_id"],
        "p",
    )
    assert fk["referred_columns"] == ["id"]
    (check,) = inspector.get_check_constraints("c")
    assert (check["name"], check["sqltext"]) == ("c_n_check", "n > 0")
