"""A script of CockroachDB changefeed statements runs unchanged against feedkv and each
gives the message bytes CockroachDB gives (for the options whose bytes do not hold a
timestamp); the shapes follow CockroachDB's changefeed message envelope and CDC query
docs."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.changefeed.sinkless import FeedResult

SETUP = (
    "CREATE TABLE vehicles (id INT PRIMARY KEY, city STRING NOT NULL, type STRING, "
    "ext JSONB, rank DECIMAL(4,1))",
    "INSERT INTO vehicles VALUES "
    """(1, 'seattle', 'scooter', '{"color": "yellow", "brand": "Äpfel"}', 2.5), """
    "(2, 'new york', NULL, NULL, NULL)",
)

ROW_1 = (
    '{"city": "seattle", "ext": {"brand": "Äpfel", "color": "yellow"}, "id": 1, '
    '"rank": 2.5, "type": "scooter"}'
)
ROW_2 = '{"city": "new york", "ext": null, "id": 2, "rank": null, "type": null}'

# (statement, the initial scan's (key, value) messages)
SCRIPT = [
    (
        "EXPERIMENTAL CHANGEFEED FOR vehicles WITH initial_scan='only'",
        [("[1]", '{"after": ' + ROW_1 + "}"), ("[2]", '{"after": ' + ROW_2 + "}")],
    ),
    (
        "EXPERIMENTAL CHANGEFEED FOR TABLE vehicles WITH initial_scan='only', key_in_value, "
        "topic_in_value",
        [
            ("[1]", '{"after": ' + ROW_1 + ', "key": [1], "topic": "vehicles"}'),
            ("[2]", '{"after": ' + ROW_2 + ', "key": [2], "topic": "vehicles"}'),
        ],
    ),
    (
        "EXPERIMENTAL CHANGEFEED FOR vehicles WITH envelope=bare, initial_scan='only', "
        "key_in_value",
        [
            ("[1]", '{"__crdb__": {"key": [1]}, ' + ROW_1[1:]),
            ("[2]", '{"__crdb__": {"key": [2]}, ' + ROW_2[1:]),
        ],
    ),
    (
        "EXPERIMENTAL CHANGEFEED FOR vehicles WITH envelope=row, initial_scan='only'",
        [("[1]", ROW_1), ("[2]", ROW_2)],
    ),
    (
        "EXPERIMENTAL CHANGEFEED FOR vehicles WITH envelope=key_only, initial_scan='only'",
        [("[1]", None), ("[2]", None)],
    ),
    (  # create-changefeed docs: "Define a key to determine the changefeed sink partition"
        "EXPERIMENTAL CHANGEFEED FOR TABLE vehicles WITH key_column='city', unordered, "
        "initial_scan='only', key_in_value",
        [
            ('["seattle"]', '{"after": ' + ROW_1 + ', "key": [1]}'),
            ('["new york"]', '{"after": ' + ROW_2 + ', "key": [2]}'),
        ],
    ),
    (  # cdc-queries docs: without diff (or cdc_prev) event_op() says 'upsert'
        "EXPERIMENTAL CHANGEFEED WITH initial_scan='only' AS SELECT city, type, "
        "ext->>'color' AS color, jsonb_build_object('rank', rank) AS meta, "
        "event_op() AS op FROM vehicles WHERE NOT cdc_is_delete()",
        [
            (
                "[1]",
                '{"city": "seattle", "color": "yellow", "meta": {"rank": 2.5}, '
                '"op": "upsert", "type": "scooter"}',
            ),
            (
                "[2]",
                '{"city": "new york", "color": null, "meta": {"rank": null}, '
                '"op": "upsert", "type": null}',
            ),
        ],
    ),
    (
        "EXPERIMENTAL CHANGEFEED WITH envelope=wrapped, initial_scan='only' AS SELECT id, "
        "cdc_prev FROM vehicles",
        [
            ("[1]", '{"after": {"cdc_prev": null, "id": 1}}'),
            ("[2]", '{"after": {"cdc_prev": null, "id": 2}}'),
        ],
    ),
]


@pytest.fixture
def vehicles(db: DB) -> DB:
    for statement in SETUP:
        db.sql(statement)
    return db


@pytest.mark.parametrize(("statement", "expected"), SCRIPT, ids=range(len(SCRIPT)))
def test_a_cockroachdb_statement_gives_cockroachdbs_bytes(
    vehicles: DB, statement: str, expected: list[tuple[str, str | None]]
) -> None:
    result = vehicles.sql(statement)
    assert isinstance(result, FeedResult)
    messages = [(key, value) for _topic, key, value in result]
    assert messages == expected
