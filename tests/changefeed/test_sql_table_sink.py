"""The SQL table sink: messages land in a feedkv table."""

from __future__ import annotations

import json

import pytest

from feedkv import DB
from feedkv.changefeed.options import parse_options
from feedkv.changefeed.sink import Sink, make_sink, parse_sink_uri
from feedkv.errors import SQLError
from feedkv.testing.sink_conformance import START, SinkSetup
from feedkv.testing.waiting import wait_until


def test_messages_and_resolved_markers_land_in_the_table(db: DB) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    db.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b')")
    db.sql(
        "CREATE CHANGEFEED FOR t INTO 'experimental-sql://sink' "
        "WITH resolved='0s', min_checkpoint_frequency='0s'"
    )
    db.sql("UPDATE t SET v = 'c' WHERE k = 1")
    written = db.now()

    def resolved_past_write() -> list[tuple[object, ...]]:
        rows = db.sql("SELECT topic, message_id, key, value, resolved FROM sink").rows
        marks = [json.loads(r[4])["resolved"] for r in rows if r[4] is not None]
        return rows if marks and marks[-1] >= str(written) else []

    rows = wait_until(resolved_past_write, timeout_s=30, what="a resolved marker in the sink")
    messages = [(r[2], json.loads(r[3])) for r in rows if r[4] is None]
    assert messages[:3] == [
        (b"[1]", {"after": {"k": 1, "v": "a"}}),
        (b"[2]", {"after": {"k": 2, "v": "b"}}),
        (b"[1]", {"after": {"k": 1, "v": "c"}}),
    ]
    ids = [r[1] for r in rows]
    assert ids == sorted(ids)  # message ids count up in delivery order


def test_a_changefeed_cannot_write_into_a_table_it_watches(db: DB) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY)")
    with pytest.raises(SQLError, match="watches"):
        db.sql("CREATE CHANGEFEED FOR t INTO 'experimental-sql://t'")
    with pytest.raises(SQLError, match="names no table"):
        db.sql("CREATE CHANGEFEED FOR t INTO 'experimental-sql://'")


# The sink contract.


@pytest.fixture(params=["sink", "defaultdb.sink"])
def sql_table_setup(request: pytest.FixtureRequest, db: DB) -> SinkSetup:
    """The SQL table sink, read back by SQL: a stream per topic, by message id; its
    failing twin writes into a table dropped under it, until it is made again."""
    table: str = request.param
    options = parse_options((), now=START)

    def sink_into(name: str) -> Sink:
        return make_sink(parse_sink_uri(f"experimental-sql://{name}", options), options, db=db)

    def reader() -> dict[str, list[bytes]]:
        streams: dict[str, list[bytes]] = {}
        rows = db.sql(f"SELECT topic, value, resolved FROM {table} ORDER BY message_id").rows
        for topic, value, resolved in rows:
            streams.setdefault(topic, []).append(value if resolved is None else resolved)
        return streams

    def failing() -> Sink:
        sink = sink_into("gone")
        db.sql("DROP TABLE gone")
        return sink

    def recover() -> None:
        db.sql(
            "CREATE TABLE gone (topic STRING, partition INT, message_id INT, key BYTES, "
            "value BYTES, resolved BYTES, PRIMARY KEY (topic, partition, message_id))"
        )

    return SinkSetup(lambda: sink_into(table), reader, failing=failing, recover=recover)


def test_the_sql_table_sink_keeps_the_sink_contract(sql_table_setup: SinkSetup) -> None:
    sql_table_setup.check()
