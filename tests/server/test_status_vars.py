"""A node's HTTP port serves its metrics at ``/_status/vars`` (and ``/metrics``):
CockroachDB's names and types, and values that move with what the node does. Scraped
with httpx, parsed with prometheus_client's parser."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

import feedkv
from feedkv import DB
from feedkv.cli.main import _parser
from feedkv.errors import SQLError
from feedkv.kv.range_descriptor import RangeDescriptor
from feedkv.kv.store import StoreConfig
from feedkv.server.node import Node
from feedkv.testing.node_process import NodeProcess
from feedkv.testing.waiting import wait_until

DEADLINE = 30.0
CONFIG = StoreConfig(
    closed_ts_interval_s=0.01, closed_ts_target_ns=50_000_000, push_poll_s=0.01, sync=False
)

# name -> type as prometheus_client's parser reads it (a counter keeps CockroachDB's
# name, without _total; see feedkv.util.metrics)
EXPECTED = {
    "changefeed_running": "gauge",
    "changefeed_failures": "counter",
    "changefeed_emitted_messages": "counter",
    "changefeed_emitted_bytes": "counter",
    "changefeed_flushed_bytes": "counter",
    "changefeed_error_retries": "counter",
    "changefeed_commit_latency": "histogram",
    "changefeed_admit_latency": "histogram",
    "changefeed_sink_batch_hist_nanos": "histogram",
    "changefeed_checkpoint_progress": "gauge",
    "changefeed_max_behind_nanos": "gauge",
    "changefeed_backfill_count": "gauge",
    "changefeed_backfill_pending_ranges": "gauge",
    "changefeed_lagging_ranges": "gauge",
    "changefeed_gc_threshold_distance_nanos": "gauge",
    "jobs_changefeed_protected_age_sec": "gauge",
    "jobs_changefeed_currently_paused": "gauge",
    "kv_rangefeed_registrations": "gauge",
    "kv_rangefeed_processors": "gauge",
    "kv_rangefeed_catchup_scan_nanos": "counter",
    "sql_select_count": "counter",
    "sql_insert_count": "counter",
    "sql_update_count": "counter",
    "sql_delete_count": "counter",
    "sql_ddl_count": "counter",
    "sql_misc_count": "counter",
    "sql_query_count": "counter",
    "sql_failure_count": "counter",
    "sql_txn_begin_count": "counter",
    "sql_txn_commit_count": "counter",
    "sql_txn_rollback_count": "counter",
    "sql_conns": "gauge",
    "sql_service_latency": "histogram",
    "txn_commits": "counter",
    "txn_aborts": "counter",
    "txn_restarts": "histogram",
    "liveness_livenodes": "gauge",
    "replicas": "gauge",
    "replicas_leaseholders": "gauge",
    "ranges": "gauge",
    "ranges_unavailable": "gauge",
    "ranges_underreplicated": "gauge",
    "sys_uptime": "counter",
    "sys_cpu_user_ns": "gauge",
    "sys_cpu_sys_ns": "gauge",
    "sys_thread_cpu_ns": "gauge",
    "capacity": "gauge",
    "capacity_available": "gauge",
    "capacity_used": "gauge",
    "storage_lmdb_map_used_bytes": "gauge",
    "storage_lmdb_map_size_bytes": "gauge",
    "storage_wal_fsync_latency": "histogram",
    "kv_rangefeed_mem_shared": "gauge",
    "changefeed_stalled": "gauge",
    "changefeed_buffer_memory_bytes": "gauge",
    "changefeed_buffer_disk_bytes": "gauge",
    "changefeed_buffer_entries_in": "counter",
    "changefeed_buffer_entries_out": "counter",
    "changefeed_buffer_entries_released": "counter",
    "changefeed_buffer_entries_mem_acquired": "counter",
    "changefeed_buffer_entries_mem_released": "counter",
    "changefeed_spark_batch_nanos": "histogram",
}


def open_node(path: Path) -> DB:
    return feedkv.connect(path, config=CONFIG, changefeed_runner="thread", http_addr="127.0.0.1:0")


@pytest.fixture
def db(tmp_path: Path) -> Iterator[DB]:
    database = open_node(tmp_path / "store")
    yield database
    database.close()


def url(db: DB) -> str:
    assert db.node is not None
    return db.node.http_url


def scrape(db: DB, path: str = "/_status/vars") -> dict[str, tuple[str, dict[str, float]]]:
    """Each family's type and samples (``name`` or ``name{k=v,...}`` -> value)."""
    response = httpx.get(url(db) + path, timeout=10)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    out = {}
    for family in text_string_to_metric_families(response.text):
        samples = {}
        for s in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
            # NB: the parser names a counter's samples x_total, whatever the text says
            name = family.name if family.type == "counter" else s.name
            samples[f"{name}{{{labels}}}" if labels else name] = s.value
        out[family.name] = (family.type, samples)
    return out


