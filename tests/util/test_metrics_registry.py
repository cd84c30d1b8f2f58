"""The metrics registry: CockroachDB's names (no ``_total``), sampled metrics read at
scrape time, registries that do not share metrics, and feedkv's own counters, gauges and
histograms exposed byte for byte as ``prometheus_client``'s own would be."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client import Counter as LibraryCounter
from prometheus_client import Gauge as LibraryGauge
from prometheus_client.parser import text_string_to_metric_families

from feedkv.util.metrics import NANOS_BUCKETS, Registry, Tally


def families(registry: Registry) -> dict[str, tuple[str, dict[str, float]]]:
    """Each family's type and its samples (``name{label=value,...}`` -> value; NB: the
    parser names a counter's samples ``x_total``, whatever the text says: they are
    listed under the family's name)."""
    out = {}
    for family in text_string_to_metric_families(registry.exposition().decode()):
        samples = {}
        for s in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
            name = family.name if family.type == "counter" else s.name
            samples[f"{name}{{{labels}}}" if labels else name] = s.value
        out[family.name] = (family.type, samples)
    return out


def test_a_counter_keeps_cockroachdbs_name_without_total_or_created() -> None:
    registry = Registry()
    counter = registry.counter("sql_select_count", "selects")
    counter.inc(3)
    kind, samples = families(registry)["sql_select_count"]
    assert samples == {"sql_select_count": 3.0}
    assert kind == "counter"
    # CockroachDB's text: typed counter, the samples under the name itself
    assert b"# TYPE sql_select_count counter\nsql_select_count 3.0\n" in registry.exposition()
    assert b"_total" not in registry.exposition()
    assert b"_created" not in registry.exposition()


def test_labelled_counters_and_histograms_are_exposed_per_label() -> None:
    registry = Registry()
    emitted = registry.counter("changefeed_emitted_messages", "messages", ("scope",))
    emitted.labels("default").inc(2)
    emitted.labels("orders").inc(5)
    latency = registry.histogram("changefeed_commit_latency", "latency", ("scope",))
    latency.labels("orders").observe(2_000_000)
    found = families(registry)
    assert found["changefeed_emitted_messages"][1] == {
        "changefeed_emitted_messages{scope=default}": 2.0,
        "changefeed_emitted_messages{scope=orders}": 5.0,
    }
    kind, samples = found["changefeed_commit_latency"]
    assert kind == "histogram"
    assert samples["changefeed_commit_latency_count{scope=orders}"] == 1.0
    assert samples["changefeed_commit_latency_bucket{le=2.5e+06,scope=orders}"] == 1.0
    assert samples["changefeed_commit_latency_bucket{le=1e+06,scope=orders}"] == 0.0
    assert not any("_created" in name for name in samples)


def test_a_sampled_metric_is_read_at_each_scrape() -> None:
    registry = Registry()
    value = [1.0]
    registry.sampled("liveness_livenodes", "live nodes", lambda: value[0])
    registry.sampled(
        "kv_rangefeed_catchup_scan_nanos", "scan time", lambda: value[0] * 10, kind="counter"
    )
    assert families(registry)["liveness_livenodes"] == ("gauge", {"liveness_livenodes": 1.0})
    value[0] = 3.0
    found = families(registry)
    assert found["liveness_livenodes"][1] == {"liveness_livenodes": 3.0}
    assert found["kv_rangefeed_catchup_scan_nanos"][1] == {"kv_rangefeed_catchup_scan_nanos": 30.0}


def test_a_sampled_metric_that_fails_leaves_the_others_in_the_scrape() -> None:
    registry = Registry()

    def broken() -> float:
        raise OSError("the store is closed")

    registry.sampled("capacity_used", "bytes", broken)
    registry.sampled("sql_conns", "conns", lambda: 2.0)
    found = families(registry)
    assert found["sql_conns"][1] == {"sql_conns": 2.0}
    assert found["capacity_used"][1] == {}


def test_labelled_samples_and_two_registries_apart() -> None:
    one, two = Registry(), Registry()
    one.sampled("changefeed_running", "running", lambda: {("a",): 1.0}, labelnames=("scope",))
    two.counter("changefeed_failures", "failures").inc()
    assert families(one)["changefeed_running"][1] == {"changefeed_running{scope=a}": 1.0}
    assert "changefeed_failures" not in families(one)
    assert "changefeed_running" not in families(two)


def test_a_tally_counts_each_kind_alone_or_with_an_observation() -> None:
    registry = Registry()
    tally = registry.tally(2)
    registry.sampled(
        "by_kind",
        "by kind",
        lambda: {("a",): tally.counts()[0], ("b",): tally.counts()[1]},
        labelnames=("kind",),
        kind="counter",
    )
    tally.add(1)
    tally.add(1)
    tally.add(0)
    assert families(registry)["by_kind"][1] == {"by_kind{kind=a}": 1.0, "by_kind{kind=b}": 2.0}
    latency = registry.lean_histogram("latency", "latency", buckets=(10.0, 100.0))
    latency.observe_tallied(5, tally, 0)
    latency.observe_tallied(50, tally, 1)
    assert tally.counts() == (2, 3)
    found = families(registry)["latency"][1]
    assert found["latency_count"] == 2.0  # a tally's add alone observes nothing
    assert found["latency_sum"] == 55.0
    assert found["latency_bucket{le=10.0}"] == 1.0


