"""The test schema registry enforces compatibility as Confluent's does, driven through
confluent-kafka's own ``SchemaRegistryClient`` and raw HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from feedkv.testing.avro_compatibility import compatibility_problems, read_problems
from feedkv.testing.schema_registry import SchemaRegistryServer


def record(*fields: dict[str, Any], name: str = "t") -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": list(fields)}


def avro(schema: dict[str, Any]) -> Schema:
    return Schema(json.dumps(schema), "AVRO")


V1 = record({"name": "id", "type": "long"})
WITH_REQUIRED = record({"name": "id", "type": "long"}, {"name": "qty", "type": "long"})
WITH_OPTIONAL = record(
    {"name": "id", "type": "long"}, {"name": "qty", "type": ["null", "long"], "default": None}
)


@pytest.fixture
def registry() -> Iterator[SchemaRegistryServer]:
    with SchemaRegistryServer() as server:
        yield server


@pytest.fixture
def client(registry: SchemaRegistryServer) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": registry.url})


def test_a_field_without_a_default_is_refused_with_409_under_the_default_backward_rule(
    client: SchemaRegistryClient, registry: SchemaRegistryServer
) -> None:
    """Confluent's default compatibility is BACKWARD: a new schema must read the data of
    the latest one. A field added without a default cannot, so registering it answers
    HTTP 409 (Confluent's "Schema being registered is incompatible")."""
    assert client.get_compatibility() == "BACKWARD"
    client.register_schema("t-value", avro(V1))
    with pytest.raises(SchemaRegistryError) as raised:
        client.register_schema("t-value", avro(WITH_REQUIRED))
    assert raised.value.http_status_code == 409
    assert raised.value.error_code == 409
    assert "t.qty" in raised.value.error_message
    assert "no default" in raised.value.error_message
    # Refused means not registered: no version, no id.
    assert client.get_versions("t-value") == [1]
    assert [r.status for r in registry.requests if r.method == "POST"][-1] == 409

    assert client.register_schema("t-value", avro(WITH_OPTIONAL)) == 2
    assert client.get_versions("t-value") == [1, 2]


def test_a_subject_level_overrides_the_global_one(client: SchemaRegistryClient) -> None:
    """``PUT /config/<subject>`` sets a subject's own level (Confluent's per-subject
    config); ``GET /config/<subject>`` without one is 404 (40408) unless
    ``defaultToGlobal``; other subjects keep the global level."""
    with pytest.raises(SchemaRegistryError) as raised:
        client.get_compatibility("loose-value")
    assert (raised.value.http_status_code, raised.value.error_code) == (404, 40408)

    client.set_compatibility("loose-value", "NONE")
    assert client.get_compatibility("loose-value") == "NONE"
    client.register_schema("loose-value", avro(V1))
    client.register_schema("loose-value", avro(WITH_REQUIRED))  # NONE: anything goes
    assert client.get_versions("loose-value") == [1, 2]

    client.register_schema("strict-value", avro(V1))
    with pytest.raises(SchemaRegistryError):
        client.register_schema("strict-value", avro(WITH_REQUIRED))


def test_forward_and_full_levels_check_the_other_direction(client: SchemaRegistryClient) -> None:
    """FORWARD: the latest schema must read the new one's data, so removing a field
    without a default breaks it; FULL needs both directions."""
    client.set_compatibility("f-value", "FORWARD")
    client.register_schema("f-value", avro(WITH_REQUIRED))
    with pytest.raises(SchemaRegistryError) as raised:
        client.register_schema("f-value", avro(V1))  # old readers need qty
    assert raised.value.http_status_code == 409

    client.set_compatibility("full-value", "FULL")
    client.register_schema("full-value", avro(V1))
    assert client.register_schema("full-value", avro(WITH_OPTIONAL)) > 0
    assert not client.test_compatibility("full-value", avro(WITH_REQUIRED))


def test_transitive_levels_check_every_earlier_version(client: SchemaRegistryClient) -> None:
    """BACKWARD_TRANSITIVE compares with every version, BACKWARD with the latest only."""
    optional_s = record(
        {"name": "id", "type": "long"}, {"name": "s", "type": ["null", "string"], "default": None}
    )
    # v1 has no s; v2 adds s with a default; v3 makes s required (readable from v2, not v1)
    required_s = record({"name": "id", "type": "long"}, {"name": "s", "type": "string"})
    for subject, level in (("b-value", "BACKWARD"), ("bt-value", "BACKWARD_TRANSITIVE")):
        client.set_compatibility(subject, level)
        client.register_schema(subject, avro(V1))
        client.register_schema(subject, avro(optional_s))
    with pytest.raises(SchemaRegistryError):
        client.register_schema("b-value", avro(required_s))  # v2 data has s as a union
    assert client.test_compatibility("b-value", avro(optional_s))

    assert not client.test_compatibility("bt-value", avro(required_s))


def test_a_schema_already_in_the_subject_is_returned_unchecked(
    client: SchemaRegistryClient,
) -> None:
    """Registering a schema the subject has returns its id, whatever the level."""
    client.set_compatibility("s-value", "NONE")
    first = client.register_schema("s-value", avro(V1))
    client.register_schema("s-value", avro(WITH_REQUIRED))
    client.set_compatibility("s-value", "FULL_TRANSITIVE")
    assert client.register_schema("s-value", avro(V1)) == first
    assert client.get_versions("s-value") == [1, 2]


def test_a_bad_level_is_refused_with_422(registry: SchemaRegistryServer) -> None:
    response = httpx.put(f"{registry.url}/config/t-value", json={"compatibility": "SIDEWAYS"})
    assert response.status_code == 422
    assert response.json()["error_code"] == 42203
    assert "SIDEWAYS" in response.json()["message"]


@pytest.mark.parametrize(
    ("reader", "writer", "problem"),
    [
        ("long", "int", None),  # promotion
        ("int", "long", "the reader's int cannot read the writer's long"),
        ("bytes", "string", None),
        (["null", "string"], "string", None),
        ("string", ["null", "string"], "the reader's string cannot read the writer's null"),
        (
            {"type": "enum", "name": "e", "symbols": ["a"]},
            {"type": "enum", "name": "e", "symbols": ["a", "b"]},
            "lacks the symbols ['b']",
        ),
        (record(name="a"), record(name="b"), "record a does not read record b"),
        (
            {"type": "array", "items": "long"},
            {"type": "array", "items": {"type": "int", "logicalType": "date"}},
            None,
        ),
    ],
)
def test_read_problems_follow_avro_schema_resolution(
    reader: Any, writer: Any, problem: str | None
) -> None:
    found = read_problems(reader, writer)
    if problem is None:
        assert found == []
    else:
        assert any(problem in p for p in found), found


def test_records_are_resolved_through_named_references() -> None:
    """A record referenced by name later in a schema is the one defined earlier."""
    inner = record({"name": "x", "type": "long"}, name="inner")
    writer = record({"name": "a", "type": inner}, {"name": "b", "type": "inner"}, name="outer")
    widened = record(
        {"name": "x", "type": "long"},
        {"name": "y", "type": ["null", "long"], "default": None},
        name="inner",
    )
    reader = record({"name": "a", "type": widened}, {"name": "b", "type": "inner"}, name="outer")
    assert read_problems(reader, writer) == []
    assert compatibility_problems("FULL", reader, [writer]) == []
    narrowed = record({"name": "a", "type": "long"}, name="outer")
    assert compatibility_problems("NONE", narrowed, [writer]) == []
    assert compatibility_problems("BACKWARD", narrowed, [writer]) != []
