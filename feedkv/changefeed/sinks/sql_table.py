"""``experimental-sql://[db.]table``: changefeed messages into a feedkv table.

The table is created when missing, shaped as CockroachDB's SQL sink::

    CREATE TABLE <table> (topic STRING, partition INT, message_id INT, key BYTES,
                          value BYTES, resolved BYTES,
                          PRIMARY KEY (topic, partition, message_id))

Each batch is one multi-row INSERT (one transaction), so a batch lands whole or not at
all. ``message_id`` counts up within a sink and starts from a time-based value, so a
restarted changefeed's messages sort after the earlier run's. A resolved marker is one
row per topic with ``resolved`` set and no key or value. There is one partition (0).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from feedkv.changefeed.node_buffers import NodeBuffers
from feedkv.changefeed.options import ChangefeedOptions, option_error
from feedkv.changefeed.sink import BatchingSink, FlushConfig, Message, SinkError, SinkURI
from feedkv.errors import FeedKVError, SQLError
from feedkv.sql.descriptor import quote_name
from feedkv.util.hlc import Timestamp

if TYPE_CHECKING:
    from feedkv.sql.client import SQLClient

__all__ = ["SQLTableClient", "make"]

_ROW = "($%d, 0, $%d, $%d, $%d, $%d)"


class SQLTableClient:
    def __init__(self, db: SQLClient, table: str) -> None:
        self._session = db.session()
        self._table = table
        self._next_id = time.time_ns() // 1000
        self._session.execute(
            f"CREATE TABLE IF NOT EXISTS {table} (topic STRING, partition INT, "
            "message_id INT, key BYTES, value BYTES, resolved BYTES, "
            "PRIMARY KEY (topic, partition, message_id))"
        )

    def _insert(self, rows: list[tuple[str, bytes | None, bytes | None, bytes | None]]) -> None:
        params: list[Any] = []
        values = []
        for topic, key, value, resolved in rows:
            n = len(params)
            values.append(_ROW % (n + 1, n + 2, n + 3, n + 4, n + 5))
            self._next_id += 1
            params += [topic, self._next_id, key, value, resolved]
        statement = (
            f"INSERT INTO {self._table} (topic, partition, message_id, key, value, resolved) "
            f"VALUES {', '.join(values)}"
        )
        try:
            self._session.execute(statement, *params)
        except FeedKVError as exc:
            raise SinkError(f"cannot write to table {self._table}: {exc}") from exc

    def send(self, topic: str, batch: list[Message]) -> None:
        self._insert([(topic, m.key, m.value, None) for m in batch])

    def send_resolved(self, ts: Timestamp, topics: list[str]) -> None:
        marker = f'{{"resolved": "{ts}"}}'.encode()
        self._insert([(topic, None, None, marker) for topic in topics])

    def close(self) -> None:
        self._session.close()


def make(
    uri: SinkURI,
    options: ChangefeedOptions,
    *,
    db: SQLClient,
    buffers: NodeBuffers | None = None,
    **_: Any,
) -> BatchingSink:
    parts = [p for p in (uri.host + uri.path).split("/") if p]
    if len(parts) != 1 or not all(parts[0].split(".")):
        raise option_error(
            f"sink URI {uri.uri!r} names no table: write experimental-sql://table or "
            "experimental-sql://database.table"
        )
    table = ".".join(quote_name(p) for p in parts[0].split("."))
    try:
        client = SQLTableClient(db, table)
    except SQLError as exc:
        raise option_error(f"cannot use table {parts[0]!r} as a changefeed sink: {exc}") from exc
    return BatchingSink(client, flush=FlushConfig(messages=500), buffers=buffers)
