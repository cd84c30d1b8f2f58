"""BIT and VARBIT in a changefeed's Avro as CockroachDB encodes them
(pkg/ccl/changefeedccl/avro.go, ``types.BitFamily``): an Avro array of longs, the first
the number of bits used in the last 64-bit word, then the words of the bit string,
leftmost bit in the most significant bit, the last word padded with zeros on the right,
each as a signed long. A consumer that knows CockroachDB's form rebuilds the bits."""

from __future__ import annotations

import json
from typing import Any

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from feedkv import DB
from feedkv.changefeed.avro import bit_longs
from feedkv.changefeed.sinkless import FeedResult
from feedkv.testing.schema_registry import SchemaRegistryServer

DEADLINE = 30.0


def bits_of(longs: list[int]) -> str:
    """The bit string a consumer reads back from CockroachDB's form."""
    used, words = longs[0], longs[1:]
    text = "".join(format(word & (2**64 - 1), "064b") for word in words)
    return text[: len(text) - 64 + used] if words else ""


def test_a_bit_string_is_its_last_words_bits_then_its_words() -> None:
    assert bit_longs("") == [0]
    assert bit_longs("1") == [1, -(2**63)]  # 1 then 63 zeros: the sign bit
    assert bit_longs("0101") == [4, 0x5 << 60]
    assert bit_longs("1" * 64) == [64, -1]
    assert bit_longs("0" * 63 + "1" + "11") == [2, 1, -(2**63) + 2**62]
    for bits in ("", "1", "0101", "1" * 64, "10" * 40, "0" * 129):
        assert bits_of(bit_longs(bits)) == bits


def test_an_avro_changefeed_writes_bit_columns_as_arrays_of_longs(db: DB) -> None:
    db.sql("CREATE TABLE b (k INT PRIMARY KEY, flags BIT(4), mask VARBIT)")
    db.sql("INSERT INTO b VALUES (1, B'0101', B'1'), (2, 10::BIT(4), NULL)")
    with SchemaRegistryServer() as registry:
        result = db.sql(
            "EXPERIMENTAL CHANGEFEED FOR b WITH format=avro, "
            f"confluent_schema_registry='{registry.url}'"
        )
        assert isinstance(result, FeedResult)
        decode = AvroDeserializer(SchemaRegistryClient({"url": registry.url}))
        rows: list[dict[str, Any]] = []
        try:
            while len(rows) < 2:
                row = result.poll(DEADLINE)
                assert row is not None, f"the changefeed ended after {rows}"
                if row[0] is not None:
                    value = decode(row[2], SerializationContext(row[0], MessageField.VALUE))
                    assert value is not None
                    rows.append(value["after"])
        finally:
            result.close()
        schema = json.loads(registry.subjects()["b-value"][-1].schema)
    after = schema["fields"][0]["type"][1]
    types = {f["name"]: f["type"] for f in after["fields"]}
    assert types["flags"] == types["mask"] == ["null", {"type": "array", "items": "long"}]
    assert rows == [
        {"k": 1, "flags": [4, 0x5 << 60], "mask": [1, -(2**63)]},
        {"k": 2, "flags": [4, -(2**63) + (0x2 << 60)], "mask": None},
    ]
    assert [bits_of(r["flags"]) for r in rows] == ["0101", "1010"]
