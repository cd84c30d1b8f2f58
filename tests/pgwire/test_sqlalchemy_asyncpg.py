"""SQLAlchemy's PostgreSQL dialect over asyncpg (``postgresql+asyncpg``), unchanged: it
prepares every statement, inserts a list of rows with executemany, reads JSONB and
arrays, and reflects a table through its catalog queries (the PostgreSQL dialect's, not
CockroachDB's)."""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

import asyncpg
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.ext.asyncio import create_async_engine

metadata = sa.MetaData()
events = sa.Table(
    "events",
    metadata,
    sa.Column("id", sa.BigInteger, primary_key=True),
    sa.Column("name", sa.String(50), nullable=False),
    sa.Column("doc", JSONB),
    sa.Column("tags", ARRAY(sa.Text)),
    sa.Column("at", sa.DateTime(timezone=True)),
)


def test_an_async_engine_writes_reads_and_reflects(pg_url: str) -> None:
    async def scenario() -> dict[str, Any]:
        engine = create_async_engine(
            "postgresql+asyncpg://", async_creator=lambda: asyncpg.connect(pg_url)
        )
        try:
            async with engine.begin() as conn:
                await conn.run_sync(metadata.create_all)
                when = datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)
                rows = [
                    {"id": i, "name": f"n{i}", "doc": {"i": i}, "tags": ["a", str(i)], "at": when}
                    for i in range(1, 4)
                ]
                await conn.execute(events.insert(), rows)
            async with engine.connect() as conn:
                found = await conn.execute(
                    sa.select(events.c.id, events.c.doc["i"], events.c.tags)
                    .where(events.c.id.in_([1, 3]))
                    .order_by(events.c.id)
                )
                assert found.all() == [(1, 1, ["a", "1"]), (3, 3, ["a", "3"])]
                tagged = await conn.execute(sa.select(events.c.id).where(events.c.tags.any("2")))
                assert tagged.all() == [(2,)]
                return await conn.run_sync(
                    lambda sync: {
                        "columns": sa.inspect(sync).get_columns("events"),
                        "pk": sa.inspect(sync).get_pk_constraint("events"),
                    }
                )
        finally:
            await engine.dispose()

    reflected = asyncio.run(asyncio.wait_for(scenario(), timeout=120))
    dialect = postgresql.dialect()
    columns = [
        (c["name"], c["type"].compile(dialect=dialect), c["nullable"]) for c in reflected["columns"]
    ]
    assert columns == [
        ("id", "BIGINT", False),
        ("name", "VARCHAR(50)", False),
        ("doc", "JSONB", True),
        ("tags", "TEXT[]", True),
        ("at", "TIMESTAMP WITH TIME ZONE", True),
    ]
    assert (reflected["pk"]["name"], reflected["pk"]["constrained_columns"]) == (
        "events_pkey",
        ["id"],
    )


def test_indexes_reflect_with_their_columns(pg_url: str) -> None:
    # its catalog query reads array_aggs of a derived table, which a Describe (asyncpg
    # prepares before it reads a row) typed text: reflection failed an assertion
    async def scenario() -> list[dict[str, Any]]:
        conn = await asyncpg.connect(pg_url)
        await conn.execute("CREATE TABLE o (id INT PRIMARY KEY, user_id INT, placed TIMESTAMPTZ)")
        await conn.execute("CREATE INDEX o_user ON o (user_id, placed)")
        await conn.execute("CREATE UNIQUE INDEX o_placed ON o (placed DESC)")
        await conn.close()
        engine = create_async_engine(
            "postgresql+asyncpg://", async_creator=lambda: asyncpg.connect(pg_url)
        )
        try:
            async with engine.connect() as conn:
                return await conn.run_sync(lambda sync: sa.inspect(sync).get_indexes("o"))
        finally:
            await engine.dispose()

    indexes = asyncio.run(asyncio.wait_for(scenario(), timeout=120))
    assert [(i["name"], i["column_names"], i["unique"]) for i in indexes] == [
        ("o_placed", ["placed"], True),
        ("o_user", ["user_id", "placed"], False),
    ]