def test_a_tally_and_a_lean_histogram_of_many_threads_lose_nothing_however_often_read() -> None:
    """Both record without a lock; a count lost between a writer's append and a fold
    (by the writer past FOLD_EVERY, or by a read) would show here."""
    registry = Registry()
    latency = registry.lean_histogram("latency", "latency", buckets=(10.0,))
    tally = registry.tally(2)
    done = threading.Event()

    def observe() -> None:
        for i in range(20_000):
            if i % 2:
                latency.observe_tallied(1, tally, 1)
            else:
                tally.add(0)
                latency.observe(100)

    def scrape() -> None:
        while not done.is_set():
            tally.counts()
            registry.exposition()

    scraper = threading.Thread(target=scrape)
    scraper.start()
    threads = [threading.Thread(target=observe) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    done.set()
    scraper.join()
    assert tally.counts() == (40_000, 40_000)
    samples = families(registry)["latency"][1]
    assert samples["latency_count"] == 80_000.0
    assert samples["latency_bucket{le=10.0}"] == 40_000.0
    assert samples["latency_sum"] == 40_000.0 * 101


def test_a_registry_with_metrics_off_records_and_exposes_nothing() -> None:
    registry = Registry(enabled=False)
    counter = registry.counter("sql_select_count", "selects", ("scope",))
    counter.labels("orders").inc(3)
    registry.gauge("g", "a gauge").set(5)
    registry.gauge("g2", "a gauge").inc()
    registry.histogram("h", "a histogram").observe(1.0)
    registry.lean_histogram("l", "a lean histogram").observe(1.0)
    tally = registry.tally(1)
    tally.add(0)
    registry.lean_histogram("t", "a tallied histogram").observe_tallied(1.0, tally, 0)
    assert tally.counts() == (0,)
    registry.sampled("s", "sampled", lambda: 1.0)
    # NB: names may repeat: nothing is registered
    registry.counter("sql_select_count", "selects").inc()
    assert families(registry) == {}


def library_exposition(build: Callable[[CollectorRegistry], None]) -> bytes:
    """What ``prometheus_client``'s own metrics, made and moved by ``build``, expose, as
    CockroachDB names them: a counter without ``_total``, no ``_created``."""
    library = CollectorRegistry()
    build(library)
    text = generate_latest(library).decode()
    lines = [line for line in text.splitlines(keepends=True) if "_created" not in line]
    return "".join(lines).replace("_total{", "{").replace("_total ", " ").encode()


@settings(max_examples=100, deadline=None)  # NB: a loaded machine is slow, not wrong
@given(
    st.lists(
        st.one_of(
            st.floats(min_value=-1e12, max_value=1e12, allow_nan=False),
            st.sampled_from(NANOS_BUCKETS),  # on a bound: counted in its bucket (le)
        ),
        max_size=40,
    ),
    st.sampled_from(["lean", "single", "labelled"]),
)
def test_a_histogram_is_exposed_byte_for_byte_as_prometheus_clients_own(
    values: list[float], kind: str
) -> None:
    registry = Registry()
    if kind == "labelled":
        labelled = registry.histogram("changefeed_commit_latency", "latency", ("scope",))
        labelled.labels("default")  # a series with nothing observed yet
        histogram = labelled.labels("orders")
    else:
        histogram = registry.lean_histogram(
            "changefeed_commit_latency", "latency", single_writer=kind == "single"
        )
    for value in values:
        histogram.observe(value)

    def build(library: CollectorRegistry) -> None:
        if kind == "labelled":
            theirs = Histogram(
                "changefeed_commit_latency",
                "latency",
                ("scope",),
                registry=library,
                buckets=NANOS_BUCKETS,
            )
            theirs.labels("default")
            orders = theirs.labels("orders")
            for value in values:
                orders.observe(value)
        else:
            mine = Histogram(
                "changefeed_commit_latency", "latency", registry=library, buckets=NANOS_BUCKETS
            )
            for value in values:
                mine.observe(value)

    assert registry.exposition() == library_exposition(build)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=10**12), max_size=20))
def test_counters_and_gauges_are_exposed_byte_for_byte_as_prometheus_clients_own(
    amounts: list[int],
) -> None:
    registry = Registry()
    plain = registry.counter("txn_commits", "commits")
    scoped = registry.counter("changefeed_emitted_bytes", "bytes", ("scope",))
    paused = registry.gauge("jobs_changefeed_currently_paused", "paused")
    for amount in amounts:
        plain.inc(amount)
        scoped.labels("orders").inc(amount / 2)
        paused.set(amount)

    def build(library: CollectorRegistry) -> None:
        plain = LibraryCounter("txn_commits", "commits", registry=library)
        scoped = LibraryCounter("changefeed_emitted_bytes", "bytes", ("scope",), registry=library)
        paused = LibraryGauge("jobs_changefeed_currently_paused", "paused", registry=library)
        for amount in amounts:
            plain.inc(amount)
            scoped.labels("orders").inc(amount / 2)
            paused.set(amount)

    assert registry.exposition() == library_exposition(build)


