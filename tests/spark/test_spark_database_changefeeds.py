"""``CREATE CHANGEFEED FOR DATABASE`` and the Kafka ``schema_topic`` on the Spark runner
(the default one): every table of the database, a topic each, tables created after the
job started joining at their creation (announced on the schema topic before their
rows), dropped ones leaving without ending the job; schema changes on the schema topic
between the rows around them; exactly-once into files through PAUSE and RESUME while
the database's tables change. Messages are read back by consumers of their own."""

from __future__ import annotations

import json
import random
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest
from confluent_kafka.admin import AdminClient

import feedkv
from feedkv import DB
from feedkv.changefeed.sinks.cloud_storage import file_topic
from feedkv.sql import catalog
from feedkv.sql.descriptor import TableDescriptor, decode_descriptor
from feedkv.sql.row_codec import decode_row_key, table_span
from feedkv.testing.kafka_mock import MockKafka, read_topic
from feedkv.testing.node_process import NodeProcess
from feedkv.testing.sql_workload import BackgroundWriter
from feedkv.testing.waiting import wait_until
from feedkv.util.hlc import Timestamp

DEADLINE_S = 240.0  # Spark starts slowly on a loaded machine
FAST = "resolved = '0s', min_checkpoint_frequency = '0s'"

Version = tuple[str, tuple[Any, ...], Timestamp]  # (topic, primary key, updated)


@pytest.fixture
def kafka() -> Any:
    cluster = MockKafka()
    yield cluster
    cluster.close()


def now(db: DB) -> Timestamp:
    return Timestamp.parse(str(db.sql("SELECT cluster_logical_timestamp()").rows[0][0]))


def show_job(db: DB, job: int | str) -> dict[str, Any]:
    result = db.sql(f"SHOW CHANGEFEED JOB {job}")
    [row] = result.rows
    return dict(zip(result.columns, row, strict=True))


def wait_for_high_water(db: DB, job: int | str, above: Timestamp) -> None:
    """Wait until the job's high-water mark is past ``above``; a job that ended or
    paused on an error fails the test."""

    def reached() -> bool:
        found = show_job(db, job)
        assert found["status"] == "running", f"the job is {found['status']}: {found['error']}"
        mark: Decimal | None = found["high_water_timestamp"]
        return mark is not None and Timestamp.parse(format(mark, "f")) >= above

    wait_until(reached, timeout_s=DEADLINE_S, poll_s=0.1, what=f"high water >= {above}")


# Kafka.

Record = tuple[Any, Any, Timestamp]  # key, value (JSON), MVCC time


def records(bootstrap: str, topic: str) -> list[Record]:
    """The messages of ``topic`` now but resolved markers, oldest first."""
    try:
        found = read_topic(bootstrap, topic, 30.0)
    except TimeoutError:
        return []  # not made yet
    out = []
    for partition in found.values():
        for record in partition:
            if record.key is None:
                continue  # a resolved marker
            mvcc = dict(record.headers)["mvcc_timestamp"]
            assert mvcc is not None
            value = None if record.value is None else json.loads(record.value)
            out.append((json.loads(record.key), value, Timestamp.parse(mvcc.decode())))
    return sorted(out, key=lambda r: r[2])


