"""Sink URIs are checked part by part when a changefeed is created (issue 43, item 2).

CockroachDB parses the sink URI in CREATE CHANGEFEED and refuses one it cannot use
before a job exists ("CREATE CHANGEFEED ... INTO 'kafka://localhost:9092,localhost:9092'"
fails with "unable to dial", cockroachdb/cockroach#136616); here every part of the URI
(scheme form, hosts, ports, path, query, fragment) is checked and a bad one named, with
SQLSTATE 22023, and nothing is created.
"""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.changefeed.options import ChangefeedOptions
from feedkv.changefeed.sink import parse_sink_uri
from feedkv.errors import SQLError


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("null:", "the scheme must be followed by '//', as in null://"),
        ("kafka:127.0.0.1:9092", "the scheme must be followed by '//', as in kafka://"),
        ("kafka://127.0.0.1:99999", "port '99999' in '127.0.0.1:99999': a port is a number"),
        ("kafka://127.0.0.1:0", "port '0'"),
        ("kafka://127.0.0.1:-1", "port '-1'"),
        ("kafka://127.0.0.1:x", "port 'x'"),
        ("kafka://h:9092,h:99999", "port '99999' in 'h:99999'"),
        ("kafka://h:9092,,h:9093", "an empty address in 'h:9092,,h:9093'"),
        ("kafka://:9092", "no host before the port in ':9092'"),
        ("kafka://user@h:9092", "host 'user@h', which is not a host name"),
        ("kafka://h:9092/topic", "has the path '/topic', which a kafka:// URI does not take"),
        ("kafka://h:9092#frag", "has a fragment (#frag)"),
        ("kafka://h:9092?topic_prefix", "has a malformed query 'topic_prefix'"),
        ("kafka://h 1:9092", "has ' ' at character 10"),
        ("webhook-https://127.0.0.1:65536/x", "port '65536'"),
        ("webhook-https://h%20x/x", "host 'h%20x', which is not a host name"),
        ("null://somewhere", "names 'somewhere', but a null:// URI takes no host"),
        ("null:///path", "has the path '/path', which a null:// URI does not take"),
        ("file://localhost:99/tmp/x", "a file:// URI names no port or user"),
        ("s3://bucket:1/prefix", "a s3:// URI names no port or user"),
    ],
)
def test_a_bad_part_of_a_sink_uri_is_named_at_create_and_nothing_is_created(
    db: DB, uri: str, message: str
) -> None:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY)")
    with pytest.raises(SQLError) as raised:
        db.sql(f"CREATE CHANGEFEED FOR t INTO '{uri}'")
    assert raised.value.code == "22023"
    assert message in raised.value.message
    assert db.sql("SHOW CHANGEFEED JOBS").rows == []


@pytest.mark.parametrize(
    "uri",
    [
        "null://",
        "kafka://127.0.0.1:9092",
        "kafka://h1:9092,h2:9093,[::1]:9094",
        "kafka://broker",
        "webhook-https://user:pw@example.com:8443/path?insecure_tls_skip_verify=true",
        "webhook-http://[::1]:1/x",
        "file:///tmp/x?partition_format=flat",
        "file://localhost/tmp/x",
        "s3://bucket/prefix?AWS_REGION=eu-west-1",
        "experimental-sql://db.t",
    ],
)
def test_well_formed_sink_uris_pass_the_check(uri: str) -> None:
    parsed = parse_sink_uri(uri, ChangefeedOptions())
    assert parsed.uri == uri