def test_a_counter_counts_every_increment_of_many_threads() -> None:
    counter = Registry().counter("sql_query_count", "statements")
    threads = [
        threading.Thread(target=lambda: [counter.inc() for _ in range(20_000)]) for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert counter.value == 160_000


def test_a_metric_used_against_its_labels_says_so() -> None:
    registry = Registry()
    scoped = registry.counter("changefeed_failures", "failures", ("scope",))
    with pytest.raises(ValueError, match=r"has labels \('scope',\)"):
        scoped.inc()
    with pytest.raises(ValueError, match="expected values of"):
        scoped.labels("a", "b")
    with pytest.raises(ValueError, match="has no labels"):
        registry.counter("txn_commits", "commits").labels("x")
    with pytest.raises(ValueError, match="only grows"):
        registry.counter("txn_aborts", "aborts").inc(-1)
    with pytest.raises(ValueError, match="has labels"):
        registry.histogram("h", "h", ("scope",)).observe(1.0)
    lean = registry.histogram("lean", "lean", ("scope",))
    tally = Tally(1)
    with pytest.raises(ValueError, match=r"has labels \('scope',\)"):
        lean.observe(1.0)
    with pytest.raises(ValueError, match=r"has labels \('scope',\)"):
        lean.observe_tallied(1.0, tally, 0)
    assert tally.counts() == (0,)
    lean.labels("a").observe_tallied(2.0, tally, 0)
    assert tally.counts() == (1,)


def test_a_lean_histogram_scales_what_it_observes() -> None:
    registry = Registry()
    fsync = registry.lean_histogram("storage_wal_fsync_latency", "fsync", scale=1e9)
    fsync.observe(0.002)  # seconds, exposed in nanoseconds
    samples = families(registry)["storage_wal_fsync_latency"][1]
    assert samples["storage_wal_fsync_latency_sum"] == pytest.approx(2e6)
    assert samples["storage_wal_fsync_latency_bucket{le=1e+06}"] == 0.0
    assert samples["storage_wal_fsync_latency_bucket{le=2.5e+06}"] == 1.0


def test_lean_histogram_buckets_must_ascend() -> None:
    with pytest.raises(ValueError, match="ascending"):
        Registry().lean_histogram("h", "h", buckets=(2.0, 1.0))


def test_a_scrape_after_changes_reads_them_and_the_unchanged_families_alike() -> None:
    def build() -> tuple[Registry, Callable[[int], None]]:
        registry = Registry()
        counter = registry.counter("txn_commits", "commits")
        scoped = registry.counter("changefeed_emitted_messages", "messages", ("scope",))
        latency = registry.lean_histogram("sql_service_latency", "latency")
        idle = registry.lean_histogram("storage_wal_fsync_latency", "fsync")
        value = [0.0]
        registry.sampled("liveness_livenodes", "live nodes", lambda: value[0])

        def move(step: int) -> None:
            counter.inc(step)
            scoped.labels(f"s{step % 2}").inc()
            latency.observe(step * 1e6)
            value[0] = step
            if step == 0:
                idle.observe(5.0)

        return registry, move

    scraped, move = build()
    fresh: list[bytes] = []
    for step in range(4):
        move(step)
        again, replay = build()  # a registry that never exposed before
        for earlier in range(step + 1):
            replay(earlier)
        fresh.append(again.exposition())
        assert scraped.exposition() == fresh[-1]
    assert len(set(fresh)) == 4


def test_metrics_sharing_a_read_per_scrape_read_once_a_scrape_and_anew_at_the_next() -> None:
    registry = Registry()
    reads: list[int] = []
    totals = [1, 2]

    def read() -> list[int]:
        reads.append(1)
        return list(totals)

    shared = registry.per_scrape(read)
    registry.sampled("changefeed_buffer_entries_in", "in", lambda: shared()[0], kind="counter")
    registry.sampled("changefeed_buffer_entries_out", "out", lambda: shared()[1], kind="counter")
    first = families(registry)
    totals[:] = [3, 4]
    second = families(registry)
    assert len(reads) == 2  # one a scrape, for both metrics
    assert first["changefeed_buffer_entries_in"][1] == {"changefeed_buffer_entries_in": 1.0}
    assert second["changefeed_buffer_entries_out"][1] == {"changefeed_buffer_entries_out": 4.0}


def test_a_sampled_metric_whose_read_fails_is_exposed_without_samples_until_it_reads() -> None:
    registry = Registry()
    value: list[float] = []
    registry.sampled("liveness_livenodes", "live nodes", lambda: value[0])
    assert families(registry)["liveness_livenodes"] == ("gauge", {})
    value.append(3.0)
    assert families(registry)["liveness_livenodes"] == ("gauge", {"liveness_livenodes": 3.0})
