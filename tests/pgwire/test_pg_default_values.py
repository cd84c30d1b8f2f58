"""``INSERT INTO t DEFAULT VALUES``: one row of every column's default, as in CockroachDB
and PostgreSQL, also with RETURNING and ON CONFLICT; SQLAlchemy's ORM sends it for an
object whose columns all have defaults. feedkv refused it (0A000)."""

from __future__ import annotations

import psycopg
import pytest
import sqlalchemy as sa
from sqlalchemy import orm


def test_default_values_inserts_one_row_of_defaults(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (k SERIAL PRIMARY KEY, a INT DEFAULT 3, b STRING)")
        [(k, a, b)] = conn.execute("INSERT INTO t DEFAULT VALUES RETURNING k, a, b").fetchall()
        assert k > 0 and (a, b) == (3, None)
        rows = conn.execute(
            "INSERT INTO t DEFAULT VALUES ON CONFLICT DO NOTHING RETURNING a"
        ).fetchall()
        assert rows == [(3,)]
        conn.execute("UPSERT INTO t DEFAULT VALUES")
        assert conn.execute("SELECT count(*), sum(a) FROM t").fetchone() == (3, 9)


def test_default_values_checks_not_null_and_takes_no_column_list(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE n (k INT PRIMARY KEY DEFAULT unique_rowid(), b INT NOT NULL)")
        with pytest.raises(psycopg.errors.NotNullViolation):
            conn.execute("INSERT INTO n DEFAULT VALUES")
        with pytest.raises(psycopg.errors.SyntaxError):
            conn.execute("INSERT INTO n (b) DEFAULT VALUES")
        assert conn.execute("SELECT count(*) FROM n").fetchone() == (0,)


class _Base(orm.DeclarativeBase):
    pass


class _Visit(_Base):
    __tablename__ = "visits"
    id: orm.Mapped[int] = orm.mapped_column(sa.BigInteger, sa.Identity(), primary_key=True)
    hits: orm.Mapped[int] = orm.mapped_column(server_default=sa.text("1"))


def test_sqlalchemy_adds_an_object_of_defaults_only(pg_url: str) -> None:
    engine = sa.create_engine(pg_url.replace("postgresql://", "cockroachdb+psycopg://"))
    try:
        _Base.metadata.create_all(engine)
        with orm.Session(engine) as session:
            visit = _Visit()
            session.add(visit)
            session.commit()
            assert visit.id > 0 and visit.hits == 1
            assert session.scalar(sa.select(sa.func.count()).select_from(_Visit)) == 1
    finally:
        engine.dispose()
