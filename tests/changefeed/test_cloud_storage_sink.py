"""The cloud storage sink on the local disk (``file://``): names, order, formats."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import zstandard

from feedkv import DB
from feedkv.changefeed.options import parse_options
from feedkv.changefeed.sink import Message, Sink, make_sink, message_options, parse_sink_uri
from feedkv.changefeed.sinks.cloud_storage import (
    FILE_NAME,
    CloudStorageClient,
    LocalBlobs,
    file_topic,
    name_ts,
)
from feedkv.testing.sink_conformance import START, SinkSetup
from feedkv.testing.sql_workload import published_files
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import Timestamp

FAST = "resolved='0s', min_checkpoint_frequency='0s'"


def files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and not p.name.endswith(".tmp"))


def lines(path: Path) -> list[Any]:
    return [json.loads(line) for line in raw_lines(path)]


def raw_lines(path: Path) -> list[bytes]:
    raw = path.read_bytes()
    if path.name.endswith(".gz"):
        raw = gzip.decompress(raw)
    elif path.name.endswith(".zst"):
        raw = zstandard.ZstdDecompressor().decompress(raw)
    return raw.splitlines()


def resolved_files(root: Path) -> list[Path]:
    return [p for p in files(root) if p.name.endswith(".RESOLVED")]


def resolved_of(text: str) -> Timestamp:
    """The timestamp of a ``.RESOLVED`` file: ``{"resolved":...}``, or under ``__crdb__``
    for the bare envelope (a CDC query's default)."""
    marker = json.loads(text)
    return Timestamp.parse(marker.get("__crdb__", marker)["resolved"])


def wait_resolved_past(root: Path, ts: Timestamp) -> None:
    def done() -> bool:
        found = resolved_files(root)
        return bool(found) and resolved_of(found[-1].read_text()) >= ts

    wait_until(done, timeout_s=30, what=f"a resolved file at or past {ts}")


@pytest.fixture
def table(db: DB) -> DB:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    db.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b')")
    return db


def test_reading_files_in_name_order_gives_rows_before_their_resolved_marker(
    table: DB, tmp_path: Path
) -> None:
    db = table
    out = tmp_path / "out"
    db.sql(f"CREATE CHANGEFEED FOR t INTO 'file://{out}' WITH updated, {FAST}")
    for i in range(3, 30):
        db.sql("UPSERT INTO t VALUES ($1, 'x')", i % 7)
    last = db.now()
    wait_resolved_past(out, last)
    resolved = Timestamp(0, 0)
    latest: dict[int, Timestamp] = {}
    seen: set[tuple[int, Timestamp]] = set()
    for path in files(out):
        if path.name.endswith(".RESOLVED"):
            resolved = Timestamp.parse(json.loads(path.read_text())["resolved"])
            continue
        for row in lines(path):
            updated = Timestamp.parse(row["updated"])
            key = row["after"]["k"]
            assert updated >= latest.get(key, Timestamp(0, 0))  # per key, never older
            assert updated > resolved or (key, updated) in seen  # nothing new below a marker
            latest[key] = updated
            seen.add((key, updated))
    assert set(latest) == {0, 1, 2, 3, 4, 5, 6}
    assert resolved >= last


def test_a_wrapped_line_carries_its_key_so_a_deletion_names_its_row(
    table: DB, tmp_path: Path
) -> None:
    db = table
    out = tmp_path / "out"
    db.sql(f"CREATE CHANGEFEED FOR t INTO 'file://{out}' WITH updated, {FAST}")
    db.sql("DELETE FROM t WHERE k = 2")
    wait_resolved_past(out, db.now())
    rows = [row for path in files(out) if path.suffix == ".ndjson" for row in lines(path)]
    assert {(tuple(r["key"]), r["after"] is None) for r in rows} == {
        ((1,), False),  # the initial scan
        ((2,), False),
        ((2,), True),  # the deletion
    }


def test_message_options_put_the_key_in_the_value_only_where_a_sink_has_no_key() -> None:
    now = Timestamp(1, 0)
    wrapped = parse_options((), now=now)
    assert message_options(wrapped, "file:///tmp/x").key_in_value
    assert message_options(wrapped, "webhook-https://127.0.0.1:1/hook").key_in_value
    assert not message_options(wrapped, "kafka://127.0.0.1:9092").key_in_value
    assert not message_options(wrapped, None).key_in_value  # sinkless: the key is a column
    bare = parse_options((("envelope", "bare"),), now=now)
    assert message_options(bare, "file:///tmp/x").key_in_value  # under __crdb__, as CockroachDB
    row = parse_options((("envelope", "row"), ("format", "csv"), ("initial_scan", "only")), now=now)
    assert not message_options(row, "file:///tmp/x").key_in_value


def test_message_options_name_the_topic_in_a_webhook_value_and_leave_queries_alone() -> None:
    """CockroachDB turns on ``topic_in_value`` for webhooks (their docs' messages carry
    ``"topic"``), and neither it nor ``key_in_value`` for a CDC query, whose projection
    is the whole message."""
    now = Timestamp(1, 0)
    wrapped = parse_options((), now=now)
    assert message_options(wrapped, "webhook-https://127.0.0.1:1/hook").topic_in_value
    assert not message_options(wrapped, "file:///tmp/x").topic_in_value
    assert not message_options(wrapped, "kafka://127.0.0.1:9092").topic_in_value
    bare = parse_options((("envelope", "bare"),), now=now)
    for uri in ("webhook-https://127.0.0.1:1/hook", "file:///tmp/x"):
        query = message_options(bare, uri, query=True)
        assert not (query.key_in_value or query.topic_in_value)


def test_file_names_sort_by_time_with_the_date_directory() -> None:
    early = Timestamp(1_700_000_000_000_000_000, 5)
    later = Timestamp(1_700_000_000_000_000_001, 0)
    assert name_ts(early) < name_ts(later)
    assert name_ts(early) == "20231114221320" + "000000000" + "0000000005"


def test_gzip_and_zstd_compression(table: DB, tmp_path: Path) -> None:
    db = table
    for codec, suffix in (("gzip", ".ndjson.gz"), ("zstd", ".ndjson.zst")):
        out = tmp_path / codec
        db.sql(f"CREATE CHANGEFEED FOR t INTO 'file://{out}' WITH compression={codec}, {FAST}")
        wait_until(
            lambda out=out, suffix=suffix: [p for p in files(out) if p.name.endswith(suffix)]
        )
        data = [p for p in files(out) if p.name.endswith(suffix)]
        assert sorted(r["after"]["k"] for p in data for r in lines(p)) == [1, 2]


def test_csv_export_with_initial_scan_only(table: DB, tmp_path: Path) -> None:
    db = table
    out = tmp_path / "csv"
    (job_id,) = db.sql(
        f"CREATE CHANGEFEED FOR t INTO 'file://{out}?partition_format=flat' "
        "WITH format=csv, initial_scan='only'"
    ).rows[0]
    assert db.changefeeds.wait(job_id, timeout=30)
    (path,) = files(out)
    assert path.parent == out and path.name.endswith("-t-1.csv")
    assert path.read_text() == "1,a\n2,b\n"


def test_parquet_files_have_typed_columns_and_event_types(db: DB, tmp_path: Path) -> None:
    db.sql("CREATE TABLE p (k INT PRIMARY KEY, n FLOAT, s STRING)")
    db.sql("INSERT INTO p VALUES (1, 1.5, 'a')")
    out = tmp_path / "parquet"
    db.sql(f"CREATE CHANGEFEED FOR p INTO 'file://{out}' WITH format=parquet, diff, {FAST}")
    wait_until(lambda: [p for p in files(out) if p.suffix == ".parquet"])
    db.sql("UPDATE p SET s = 'b' WHERE k = 1")
    db.sql("DELETE FROM p WHERE k = 1")
    wait_resolved_past(out, db.now())
    rows = [r for p in files(out) if p.suffix == ".parquet" for r in pq.read_table(p).to_pylist()]
    assert [(r["k"], r["n"], r["s"], r["__crdb__event_type"]) for r in rows] == [
        (1, 1.5, "a", "c"),
        (1, 1.5, "b", "u"),
        (1, None, None, "d"),
    ]
    assert pq.read_table(files(out)[0]).schema.field("n").type == "double"


def test_parquet_with_a_query_has_the_query_columns(db: DB, tmp_path: Path) -> None:
    db.sql("CREATE TABLE p (k INT PRIMARY KEY, n FLOAT, s STRING, hidden_away STRING)")
    db.sql("INSERT INTO p VALUES (1, 1.5, 'a', 'x'), (2, 2.5, 'b', 'y')")
    out = tmp_path / "parquet"
    db.sql(
        f"CREATE CHANGEFEED INTO 'file://{out}' WITH format=parquet, {FAST} "
        "AS SELECT k AS id, s, n * 2 AS doubled, s || '!' AS shout, event_op() AS op FROM p "
        "WHERE k < 2 OR event_op() = 'delete'"
    )
    wait_until(lambda: [p for p in files(out) if p.suffix == ".parquet"])
    db.sql("UPDATE p SET s = 'c' WHERE k = 1")
    db.sql("DELETE FROM p WHERE k = 1")
    wait_resolved_past(out, db.now())

    tables = [pq.read_table(p) for p in files(out) if p.suffix == ".parquet"]
    # CockroachDB's metadata columns: the event type alone without updated and
    # mvcc_timestamp (tests/changefeed/test_parquet_parity.py has the others)
    columns = ["id", "s", "doubled", "shout", "op", "__crdb__event_type"]
    assert {tuple(t.column_names) for t in tables} == {tuple(columns)}
    assert {str(t.schema.field("id").type) for t in tables} == {"int64"}
    assert {str(t.schema.field("doubled").type) for t in tables} - {"null"} == {"double"}
    rows = [r for t in tables for r in t.to_pylist()]
    assert [(*(r[c] for c in columns[:5]), r["__crdb__event_type"]) for r in rows] == [
        # event_op() without diff or cdc_prev: 'upsert' (CockroachDB's CDC queries docs)
        (1, "a", 3.0, "a!", "upsert", "c"),
        (1, "c", 3.0, "c!", "upsert", "u"),
        (1, None, None, None, None, "d"),  # a deletion keeps its key, under its alias
    ]


def test_a_column_retyped_by_a_schema_change_goes_to_files_of_its_own(
    db: DB, tmp_path: Path
) -> None:
    db.sql("CREATE TABLE r (k INT PRIMARY KEY, v INT)")
    since = db.now()
    db.sql("INSERT INTO r VALUES (1, 10)")
    db.sql("ALTER TABLE r DROP COLUMN v")
    db.sql("ALTER TABLE r ADD COLUMN v STRING")
    db.sql("INSERT INTO r VALUES (2, 'two')")
    out = tmp_path / "retyped"
    # From a cursor before the changes, one catch-up delivers rows of every version.
    db.sql(
        f"CREATE CHANGEFEED FOR r INTO 'file://{out}' WITH format=parquet, cursor='{since}', {FAST}"
    )
    wait_resolved_past(out, db.now())

    by_version: dict[str, set[str]] = {}
    rows = []
    for path in files(out):
        if path.suffix == ".parquet":
            read = pq.read_table(path)
            version = path.stem.rsplit("-", 1)[1]
            if "v" in read.column_names:  # not while the column was dropped
                by_version.setdefault(version, set()).add(str(read.schema.field("v").type))
            rows += [(r["k"], r.get("v")) for r in read.to_pylist()]
    assert (1, 10) in rows and (2, "two") in rows
    assert len(by_version) >= 2
    assert all(len(types - {"null"}) <= 1 for types in by_version.values())


def test_a_file_written_after_a_resolved_marker_sorts_after_it(tmp_path: Path) -> None:
    # CockroachDB's contract: read in name order, a .RESOLVED marker means everything
    # before it is final, so a reader may forget all it passed; a file named after the
    # marker's own timestamp ("T-..." < "T.RESOLVED") would be skipped
    blobs = LocalBlobs(str(tmp_path))
    client = CloudStorageClient(
        blobs, parse_options((), now=Timestamp(1, 0)), start=Timestamp(1, 0)
    )
    client.send("t", [Message("t", b"[1]", b"{}", Timestamp(1, 0), Timestamp(1, 0), 1)])
    marker = Timestamp(5, 0)
    client.send_resolved(marker, ["t"])
    read = [p.name for p in files(tmp_path)]
    client.send("t", [Message("t", b"[2]", b"{}", Timestamp(6, 0), Timestamp(6, 0), 1)])
    (new,) = [p.name for p in files(tmp_path) if p.name not in read]
    assert read[-1] == f"{name_ts(marker)}.RESOLVED"
    assert new > read[-1]
    assert new.startswith(name_ts(marker.next()))


# CockroachDB's data file name as its docs give it, [timestamp]-[uniquer]-[topic]-[schema
# id], the uniquer being session-node-sink-file: how tools that read its files parse it
COCKROACH_NAME = re.compile(
    r"(?P<ts>\d{33})-(?P<session>[0-9a-g]*)-(?P<node>\d*)-(?P<sink>\d*)-(?P<file>[0-9a-f]{8})"
    r"-(?P<topic>.*)-(?P<schema>[0-9a-f]*)\.ndjson$"
)


def test_file_names_have_cockroachdbs_fields_in_its_order(tmp_path: Path) -> None:
    options = parse_options((), now=Timestamp(1, 0))
    sinks = [
        CloudStorageClient(
            LocalBlobs(str(tmp_path / name)), options, start=Timestamp(1, 0), node_id=3
        )
        for name in ("a", "b")
    ]
    for sink in sinks:
        sink.send("t", [Message("t", b"[1]", b"{}", Timestamp(1, 0), Timestamp(1, 0), 10)])
        sink.send("t", [Message("t", b"[2]", b"{}", Timestamp(1, 1), Timestamp(1, 1), 11)])
    first, second = (sorted(p.name for p in files(tmp_path / name)) for name in ("a", "b"))
    fields = [COCKROACH_NAME.match(name) for name in first]
    assert all(fields), first
    assert [(f["node"], f["file"], f["topic"], f["schema"]) for f in fields if f] == [
        ("3", "00000000", "t", "a"),
        ("3", "00000001", "t", "b"),
    ]
    assert [file_topic(name) for name in first] == ["t", "t"]
    sink_ids = {m["sink"] for name in first + second if (m := COCKROACH_NAME.match(name))}
    assert len(sink_ids) == 2  # each sink of a process names itself apart


def test_the_file_name_pattern_reads_cockroachdbs_documented_example() -> None:
    example = "202004022058072107140000000000000-56087568dba1e6b8-1-72-00000000-test_table-1.ndjson"
    fields = FILE_NAME.match(example)
    assert fields is not None
    assert (fields["node_id"], fields["sink_id"], fields["topic"]) == ("1", "72", "test_table")
    with pytest.raises(ValueError, match="not the name of a changefeed data file"):
        file_topic("2020-04-02/202004022058072107140000000000000.RESOLVED")


def test_a_file_holds_one_schema_version(tmp_path: Path) -> None:
    blobs = LocalBlobs(str(tmp_path))
    client = CloudStorageClient(
        blobs, parse_options((), now=Timestamp(1, 0)), start=Timestamp(1, 0)
    )
    batch = [
        Message("t", b"[%d]" % i, b"{}", Timestamp(1, i), Timestamp(1, i), v)
        for i, v in enumerate([1, 1, 2, 1])
    ]
    client.send("t", batch)
    names = sorted(p.name for p in files(tmp_path))
    assert [m["schema_id"] for m in map(FILE_NAME.match, names) if m] == ["1", "2", "1"]
    assert [len(p.read_bytes().splitlines()) for p in sorted(files(tmp_path))] == [2, 1, 1]


def test_bad_file_sink_parameters_are_refused(table: DB, tmp_path: Path) -> None:
    from feedkv.errors import SQLError

    for uri, message in (
        (f"file://{tmp_path}/x?partition_format=weekly", "partition_format"),
        ("file://host/x", "local path"),
        ("file://", "needs a directory"),
        (f"file://{tmp_path}/x?file_size=huge", "not a size"),
    ):
        with pytest.raises(SQLError, match=message) as raised:
            table.sql(f"CREATE CHANGEFEED FOR t INTO '{uri}'")
        assert raised.value.code == "22023"


# The sink contract.


@pytest.fixture(
    params=[
        ("", ()),
        ("?partition_format=flat&file_size=256", ()),
        ("?partition_format=hourly", (("compression", "gzip"),)),
        ("", (("compression", "zstd"),)),
    ],
    ids=["daily", "flat-small-files", "hourly-gzip", "zstd"],
)
def file_setup(request: pytest.FixtureRequest, tmp_path: Path) -> SinkSetup:
    """A file sink into a directory, read back in file-name order; its failing twin
    writes where a file replaced its directory, until the directory is back."""
    query, given = request.param
    options = parse_options(given, now=START)

    def sink_into(out: Path) -> Sink:
        uri = f"file://{out}{query}"
        return make_sink(parse_sink_uri(uri, options), message_options(options, uri), start=START)

    out = tmp_path / "out"

    def reader() -> dict[str, list[bytes]]:
        names = published_files(out) if out.exists() else []
        return {"": [line for name in names for line in raw_lines(out / name)]}

    down = tmp_path / "down"

    def failing() -> Sink:
        sink = sink_into(down)
        down.rmdir()
        down.write_text("a file where the directory was: every write fails")
        return sink

    def recover() -> None:
        down.unlink()
        down.mkdir()

    return SinkSetup(lambda: sink_into(out), reader, failing=failing, recover=recover)


def test_the_file_sink_keeps_the_sink_contract(file_setup: SinkSetup) -> None:
    file_setup.check()
