"""SQLAlchemy's inspector (sqlalchemy-cockroachdb over psycopg) reflects what feedkv's
catalog now shows: secondary indexes, UNIQUE, FOREIGN KEY and CHECK constraints, views
and sequences."""

from __future__ import annotations

import warnings
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


def test_metadata_drops_and_creates_an_enum_again_and_reflects_arrays(engine: sa.Engine) -> None:
    """``drop_all`` drops an enum only when ``pg_type`` shows it (SQLAlchemy's
    ``has_type``), so a test suite's drop_all then create_all failed with 42710 on the
    enum's CREATE TYPE; an array column reflected as an unknown type."""
    metadata = sa.MetaData()
    sa.Table(
        "pets",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("mood", sa.Enum("calm", "wild", name="mood")),
        sa.Column("tags", sa.ARRAY(sa.String)),
    )
    for _ in range(2):
        metadata.drop_all(engine)
        metadata.create_all(engine)
    inspector = sa.inspect(engine)
    assert inspector.has_type("mood")
    with warnings.catch_warnings():
        # NB: the dialect reads no enum type from information_schema (USER-DEFINED, as
        # CockroachDB shows it) and warns
        warnings.simplefilter("ignore", sa.exc.SAWarning)
        columns = {c["name"]: c["type"] for c in inspector.get_columns("pets")}
    assert isinstance(columns["tags"], sa.ARRAY)
    assert isinstance(columns["tags"].item_type, sa.VARCHAR)
    with engine.connect() as conn:
        described = conn.execute(
            sa.text(
                "SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod) "
                "FROM pg_catalog.pg_attribute a WHERE a.attrelid = 'pets'::regclass "
                "AND a.attnum > 0 ORDER BY a.attnum"
            )
        ).all()
        assert described == [("id", "bigint"), ("mood", "mood"), ("tags", "text[]")]
        labels = conn.execute(
            sa.text(
                "SELECT e.enumlabel FROM pg_catalog.pg_enum e JOIN pg_catalog.pg_type t "
                "ON t.oid = e.enumtypid WHERE t.typname = 'mood' ORDER BY e.enumsortorder"
            )
        ).scalars()
        assert list(labels) == ["calm", "wild"]