def topics(bootstrap: str) -> set[str]:
    """The topics of the cluster (asked without naming one, which would make it)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    return set(admin.list_topics(timeout=30).topics)


def keys(found: list[Record]) -> set[Any]:
    return {key[0] for key, _value, _ts in found}


def wait_for_keys(bootstrap: str, topic: str, expected: set[Any]) -> list[Record]:
    def arrived() -> list[Record] | None:
        found = records(bootstrap, topic)
        return found if keys(found) >= expected else None

    found = wait_until(arrived, timeout_s=DEADLINE_S, poll_s=0.2, what=f"{expected} in {topic}")
    assert found is not None
    return found


def test_a_database_job_on_spark_follows_its_tables_and_announces_their_schemas(
    spark: Any, db: DB, kafka: MockKafka
) -> None:
    bootstrap = kafka.bootstrap
    db.sql("CREATE DATABASE shop")
    db.sql("CREATE TABLE shop.a (k INT PRIMARY KEY, v STRING)")
    db.sql("CREATE TABLE shop.b (k INT PRIMARY KEY, v STRING)")
    db.sql("CREATE TABLE c (k INT PRIMARY KEY, v STRING)")  # in defaultdb: not watched
    db.sql("INSERT INTO shop.a VALUES (1, 'a1')")
    db.sql("INSERT INTO shop.b VALUES (1, 'b1')")
    db.sql("INSERT INTO c VALUES (1, 'c1')")
    sink = f"kafka://{bootstrap}?topic_prefix=p_&schema_topic=schemas"
    with psycopg.connect(db.serve_sql(), autocommit=True) as conn:  # over the SQL port
        conn.execute(f"CREATE CHANGEFEED whole FOR DATABASE shop INTO '{sink}' WITH {FAST}")
    wait_for_keys(bootstrap, "p_a", {1})  # the initial scan: the job runs

    db.sql("CREATE TABLE shop.n (id INT PRIMARY KEY, note STRING)")
    db.sql("INSERT INTO shop.n VALUES (7, 'new')")
    db.sql("INSERT INTO c VALUES (2, 'c2')")
    db.sql("INSERT INTO shop.b VALUES (2, 'b2')")
    db.sql("DROP TABLE shop.b")
    db.sql("INSERT INTO shop.a VALUES (2, 'a2')")  # the job goes on after the drop
    db.sql("ALTER TABLE shop.a ADD COLUMN w INT")
    db.sql("INSERT INTO shop.a VALUES (3, 'a3', 9)")

    # In the order of delivery: once a row after a change is readable, so is the
    # change; once the change is, so is every row before it.
    n = wait_for_keys(bootstrap, "p_n", {7})
    assert "n" in keys(records(bootstrap, "schemas"))
    a = wait_for_keys(bootstrap, "p_a", {1, 2, 3})
    assert "a" in keys(records(bootstrap, "schemas"))
    schemas = wait_for_keys(bootstrap, "schemas", {"n", "b", "a"})
    b = records(bootstrap, "p_b")
    assert keys(b) == {1, 2}
    wait_for_high_water(db, "whole", now(db))
    assert topics(bootstrap) >= {"p_a", "p_b", "p_n", "schemas"}
    assert "p_c" not in topics(bootstrap)  # nothing of another database's table

    by_table = {key[0]: (value, ts) for key, value, ts in schemas}
    created, created_ts = by_table["n"]
    assert created == {
        "table": "n",
        "version": created["version"],
        "columns": [{"name": "id", "type": "INT8"}, {"name": "note", "type": "STRING"}],
        "added_columns": ["id", "note"],
        "dropped_columns": [],
        "created": True,
        "dropped": False,
        "updated": str(created_ts),
    }
    assert created_ts < min(ts for _k, _v, ts in n)  # announced before its rows
    dropped, dropped_ts = by_table["b"]
    assert dropped["dropped"] is True and dropped["created"] is False
    assert max(ts for _k, _v, ts in b) < dropped_ts
    added, added_ts = by_table["a"]
    assert added["added_columns"] == ["w"] and added["created"] is False
    first_seen = {key[0]: ts for key, _v, ts in reversed(a)}
    assert first_seen[2] < added_ts < first_seen[3]
    assert [value for key, value, _ts in a if key == [3]][-1] == {
        "after": {"k": 3, "v": "a3", "w": 9}
    }
    assert show_job(db, "whole")["status"] == "running"


# Files.


def published(out: Path) -> Counter[Version]:
    """Every row version in the sink's published files, counted."""
    versions: Counter[Version] = Counter()
    for path in out.rglob("*.ndjson"):
        if path.name.startswith("."):
            continue  # a file being written
        topic = file_topic(path.name)
        for line in path.read_text().splitlines():
            message = json.loads(line)
            versions[(topic, tuple(message["key"]), Timestamp.parse(message["updated"]))] += 1
    return versions


def committed(db: DB, table: str, lo: Timestamp, hi: Timestamp) -> set[Version]:
    """Every committed version of ``shop.table``'s rows in ``(lo, hi]``, from the store."""
    snapshot = catalog.Snapshot(db, hi)
    desc = catalog.table_by_name(snapshot, catalog.database_by_name(snapshot, "shop"), table)
    return {
        (table, decode_row_key(desc, version.key)[0], version.ts)
        for version in db.export(table_span(desc.id), lo, hi)
    }


