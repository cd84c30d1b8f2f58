"""The JSON encoder's scan path (rows straight from their values) writes exactly what
its event path writes for the same row, under every envelope and metadata option."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from feedkv import DB
from feedkv.changefeed.changefeed import ChangefeedSpec, scan_messages
from feedkv.changefeed.encoder import JSONEncoder
from feedkv.changefeed.options import ChangefeedOptions
from feedkv.changefeed.rows import RowDecoder, Target
from feedkv.changefeed.sink import Message
from feedkv.sql import catalog

ENVELOPES = ("wrapped", "bare", "row", "key_only")
FLAGS = ("diff", "key_in_value", "topic_in_value", "updated", "mvcc_timestamp")


def all_options() -> list[ChangefeedOptions]:
    options = []
    for envelope in ENVELOPES:
        for chosen in itertools.product((False, True), repeat=len(FLAGS)):
            flags: dict[str, Any] = dict(zip(FLAGS, chosen, strict=True))
            options.append(ChangefeedOptions(envelope=envelope, **flags))
    return options


@pytest.fixture
def types(db: DB) -> DB:
    db.sql(
        'CREATE TABLE types (k INT, "100%" STRING, f FLOAT, d DECIMAL, b BYTES, ok BOOL, '
        'day DATE, at TIMESTAMP, atz TIMESTAMPTZ, u UUID, j JSONB, PRIMARY KEY (k, "100%"))'
    )
    db.sql(
        "INSERT INTO types VALUES (1, 'a%sb\"', 1.5, 12.50, x'01ff', true, '2024-05-01', "
        "'2024-05-01 10:00:00.5', '2024-05-01 10:00:00+02', "
        "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{\"x\": [1, null]}'), "
        "(2, 'é', 'NaN', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)"
    )
    return db


def test_scanned_rows_encode_as_their_row_events_do(types: DB) -> None:
    db = types
    ts = db.now()
    snapshot = catalog.Snapshot(db, ts)
    database = catalog.database_by_name(snapshot, "defaultdb")
    desc = catalog.table_by_name(snapshot, database, "types")
    target = Target(desc.id)
    events = list(RowDecoder(db, [target], ts).scan_rows(target, ts))
    assert len(events) == 2
    for options in all_options():
        spec = ChangefeedSpec((target,), {desc.id: "types"}, options, ts)
        encoder = JSONEncoder(options)
        decoder = RowDecoder(db, [target], ts)
        scanned = list(scan_messages(spec, encoder, None, decoder, target, ts))
        expected = [
            Message(
                "types",
                encoder.encode_key(event, "types"),
                encoder.encode_value(event, "types"),
                event.mvcc_ts,
                ts,
                desc.version,
            )
            for event in events
        ]
        assert scanned == expected, options