def value(db: DB, sample: str) -> float:
    """One sample's value (``name`` or ``name{k=v,...}``); 0 if absent."""
    family = sample.split("{", 1)[0]
    for suffix in ("_count", "_sum"):
        if family not in EXPECTED and family.endswith(suffix):
            family = family.removesuffix(suffix)
    return scrape(db).get(family, ("", {}))[1].get(sample, 0.0)


def test_status_vars_has_cockroachdbs_names_and_types(db: DB) -> None:
    found = scrape(db)
    assert {name: found[name][0] for name in EXPECTED if name in found} == EXPECTED
    assert set(scrape(db, "/metrics")) == set(found)
    assert found["liveness_livenodes"][1] == {"liveness_livenodes": 1.0}
    # a node of its own holds each of its ranges alone
    held = len(db.ranges())
    assert held > 0
    # a store's metrics carry its id, as CockroachDB's (store="1")
    for name in ("replicas", "replicas_leaseholders", "ranges"):
        assert found[name][1] == {f"{name}{{store=1}}": float(held)}
    for name in ("ranges_unavailable", "ranges_underreplicated"):
        assert found[name][1] == {f"{name}{{store=1}}": 0.0}
    assert db.node is not None
    disk = os.statvfs(db.node.store.engine.path)
    capacity = found["capacity"][1]["capacity{store=1}"]
    assert capacity == disk.f_blocks * disk.f_frsize
    assert 0 < found["capacity_available"][1]["capacity_available{store=1}"] <= capacity
    assert found["capacity_used"][1]["capacity_used{store=1}"] > 0
    assert found["sys_uptime"][1]["sys_uptime"] > 0
    assert found["sys_cpu_user_ns"][1]["sys_cpu_user_ns"] > 0
    threads = found["sys_thread_cpu_ns"][1]
    assert "sys_thread_cpu_ns{thread=feedkv-commit}" in threads
    assert threads["sys_thread_cpu_ns{thread=MainThread}"] > 0
    used = found["storage_lmdb_map_used_bytes"][1]["storage_lmdb_map_used_bytes"]
    assert 0 < used <= found["storage_lmdb_map_size_bytes"][1]["storage_lmdb_map_size_bytes"]
    missing = httpx.get(url(db) + "/nothing", timeout=10)
    assert missing.status_code == 404
    assert "/_status/vars" in missing.text


def test_sql_statements_and_transactions_are_counted(db: DB) -> None:
    db.sql("CREATE TABLE t (id INT PRIMARY KEY, s STRING)")
    names = [
        "sql_insert_count",
        "sql_select_count",
        "sql_update_count",
        "sql_delete_count",
        "sql_failure_count",
        "sql_query_count",
        "sql_service_latency_count",
        "txn_commits",
        "txn_restarts_count",
    ]
    before = {name: value(db, name) for name in names}
    db.sql("INSERT INTO t VALUES (1, 'a')")
    db.sql("INSERT INTO t VALUES (2, 'b')")
    db.sql("SELECT * FROM t")
    db.sql("UPDATE t SET s = 'c' WHERE id = 1")
    db.sql("DELETE FROM t WHERE id = 2")
    with pytest.raises(SQLError):
        db.sql("INSERT INTO t VALUES (1, 'again')")  # a duplicate key
    moved = {name: value(db, name) - before[name] for name in names}
    # NB: as CockroachDB's, statements successfully executed: the duplicate is a failure
    assert moved["sql_insert_count"] == 2
    assert moved["sql_select_count"] == 1
    assert moved["sql_update_count"] == 1
    assert moved["sql_delete_count"] == 1
    assert moved["sql_failure_count"] == 1
    assert moved["sql_query_count"] == 6
    assert moved["sql_service_latency_count"] == 6
    assert moved["txn_commits"] >= 5  # each statement's own (the node's jobs add theirs)
    assert moved["txn_restarts_count"] >= 5


def test_statements_sent_together_are_each_counted_and_timed_once_together(db: DB) -> None:
    db.sql("CREATE TABLE t (id INT PRIMARY KEY, s STRING)")
    names = ["sql_insert_count", "sql_update_count", "sql_query_count", "sql_service_latency_count"]
    before = {name: value(db, name) for name in names}
    db.sql("INSERT INTO t VALUES (1, 'a'); INSERT INTO t VALUES (2, 'b'); UPDATE t SET s = 'c'")
    moved = {name: value(db, name) - before[name] for name in names}
    assert moved == {
        "sql_insert_count": 2,
        "sql_update_count": 1,
        "sql_query_count": 3,
        "sql_service_latency_count": 1,  # one implicit transaction: one observation
    }


def test_sql_conns_counts_open_connections(db: DB) -> None:
    import psycopg

    assert value(db, "sql_conns") == 0
    with psycopg.connect(db.serve_sql(), autocommit=True) as conn:
        conn.execute("SELECT 1")
        assert value(db, "sql_conns") == 1
    wait_until(lambda: value(db, "sql_conns") == 0, timeout_s=DEADLINE, what="conn closed")


