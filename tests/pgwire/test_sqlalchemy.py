"""SQLAlchemy 2 with the sqlalchemy-cockroachdb dialect over psycopg, unchanged: a
Core table round trip, an ORM session with a transaction retried on 40001, and the
dialect's introspection (has_table, get_columns, get_pk_constraint)."""

from __future__ import annotations

import decimal

import psycopg
import pytest
import sqlalchemy as sa
from sqlalchemy import orm
from sqlalchemy_cockroachdb import run_transaction


@pytest.fixture
def engine(pg_url: str) -> sa.Engine:
    url = pg_url.replace("postgresql://", "cockroachdb+psycopg://")
    eng = sa.create_engine(url)
    yield eng
    eng.dispose()


def test_a_core_table_round_trip_and_introspection(engine: sa.Engine) -> None:
    metadata = sa.MetaData()
    users = sa.Table(
        "users",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("name", sa.String(50), nullable=False),
        sa.Column("score", sa.Numeric(10, 2)),
    )
    metadata.create_all(engine)
    with engine.begin() as conn:
        conn.execute(
            users.insert(),
            [{"id": 1, "name": "ann", "score": 1.5}, {"id": 2, "name": "bob", "score": None}],
        )
        rows = conn.execute(sa.select(users).order_by(users.c.id)).all()
    assert rows == [(1, "ann", decimal.Decimal("1.50")), (2, "bob", None)]
    inspector = sa.inspect(engine)
    assert inspector.has_table("users") and not inspector.has_table("nobody")
    columns = {c["name"]: c for c in inspector.get_columns("users")}
    assert list(columns) == ["id", "name", "score"]
    assert isinstance(columns["name"]["type"], sa.VARCHAR) and columns["name"]["type"].length == 50
    assert columns["name"]["nullable"] is False and columns["score"]["nullable"] is True
    assert inspector.get_pk_constraint("users")["constrained_columns"] == ["id"]
    reflected = sa.Table("users", sa.MetaData(), autoload_with=engine)
    assert [c.name for c in reflected.primary_key] == ["id"]


class Base(orm.DeclarativeBase):
    pass


class Account(Base):
    __tablename__ = "accounts"
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True, autoincrement=False)
    owner: orm.Mapped[str] = orm.mapped_column(sa.String(40))
    balance: orm.Mapped[int]


def test_an_orm_session_inserts_queries_and_updates_in_a_retried_transaction(
    engine: sa.Engine,
) -> None:
    Base.metadata.create_all(engine)
    with orm.Session(engine) as session:
        session.add_all(
            [Account(id=1, owner="ann", balance=100), Account(id=2, owner="bob", balance=0)]
        )
        session.commit()
    attempts = []

    def transfer(session: orm.Session) -> None:
        attempts.append(1)
        source = session.get(Account, 1)
        target = session.get(Account, 2)
        assert source is not None and target is not None
        source.balance -= 30
        target.balance += 30

    run_transaction(orm.sessionmaker(engine), transfer)  # SAVEPOINT cockroach_restart
    assert attempts == [1]
    with orm.Session(engine) as session:
        found = session.scalars(sa.select(Account).order_by(Account.id)).all()
        assert [(a.owner, a.balance) for a in found] == [("ann", 70), ("bob", 30)]


def test_run_transaction_retries_a_transaction_that_lost_a_conflict(
    engine: sa.Engine, pg_url: str
) -> None:
    """The dialect's retry loop (SAVEPOINT cockroach_restart, 40001, ROLLBACK TO
    SAVEPOINT, SAVEPOINT again, the callback again) runs the callback a second time and
    commits: the other writer's update is kept, not lost."""
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE counter (id INT PRIMARY KEY, n INT)"))
        conn.execute(sa.text("INSERT INTO counter VALUES (1, 0)"))
    attempts: list[int] = []
    with psycopg.connect(pg_url, autocommit=True) as other:

        def increment(session: orm.Session) -> None:
            attempts.append(1)
            n = session.execute(sa.text("SELECT n FROM counter WHERE id = 1")).scalar_one()
            if len(attempts) == 1:  # another writer commits between the read and the write
                other.execute("UPDATE counter SET n = n + 100 WHERE id = 1")
            session.execute(sa.text("UPDATE counter SET n = :n WHERE id = 1"), {"n": n + 1})

        run_transaction(orm.sessionmaker(engine), increment)
    assert len(attempts) == 2
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT n FROM counter")).scalar_one() == 101
