"""An application's models through SQLAlchemy 2 and sqlalchemy-cockroachdb, as a
developer writes them: relationships with ON DELETE CASCADE, an enum, defaults and
server defaults, an identity key, unique and check constraints, indexes and a view;
``create_all``, a Session's inserts, updates and deletes, a bulk insert, joins,
aggregates and pagination, and the Inspector's reflection of it all, as against
CockroachDB. Found wanting before: a foreign key's ON DELETE in pg_get_constraintdef
(the Inspector lost it), ``pg_get_viewdef`` (0A000; psql's ``\\d+ view`` showed no
definition), pg_class.relchecks (0: psql's ``\\d`` listed no check constraint)."""

from __future__ import annotations

import datetime
import decimal
import enum
import shutil
import subprocess
import warnings
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from sqlalchemy import orm
from sqlalchemy.dialects import postgresql


class _Base(orm.DeclarativeBase):
    pass


class Status(enum.Enum):
    active = "active"
    banned = "banned"


class Author(_Base):
    __tablename__ = "authors"
    id: orm.Mapped[int] = orm.mapped_column(sa.BigInteger, sa.Identity(), primary_key=True)
    email: orm.Mapped[str] = orm.mapped_column(sa.String(120), unique=True)
    name: orm.Mapped[str] = orm.mapped_column(sa.String(50), index=True)
    status: orm.Mapped[Status] = orm.mapped_column(
        sa.Enum(Status, name="author_status"), default=Status.active
    )
    joined: orm.Mapped[datetime.datetime] = orm.mapped_column(
        sa.DateTime(timezone=True), server_default=sa.func.now()
    )
    karma: orm.Mapped[int] = orm.mapped_column(server_default=sa.text("0"))
    books: orm.Mapped[list[Book]] = orm.relationship(
        back_populates="author", cascade="all, delete-orphan", passive_deletes=True
    )
    __table_args__ = (sa.CheckConstraint("karma >= 0", name="karma_not_negative"),)


class Book(_Base):
    __tablename__ = "books"
    id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
    author_id: orm.Mapped[int] = orm.mapped_column(
        sa.ForeignKey("authors.id", ondelete="CASCADE", onupdate="CASCADE")
    )
    title: orm.Mapped[str] = orm.mapped_column(sa.String(200))
    price: orm.Mapped[decimal.Decimal] = orm.mapped_column(
        sa.Numeric(10, 2), default=decimal.Decimal("0")
    )
    tags: orm.Mapped[list[str] | None] = orm.mapped_column(postgresql.ARRAY(sa.String))
    author: orm.Mapped[Author] = orm.relationship(back_populates="books")
    __table_args__ = (
        sa.UniqueConstraint("author_id", "title", name="uq_author_title"),
        sa.Index("ix_books_author_price", "author_id", sa.text("price DESC")),
    )


@pytest.fixture
def engine(pg_url: str) -> Iterator[sa.Engine]:
    eng = sa.create_engine(pg_url.replace("postgresql://", "cockroachdb+psycopg://"))
    _Base.metadata.create_all(eng)
    with eng.begin() as conn:
        conn.execute(
            sa.text("CREATE VIEW active_authors AS SELECT id, name FROM authors WHERE karma > 0")
        )
    yield eng
    eng.dispose()


