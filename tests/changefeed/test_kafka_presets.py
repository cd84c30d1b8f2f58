"""CockroachDB 26.1's Kafka-flavoured sink schemes (its "Changefeed Sinks" page,
"Confluent Cloud" and "Azure Event Hubs"): ``confluent-cloud://`` with ``api_key`` and
``api_secret``, ``azure-event-hub://`` with ``shared_access_key_name`` and
``shared_access_key``; TLS and SASL PLAIN are set up for the user. Neither service can
run here, and librdkafka's mock cluster speaks neither TLS nor SASL, so these tests check
the producer's settings."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest

from feedkv.changefeed.jobs import redacted
from feedkv.changefeed.options import ChangefeedOptions
from feedkv.changefeed.sink import parse_sink_uri
from feedkv.changefeed.sinks import kafka
from feedkv.changefeed.sinks.kafka import producer_config
from feedkv.errors import SQLError

SECRET = "s3cr/t+="


def config_of(uri: str) -> dict[str, Any]:
    return producer_config(parse_sink_uri(uri, ChangefeedOptions()), ChangefeedOptions())


def test_confluent_cloud_signs_in_with_the_api_key_over_tls() -> None:
    config = config_of(
        "confluent-cloud://pkc-lzvrd.us-west4.gcp.confluent.cloud:9092"
        f"?api_key=ABCDEF&api_secret={quote(SECRET, safe='')}&topic_name=vehicles"
    )
    assert config["bootstrap.servers"] == "pkc-lzvrd.us-west4.gcp.confluent.cloud:9092"
    assert (config["security.protocol"], config["sasl.mechanism"]) == ("SASL_SSL", "PLAIN")
    assert (config["sasl.username"], config["sasl.password"]) == ("ABCDEF", SECRET)


def test_azure_event_hubs_sign_in_with_the_namespaces_connection_string() -> None:
    config = config_of(
        "azure-event-hub://feeds.servicebus.windows.net:9093"
        f"?shared_access_key_name=send&shared_access_key={quote(SECRET, safe='')}"
        "&tls_enabled=true&sasl_enabled=true&sasl_handshake=true&sasl_mechanism=PLAIN"
    )
    assert (config["security.protocol"], config["sasl.mechanism"]) == ("SASL_SSL", "PLAIN")
    assert config["sasl.username"] == "$ConnectionString"
    assert config["sasl.password"] == (
        "Endpoint=sb://feeds.servicebus.windows.net/;SharedAccessKeyName=send;"
        f"SharedAccessKey={SECRET}"
    )


def test_their_secrets_are_redacted_on_show() -> None:
    shown = redacted(f"confluent-cloud://h:9092?api_key=ABC&api_secret={SECRET}")
    assert "api_secret=redacted" in shown and SECRET not in shown
    shown = redacted(
        f"azure-event-hub://h:9093?shared_access_key_name=n&shared_access_key={SECRET}"
    )
    assert "shared_access_key=redacted" in shown and SECRET not in shown


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("confluent-cloud://h:9092?api_key=k", "api_secret is needed by confluent-cloud://"),
        ("confluent-cloud://h:9092?api_secret=s", "api_key is needed"),
        ("confluent-cloud://h:9092?api_key=k&api_secret=s&tls_enabled=false", "must be true"),
        (
            "confluent-cloud://h:9092?api_key=k&api_secret=s&sasl_mechanism=SCRAM-SHA-256",
            "sasl_mechanism must be PLAIN",
        ),
        ("confluent-cloud://h:9092?api_key=k&api_secret=s&sasl_user=u", "sasl_user is not used"),
        ("azure-event-hub://h:9093?shared_access_key=k", "shared_access_key_name is needed"),
        ("azure-event-hub://h:9093?api_key=k&api_secret=s", "api_key is for confluent-cloud://"),
        ("kafka://h:9092?shared_access_key=k", "shared_access_key is for azure-event-hub://"),
        ("confluent-cloud://h:9092?api_key=k&api_secret=s&api_kye=x", "did you mean 'api_key'"),
    ],
)
def test_bad_preset_uris_are_refused_naming_the_parameter(uri: str, message: str) -> None:
    options = ChangefeedOptions()
    with pytest.raises(SQLError) as raised:
        kafka.make(parse_sink_uri(uri, options), options)
    assert raised.value.code == "22023"
    assert message in raised.value.message
