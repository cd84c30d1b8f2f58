"""Expression indexes over the SQL port: a UNIQUE one's 23505 reaches psycopg with its
DETAIL naming the expression; pg_indexes and pg_get_indexdef show the expression, as
PostgreSQL's do; SQLAlchemy's ``sa.Index("ix", func.lower(col))`` is made by
``create_all`` and read back by its Inspector."""

from __future__ import annotations

import psycopg
import pytest
import sqlalchemy as sa
from psycopg import errors


def test_psycopg_unique_expression_index_violation(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE users (id INT PRIMARY KEY, email STRING)")
        conn.execute("CREATE UNIQUE INDEX users_email_lower ON users (lower(email))")
        conn.execute("INSERT INTO users VALUES (%s, %s)", (1, "Ann@example.com"))
        with pytest.raises(errors.UniqueViolation) as caught:
            conn.execute("INSERT INTO users VALUES (%s, %s)", (2, "ANN@example.com"))
        assert caught.value.sqlstate == "23505"
        assert caught.value.diag.message_detail == (
            "Key (lower(email))=('ann@example.com') already exists."
        )
        found = conn.execute(
            "SELECT id FROM users WHERE lower(email) = %s", ("ann@example.com",)
        ).fetchall()
        assert found == [(1,)]
        rows = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'users' "
            "ORDER BY indexname"
        ).fetchall()
        assert rows[0] == (
            "users_email_lower",
            "CREATE UNIQUE INDEX users_email_lower ON public.users USING btree (lower(email))",
        )
        (indkey,) = conn.execute(
            "SELECT indkey::STRING FROM pg_index WHERE indexrelid = 'users_email_lower'::regclass"
        ).fetchone() or (None,)
        assert indkey == "0"  # an expression, as PostgreSQL's


def test_sqlalchemy_create_all_makes_an_expression_index(pg_url: str) -> None:
    engine = sa.create_engine(pg_url.replace("postgresql://", "cockroachdb+psycopg://", 1))
    metadata = sa.MetaData()
    accounts = sa.Table(
        "accounts",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String),
    )
    sa.Index("ix_accounts_lower_name", sa.func.lower(accounts.c.name), unique=True)
    try:
        metadata.create_all(engine)
        with engine.begin() as conn:
            conn.execute(accounts.insert(), [{"id": 1, "name": "Zoe"}])
            with pytest.raises(sa.exc.IntegrityError), conn.begin_nested():
                conn.execute(accounts.insert(), [{"id": 2, "name": "ZOE"}])
        indexes = sa.inspect(engine).get_indexes("accounts")
        found = {index["name"]: index for index in indexes}
        assert found["ix_accounts_lower_name"]["unique"]
        assert found["ix_accounts_lower_name"].get("expressions") == ["lower(name)"]
        columns = [c["name"] for c in sa.inspect(engine).get_columns("accounts")]
        assert columns == ["id", "name"]
    finally:
        engine.dispose()
