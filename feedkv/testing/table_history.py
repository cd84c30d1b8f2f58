"""A table's whole history, read once, as the readers a changefeed validator asks.

:func:`~feedkv.testing.changefeed_validator.sql_row_reader` and ``sql_table_reader`` run
one ``SELECT ... AS OF SYSTEM TIME`` per question: on a cluster of node processes that
costs a tenth of a second each, and a fingerprint asks one per timestamp of the feed, so
validating a few thousand messages took minutes. :class:`TableHistory` exports every
version of the table's rows up to a timestamp in one pass and answers both readers from
memory, with the same rows (every column in its JSON form, keyed by the primary key's
JSON values).

The table's schema must not change in the window read: every version is decoded with
the descriptor as of its end (a test that alters the table uses the SQL readers).
"""

from __future__ import annotations

import json
from bisect import bisect_right
from typing import Any

from feedkv.changefeed.encoder import json_value
from feedkv.rangefeed.feed_client import FeedClient
from feedkv.sql import catalog
from feedkv.sql.row_codec import decode_row_values, table_span
from feedkv.storage.mvcc import KeyValue
from feedkv.testing.changefeed_validator import Row
from feedkv.util.hlc import Timestamp

__all__ = ["TableHistory"]


class TableHistory:
    """Every version of ``table``'s rows (``name`` or ``database.name``) in ``(since,
    upto]``, read from ``db`` when made. :meth:`row_at` is a ``RowReader`` and
    :meth:`table_at` a ``TableReader``; neither looks at the topic. Questions about a
    time after ``upto`` are answered as of ``upto``.

    ``since`` must precede the table's first row (take ``db.now()`` before creating
    it): the store's garbage collection refuses to export below its threshold, so the
    history cannot simply be read from the beginning of time."""

    def __init__(self, db: FeedClient, table: str, since: Timestamp, upto: Timestamp) -> None:
        database, _, name = table.rpartition(".")
        snapshot = catalog.Snapshot(db, upto)
        found = catalog.database_by_name(snapshot, database or catalog.DEFAULT_DATABASE)
        desc = catalog.table_by_name(snapshot, found, name)
        self.upto = upto
        # per row (primary key in JSON form): its versions' timestamps, oldest first,
        # and the row each left (None: deleted)
        self._times: dict[tuple[Any, ...], list[Timestamp]] = {}
        self._rows: dict[tuple[Any, ...], list[Row | None]] = {}
        key_kinds = [c.type.kind for c in desc.key_columns]
        versions = sorted(db.export(table_span(desc.id), since, upto), key=lambda v: v.ts)
        for version in versions:
            decoded = next(
                decode_row_values(desc, [KeyValue(version.key, version.value or b"", version.ts)]),
                None,
            )
            if decoded is None:
                continue  # a column family's pair other than the first: not of one family
            key_values, values, _ts = decoded
            key = tuple(
                json.loads(json_value(kind, v))
                for kind, v in zip(key_kinds, key_values, strict=True)
            )
            row: Row | None = None
            if version.value is not None:
                row = {
                    c.name: json.loads(json_value(c.type.kind, v))
                    for c, v in zip(desc.columns, values, strict=True)
                }
            self._times.setdefault(key, []).append(version.ts)
            self._rows.setdefault(key, []).append(row)

    def row_at(self, topic: str, key: list[Any], ts: Timestamp) -> Row | None:
        """The row keyed ``key`` as of ``ts`` (``None``: none then)."""
        return self._at(tuple(key), ts)

    def table_at(self, topic: str, ts: Timestamp) -> dict[tuple[Any, ...], Row]:
        """Every row as of ``ts``."""
        rows = {key: self._at(key, ts) for key in self._times}
        return {key: row for key, row in rows.items() if row is not None}

    def _at(self, key: tuple[Any, ...], ts: Timestamp) -> Row | None:
        times = self._times.get(key)
        if not times:
            return None
        index = bisect_right(times, ts)
        return self._rows[key][index - 1] if index else None