def test_changefeed_metrics_move_while_a_job_runs_and_pauses(db: DB, tmp_path: Path) -> None:
    db.sql("CREATE TABLE orders (id INT PRIMARY KEY, s STRING)")
    db.sql("INSERT INTO orders VALUES (1, 'scanned'), (2, 'scanned')")
    out = tmp_path / "out"
    (job_id,) = db.sql(
        f"CREATE CHANGEFEED FOR orders INTO 'file://{out}' WITH "
        "min_checkpoint_frequency='100ms', metrics_label='orders'"
    ).rows[0]
    for i in range(3, 13):
        db.sql(f"INSERT INTO orders VALUES ({i}, 'live')")

    def emitted() -> bool:
        return value(db, "changefeed_emitted_messages{scope=orders}") >= 12

    wait_until(emitted, timeout_s=DEADLINE, what="12 messages counted")
    found = {name: samples for name, (_, samples) in scrape(db).items() if name in EXPECTED}
    orders = "{scope=orders}"
    assert found["changefeed_running"]["changefeed_running" + orders] == 1
    assert found["changefeed_running"]["changefeed_running{scope=default}"] == 0
    assert found["changefeed_emitted_bytes"]["changefeed_emitted_bytes" + orders] > 0
    # the default scope reads 0 (its feeds emitted nothing), present from the start
    assert found["changefeed_emitted_messages"]["changefeed_emitted_messages{scope=default}"] == 0
    assert found["changefeed_checkpoint_progress"]["changefeed_checkpoint_progress" + orders] > 0
    assert found["kv_rangefeed_registrations"]["kv_rangefeed_registrations"] >= 1
    assert found["kv_rangefeed_processors"]["kv_rangefeed_processors"] >= 1
    assert found["kv_rangefeed_catchup_scan_nanos"]["kv_rangefeed_catchup_scan_nanos"] > 0
    wait_until(
        lambda: (
            value(db, "changefeed_commit_latency_count" + orders) > 0
            and value(db, "changefeed_flushed_bytes" + orders) > 0
            and value(db, "changefeed_sink_batch_hist_nanos_count" + orders) > 0
        ),
        timeout_s=DEADLINE,
        what="a flush observed",
    )
    assert value(db, "changefeed_admit_latency_count" + orders) > 0

    db.sql(f"PAUSE JOB {job_id}")
    wait_until(
        lambda: (
            value(db, "jobs_changefeed_currently_paused") == 1
            and value(db, "changefeed_running" + orders) == 0
        ),
        timeout_s=DEADLINE,
        what="the job paused in the metrics",
    )
    assert value(db, "changefeed_failures" + orders) == 0


def test_two_nodes_in_one_process_keep_their_own_metrics(tmp_path: Path) -> None:
    one, two = open_node(tmp_path / "one"), open_node(tmp_path / "two")
    try:
        one.sql("CREATE TABLE t (id INT PRIMARY KEY)")
        before = value(two, "sql_insert_count")
        one.sql("INSERT INTO t VALUES (1), (2)")
        assert value(one, "sql_insert_count") == 1
        assert value(two, "sql_insert_count") == before == 0
        assert url(one) != url(two)
    finally:
        one.close()
        two.close()


def test_http_addr_defaults_to_cockroachdbs_port() -> None:
    assert _parser().parse_args(["start", "--store", "s"]).http_addr == "127.0.0.1:8080"


def test_feedkv_start_serves_its_metrics_on_http_addr(tmp_path: Path) -> None:
    node = NodeProcess(tmp_path / "store", "--changefeed-runner", "thread")
    try:
        assert node.http_url.startswith("https://127.0.0.1:")  # secure by default
        families = {
            family.name: family
            for family in text_string_to_metric_families(
                httpx.get(node.http_url + "/_status/vars", verify=node.http_verify, timeout=10).text
            )
        }
        assert set(EXPECTED) <= set(families)
        (live,) = families["liveness_livenodes"].samples
        assert live.value == 1
    finally:
        assert node.terminate() == 0


def test_a_scrape_walks_the_stores_ranges_once_for_its_five_range_metrics(
    tmp_path: Path,
) -> None:
    """``replicas``, ``replicas_leaseholders``, ``ranges``, ``ranges_unavailable`` and
    ``ranges_underreplicated`` of a cluster's node come from one walk of its store's
    descriptors a scrape, not one each (the walks counted on the scraping thread: the
    node's own loops walk them too)."""
    with Node(tmp_path / "n1", listen="127.0.0.1:0", join=[], config=CONFIG) as node:
        assert node.cluster is not None
        scraper = threading.get_ident()
        walks = [0]
        descriptors = node.store.descriptors

        def counted() -> list[RangeDescriptor]:
            walks[0] += threading.get_ident() == scraper
            return descriptors()

        node.store.descriptors = counted  # type: ignore[method-assign]
        for scrapes in (1, 2):
            text = node.metrics.registry.exposition().decode()
            assert walks[0] == scrapes
        families = {f.name: f for f in text_string_to_metric_families(text)}
        ranges = len(descriptors())
        assert families["replicas"].samples[0].value == ranges
        assert families["replicas_leaseholders"].samples[0].value == ranges
        assert families["ranges"].samples[0].value == ranges
        assert families["ranges_unavailable"].samples[0].value == 0
