"""BIT and VARBIT in a changefeed's JSON: strings of their bits, as CockroachDB writes
them (``"0101"``)."""

from __future__ import annotations

import json

from feedkv import DB
from feedkv.changefeed.encoder import json_value
from feedkv.changefeed.sinkless import FeedResult
from feedkv.sql.bits import BitString
from feedkv.sql.types import Kind


def test_a_bit_string_is_its_bits_as_a_json_string() -> None:
    assert json_value(Kind.BIT, BitString("0101")) == '"0101"'
    assert json_value(Kind.VARBIT, BitString("")) == '""'


def test_a_changefeed_emits_bit_columns_as_strings(db: DB) -> None:
    db.sql("CREATE TABLE b (k INT PRIMARY KEY, flags BIT(4), mask VARBIT)")
    db.sql("INSERT INTO b VALUES (1, B'0101', B'1'), (2, 10::BIT(4), NULL)")
    result = db.sql(
        "EXPERIMENTAL CHANGEFEED FOR b WITH resolved='0s', min_checkpoint_frequency='0s'"
    )
    assert isinstance(result, FeedResult)
    rows = []
    while len(rows) < 2:
        row = result.poll(30.0)
        assert row is not None, f"the changefeed ended after {rows}"
        if row[0] is not None:
            rows.append(json.loads(row[2])["after"])
    result.close()
    assert rows == [
        {"k": 1, "flags": "0101", "mask": "1"},
        {"k": 2, "flags": "1010", "mask": None},
    ]