def test_a_session_writes_and_queries_the_models(engine: sa.Engine) -> None:
    with orm.Session(engine) as session:
        ann = Author(email="ann@x", name="ann")
        ann.books = [Book(title="one", price=decimal.Decimal("5"), tags=["a"]), Book(title="two")]
        session.add_all([ann, Author(email="bob@x", name="bob")])
        session.commit()
        assert ann.id > 0 and ann.status is Status.active and ann.karma == 0
        ann.karma += 3
        session.commit()
        bob = session.scalars(sa.select(Author).where(Author.name == "bob")).one()
        session.execute(
            sa.insert(Book),
            [{"author_id": bob.id, "title": f"b{i}", "price": i} for i in range(20)],
        )
        session.commit()
        totals = session.execute(
            sa.select(Author.name, sa.func.count(Book.id), sa.func.sum(Book.price))
            .join(Book)
            .group_by(Author.name)
            .order_by(Author.name)
        ).all()
        assert totals == [
            ("ann", 2, decimal.Decimal("5.00")),
            ("bob", 20, decimal.Decimal("190.00")),
        ]
        page = session.scalars(
            sa.select(Book.title).order_by(Book.price.desc(), Book.title).limit(3).offset(2)
        ).all()
        assert page == ["b17", "b16", "b15"]
        rich = session.scalars(
            sa.select(Author.name).where(Author.books.any(Book.price > 18))
        ).all()
        assert rich == ["bob"]
        assert session.scalars(
            sa.select(sa.text("name")).select_from(sa.text("active_authors"))
        ).all() == ["ann"]
        session.delete(bob)  # ON DELETE CASCADE takes his books
        session.commit()
        assert session.scalar(sa.select(sa.func.count()).select_from(Book)) == 2
        with pytest.raises(
            sa.exc.IntegrityError, match=r"failed to satisfy CHECK constraint \(karma >= 0:::INT8\)"
        ):
            session.add(Author(email="c@x", name="c", karma=-1))
            session.commit()


def test_the_inspector_reflects_the_models(engine: sa.Engine) -> None:
    inspector = sa.inspect(engine)
    assert inspector.get_view_names() == ["active_authors"]
    assert inspector.get_view_definition("active_authors") == (
        "SELECT id, name FROM authors WHERE karma > 0"
    )
    [fk] = inspector.get_foreign_keys("books")
    assert (fk["referred_table"], fk["constrained_columns"], fk["referred_columns"]) == (
        "authors",
        ["author_id"],
        ["id"],
    )
    assert fk["options"] == {"ondelete": "CASCADE", "onupdate": "CASCADE"}
    assert inspector.get_check_constraints("authors") == [
        {"name": "karma_not_negative", "sqltext": "karma >= 0", "comment": None}
    ]
    assert [u["column_names"] for u in inspector.get_unique_constraints("books")] == [
        ["author_id", "title"]
    ]
    indexes = {i["name"]: i for i in inspector.get_indexes("books")}
    assert indexes["ix_books_author_price"]["column_sorting"] == {"price": ("desc", "nulls_last")}
    assert [e["labels"] for e in inspector.get_enums()] == [["active", "banned"]]
    reflected = sa.MetaData()
    with warnings.catch_warnings():
        # NB: the dialect reads no enum type from information_schema (USER-DEFINED, as
        # CockroachDB shows it) and warns
        warnings.simplefilter("ignore", sa.exc.SAWarning)
        reflected.reflect(engine, views=True)
    assert sorted(reflected.tables) == ["active_authors", "authors", "books"]
    [books_fk] = reflected.tables["books"].foreign_keys
    assert books_fk.ondelete == "CASCADE"


def test_psql_describes_the_view_and_the_check_constraint(engine: sa.Engine, pg_url: str) -> None:
    psql = shutil.which("psql")
    assert psql is not None, "psql is missing: `make` installs Debian's postgresql-client"

    def described(name: str) -> list[str]:
        done = subprocess.run(
            [psql, pg_url, "-X", "-v", "ON_ERROR_STOP=1", "-c", f"\\d+ {name}"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()

    view = described("active_authors")
    assert view[view.index("View definition:") + 1] == (
        "SELECT id, name FROM authors WHERE karma > 0"
    )
    # NB: as CockroachDB's pg_class.relchecks counts them, psql lists them
    table = described("authors")
    assert table[table.index("Check constraints:") + 1].strip() == (
        '"karma_not_negative" CHECK (karma >= 0)'
    )