def test_a_database_job_on_spark_writes_every_version_of_its_tables_once(
    spark: Any, db: DB, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    db.sql("CREATE DATABASE shop")
    db.sql("CREATE TABLE shop.a (k INT PRIMARY KEY, v STRING)")
    db.sql("CREATE TABLE shop.b (k INT PRIMARY KEY, v STRING)")
    db.sql("CREATE TABLE c (k INT PRIMARY KEY)")
    db.sql("INSERT INTO shop.a VALUES (1, 'a1')")
    start = now(db)
    db.sql(
        f"CREATE CHANGEFEED whole FOR DATABASE shop INTO 'file://{out}' "
        f"WITH updated, initial_scan = 'no', cursor = '{start}', {FAST}"
    )
    db.sql("INSERT INTO shop.b VALUES (1, 'b1')")
    db.sql("UPSERT INTO shop.a VALUES (1, 'a1 again')")
    db.sql("CREATE TABLE shop.n (k INT PRIMARY KEY, v STRING)")
    db.sql("INSERT INTO shop.n VALUES (1, 'n1'), (2, 'n2')")
    db.sql("INSERT INTO c VALUES (1)")
    wait_for_high_water(db, "whole", now(db))

    db.sql("PAUSE CHANGEFEED whole")
    db.sql("CREATE TABLE shop.later (k INT PRIMARY KEY, v STRING)")
    db.sql("INSERT INTO shop.later VALUES (1, 'while paused')")
    db.sql("UPDATE shop.b SET v = 'b1 again' WHERE k = 1")
    before_drop = now(db)
    db.sql("DROP TABLE shop.b")
    db.sql("DELETE FROM shop.n WHERE k = 2")
    db.sql("RESUME CHANGEFEED whole")
    db.sql("INSERT INTO shop.later VALUES (2, 'after')")
    db.sql("UPSERT INTO shop.a VALUES (2, 'a2')")
    end = now(db)
    wait_for_high_water(db, "whole", end)

    expected = set()
    for table in ("a", "n", "later"):
        expected |= committed(db, table, start, end)
    expected |= committed(db, "b", start, before_drop)  # b's rows until it was dropped
    assert len(expected) == 9
    seen = published(out)
    duplicated = sorted(v for v, count in seen.items() if count > 1)
    assert not duplicated
    assert set(seen) == expected  # a topic per table; nothing of defaultdb.c
    assert show_job(db, "whole")["status"] == "running"


def test_a_table_job_on_spark_sends_its_schema_changes_between_its_rows(
    spark: Any, db: DB, kafka: MockKafka
) -> None:
    bootstrap = kafka.bootstrap
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    db.sql("INSERT INTO t VALUES (1, 'a')")
    sink = f"kafka://{bootstrap}?topic_prefix=p_&schema_topic=schemas"
    [(job_id,)] = db.sql(f"CREATE CHANGEFEED FOR t INTO '{sink}' WITH {FAST}").rows
    wait_for_keys(bootstrap, "p_t", {1})
    db.sql("INSERT INTO t VALUES (2, 'b')")
    db.sql("ALTER TABLE t ADD COLUMN n INT")
    db.sql("INSERT INTO t VALUES (3, 'c', 7)")
    db.sql("ALTER TABLE t DROP COLUMN v")
    db.sql("INSERT INTO t VALUES (4, 8)")

    rows = wait_for_keys(bootstrap, "p_t", {1, 2, 3, 4})
    changes = records(bootstrap, "schemas")  # both came before row 4 was sent
    assert [value["added_columns"] for _key, value, _ts in changes] == [["n"], []]
    assert [value["dropped_columns"] for _key, value, _ts in changes] == [[], ["v"]]
    (_, added, added_ts), (_, dropped, dropped_ts) = changes
    assert added["columns"] == [
        {"name": "k", "type": "INT8"},
        {"name": "v", "type": "STRING"},
        {"name": "n", "type": "INT8"},
    ]
    assert dropped["version"] > added["version"]
    first_seen = {key[0]: ts for key, _value, ts in reversed(rows)}
    # NB: the DROP COLUMN's backfill sends rows again, later
    assert first_seen[2] < added_ts < first_seen[3] < dropped_ts < first_seen[4]

    db.sql("DROP TABLE t")  # ends the job, the drop sent first
    wait_until(
        lambda: show_job(db, job_id)["status"] == "failed",
        timeout_s=DEADLINE_S,
        what="the job to fail on the drop",
    )
    assert "dropped" in str(show_job(db, job_id)["error"])
    *_, (key, last, _ts) = records(bootstrap, "schemas")
    assert (key, last["dropped"]) == (["t"], True)


def test_a_database_job_on_spark_started_with_no_tables_takes_the_first_one_created(
    spark: Any, db: DB, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    db.sql("CREATE DATABASE empty")
    [(job_id,)] = db.sql(
        f"CREATE CHANGEFEED FOR DATABASE empty INTO 'file://{out}' WITH updated, {FAST}"
    ).rows
    wait_for_high_water(db, job_id, now(db))  # batches of no table go by
    db.sql("CREATE TABLE empty.first (k INT PRIMARY KEY)")
    db.sql("INSERT INTO empty.first VALUES (1), (2)")
    wait_for_high_water(db, job_id, now(db))

    assert sorted((topic, key) for topic, key, _ts in published(out)) == [
        ("first", (1,)),
        ("first", (2,)),
    ]


# SIGKILLs of the node that drives the job, while tables join and leave.

NODE_ARGS = ("--spark-master", "local[2]", "--closed-ts-target", "200ms")
KILLS = 2


class TableWriter(BackgroundWriter):
    """Writes rows into the tables of shop, creating a table now and then and dropping
    every other one; ``done`` counts the tables made. NB: a table about every 20 writes
    (and a drop every other one): a batch reads every table of its window, whatever
    joined or left in it."""

    pace_s = 0.05

    def __init__(self, url: str, phase: int, rng: random.Random) -> None:
        super().__init__(url, f"tables-{phase}")
        self._phase = phase
        self._rng = random.Random(rng.random())
        self._live = ["keep"]
        self._made = 0

    def step(self, db: DB) -> int:
        db.sql(
            f"UPSERT INTO shop.{self._rng.choice(self._live)} VALUES ($1, $2)",
            self._rng.randrange(20),
            self._made,
        )
        if self._rng.random() >= 0.05:
            return 0
        name = f"t{self._phase}_{self._made}"
        db.sql(f"CREATE TABLE shop.{name} (id INT PRIMARY KEY, v INT)")
        self._live.append(name)
        self._made += 1
        if self._made % 2 == 0:
            db.sql(f"DROP TABLE shop.{self._live.pop(-2)}")
        return 1


def database_versions(db: DB, start: Timestamp, end: Timestamp) -> set[Version]:
    """Every committed row version in ``(start, end]`` of every table database shop held
    then, each until its drop, read from the store (the tables from the descriptors'
    incremental export)."""
    snapshot = catalog.Snapshot(db, start)
    shop = catalog.database_by_name(snapshot, "shop")
    tables = {t.id: t for t in catalog.list_tables(snapshot, shop)}
    dropped: dict[int, Timestamp] = {}
    for version in db.export(catalog.descriptor_span(), start, end):
        desc = decode_descriptor(version.value) if version.value is not None else None
        if not isinstance(desc, TableDescriptor) or desc.database_id != shop.id:
            continue
        tables.setdefault(desc.id, desc)
        if desc.dropped:
            dropped[desc.id] = min(version.ts, dropped.get(desc.id, version.ts))
    assert dropped, "no table was dropped"
    versions = set()
    for table_id, desc in tables.items():
        hi = dropped[table_id].prev() if table_id in dropped else end
        for version in db.export(table_span(table_id), start, max(hi, start)):
            versions.add((desc.name, decode_row_key(desc, version.key)[0], version.ts))
    return versions


@pytest.mark.soak  # NB: 220 s; a regular test pauses and resumes while tables come and go
@pytest.mark.slow(220)
@pytest.mark.timeout(900)
def test_killing_the_driver_of_a_database_job_while_tables_change_loses_and_duplicates_nothing(
    tmp_path: Path, nodes: list[NodeProcess]
) -> None:
    store, out = tmp_path / "store", tmp_path / "out"
    rng = random.Random(20261128)
    nodes.append(NodeProcess(store, *NODE_ARGS))
    with feedkv.connect(nodes[-1].url) as client:
        client.sql("CREATE DATABASE shop")
        client.sql("CREATE TABLE shop.keep (id INT PRIMARY KEY, v INT)")
        client.sql("INSERT INTO shop.keep VALUES (1, 0)")
        [(job_id,)] = client.sql(
            f"CREATE CHANGEFEED FOR DATABASE shop INTO 'file://{out}' WITH updated, "
            "initial_scan = 'no', resolved = '200ms', min_checkpoint_frequency = '200ms'"
        ).rows
        record = client.changefeeds.record(job_id)
        assert record is not None
        start = record.spec.start
    orphans: list[int] = []
    for phase in range(KILLS):
        node = nodes[-1]
        with feedkv.connect(node.url) as client, TableWriter(node.url, phase, rng) as writer:
            # Kill once batches were committed since this start, a table or two later:
            # by then the next batches are in flight.
            wait_for_high_water(client, job_id, client.now())
            writer.wait_for(rng.randint(2, 6), "tables")
            orphans += node.kill_all()
        nodes.append(NodeProcess(store, *NODE_ARGS))

    with feedkv.connect(nodes[-1].url) as client:
        with TableWriter(nodes[-1].url, KILLS, rng) as writer:
            writer.wait_for(4, "tables")
        assert writer.failure is None
        end = client.now()
        wait_for_high_water(client, job_id, end)
        expected = database_versions(client, start, end)
        seen = published(out)
        duplicated = sorted(v for v, count in seen.items() if count > 1)
        missing = sorted(expected - seen.keys())
        extra = sorted(seen.keys() - expected)
        assert not (duplicated or missing or extra), (
            f"{len(expected)} versions expected, {sum(seen.values())} published: "
            f"duplicated {duplicated[:5]}, missing {missing[:5]}, unexpected {extra[:5]}"
        )
        client.sql(f"CANCEL JOB {job_id}")
    assert nodes[-1].terminate(timeout_s=120) == 0
    assert not orphans, f"processes outlived their killed node: {orphans}"
