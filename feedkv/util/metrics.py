"""A node's metrics registry, exposed in Prometheus's text format.

Each node has its own :class:`Registry` (several embedded nodes share a test process, so
nothing goes to ``prometheus_client``'s global default registry). Each layer keeps its
metrics in a small struct built on the node's registry (CockroachDB's metric structs):
:class:`feedkv.changefeed.metrics.ChangefeedMetrics`,
:class:`feedkv.sql.metrics.SQLMetrics`, :class:`feedkv.kv.metrics.TxnMetrics`; a
component built without one makes its own private registry, so it works (and is tested)
standalone.

Names are CockroachDB's with dots as underscores (``changefeed.emitted_messages`` is
``changefeed_emitted_messages``), the names operators' dashboards and alerts already
use. NB: ``prometheus_client`` writes a counter ``x`` as ``x_total`` (OpenMetrics' rule),
and CockroachDB's names have no such suffix, so :meth:`Registry.exposition` writes
counters untyped under their own names, without the ``_created`` samples.

Two kinds of metric:

- pushed: a ``prometheus_client`` counter, gauge or histogram that the code moves (for
  a hot path, once per batch, not per row);
- sampled (:meth:`Registry.sampled`): a function read at scrape time, for what a
  component already knows (running feeds, live nodes, LMDB's map use): no cost
  between scrapes;
- lean histograms (:meth:`Registry.lean_histogram`), for a histogram observed on a
  hot path (each SQL statement, each group commit): the same exposition at a fraction
  of the cost of ``prometheus_client``'s observation (:class:`LeanHistogram`).

A registry made with ``enabled=False`` (a node started with its metrics off, which
``feedkv bench changefeed`` compares against one with them on) hands out metrics that
record nothing and exposes none: the structs built on it work unchanged, at the cost of
a call that returns at once.
"""

from __future__ import annotations

import logging
import threading
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Self, cast

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Metric
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

__all__ = [
    "CONTENT_TYPE",
    "NANOS_BUCKETS",
    "LeanHistogram",
    "Registry",
    "Sample",
    "SingleWriterHistogram",
]

log = logging.getLogger(__name__)

# NB: generate_latest writes text format 0.0.4 (names of the legacy character set), which
# every Prometheus reads; the library's "latest" content type names 1.0.0
CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4

# A bucket's bound as Prometheus (Go) writes it, as prometheus_client's histograms do
# (NB: the library leaves the function untyped)
_go_float = cast(Callable[[float], str], floatToGoString)

# Latencies in nanoseconds, as CockroachDB measures them: 100us to a minute.
NANOS_BUCKETS: tuple[float, ...] = (
    *(m * 10**e for e in range(5, 10) for m in (1, 2.5, 5)),
    1e10,
    3e10,
    6e10,
)

# What a sampled metric reads: a value, or a value for each tuple of label values.
Sample = float | Mapping[tuple[str, ...], float]


class _Sampled(Collector):
    def __init__(
        self,
        name: str,
        documentation: str,
        kind: str,
        read: Callable[[], Sample],
        labelnames: Sequence[str],
    ) -> None:
        self._name = name
        self._documentation = documentation
        self._kind = kind
        self._read = read
        self._labelnames = tuple(labelnames)

    def describe(self) -> Iterable[Metric]:
        # NB: the registry reads the names here when the metric is made, before the
        # component it samples may exist
        return [Metric(self._name, self._documentation, self._kind)]

    def collect(self) -> Iterable[Metric]:
        metric = Metric(self._name, self._documentation, self._kind)
        try:
            sample = self._read()
        except Exception:  # a scrape must not fail for one metric
            log.exception("metric %s could not be read", self._name)
            return [metric]
        if isinstance(sample, Mapping):
            for values, value in sample.items():
                metric.add_sample(
                    self._name, dict(zip(self._labelnames, values, strict=True)), value
                )
        else:
            metric.add_sample(self._name, {}, float(sample))
        return [metric]


class LeanHistogram:
    """A histogram for a hot path: the bucket is found by bisection (in C) and one lock
    guards the counts and the sum, where ``prometheus_client``'s scans its buckets in
    Python and takes a lock for the sum and another for the bucket (about a third of the
    cost, measured: 0.3 against 0.6 to 2 microseconds an observation, the more the later
    the bucket). The registry reads it at scrape time (:meth:`Registry.lean_histogram`);
    the exposition is ``prometheus_client``'s own."""

    __slots__ = ("_bounds", "_counts", "_les", "_lock", "_scale", "_sum")

    def __init__(self, buckets: Sequence[float], *, scale: float = 1.0) -> None:
        """``buckets``: the upper bounds (inclusive, ascending; ``+Inf`` is added);
        ``scale``: what each observed value is multiplied by (``1e9``: seconds observed,
        nanoseconds exposed)."""
        bounds = tuple(float(b) for b in buckets)
        if not bounds or list(bounds) != sorted(set(bounds)):
            raise ValueError(f"histogram buckets must be ascending and distinct: {bounds}")
        self._bounds = bounds
        self._les = (*(_go_float(b) for b in bounds), "+Inf")
        self._counts = [0] * (len(bounds) + 1)  # the last: above every bound (+Inf)
        self._sum = 0.0
        self._scale = scale
        self._lock = threading.Lock()

    def observe(self, value: float) -> None:
        """Count ``value`` (times the scale)."""
        value *= self._scale
        index = bisect_left(self._bounds, value)
        with self._lock:
            self._counts[index] += 1
            self._sum += value

    def family(self, name: str, documentation: str) -> HistogramMetricFamily:
        """Its state now, as ``prometheus_client`` exposes a histogram."""
        with self._lock:
            counts, total = list(self._counts), self._sum
        cumulative, buckets = 0, []
        for le, count in zip(self._les, counts, strict=True):
            cumulative += count
            buckets.append((le, float(cumulative)))
        return HistogramMetricFamily(name, documentation, buckets=buckets, sum_value=total)


class SingleWriterHistogram(LeanHistogram):
    """A :class:`LeanHistogram` that one thread alone observes, without the lock: for a
    loop every other thread waits for (the engine's commit loop).

    NB: the one writer is what makes it safe: no two ``+=`` on a bucket interleave. A
    reader copies the buckets in one step under the GIL, so its counts agree with one
    another; the sum may hold one observation more or less than they do.
    """

    __slots__ = ()

    def observe(self, value: float) -> None:
        """Count ``value`` (times the scale). Only ever from the one writing thread."""
        value *= self._scale
        self._counts[bisect_left(self._bounds, value)] += 1
        self._sum += value


class _OffLeanHistogram(SingleWriterHistogram):
    __slots__ = ()

    def observe(self, value: float) -> None:
        pass


class _Lean(Collector):
    def __init__(self, name: str, documentation: str, histogram: LeanHistogram) -> None:
        self._name = name
        self._documentation = documentation
        self._histogram = histogram

    def describe(self) -> Iterable[Metric]:
        return [Metric(self._name, self._documentation, "histogram")]

    def collect(self) -> Iterable[Metric]:
        return [self._histogram.family(self._name, self._documentation)]


class _Exposed(Collector):
    """The registry's metrics as CockroachDB names them (see the module docstring)."""

    def __init__(self, inner: CollectorRegistry) -> None:
        self._inner = inner

    def collect(self) -> Iterator[Metric]:
        for metric in self._inner.collect():
            if metric.type != "counter":
                if any(s.name.endswith("_created") for s in metric.samples):
                    metric.samples = [s for s in metric.samples if not s.name.endswith("_created")]
                yield metric
                continue
            renamed = Metric(metric.name, metric.documentation, "unknown")
            for s in metric.samples:
                if s.name == metric.name + "_total" or s.name == metric.name:
                    renamed.add_sample(metric.name, s.labels, s.value)
            yield renamed


# Metrics of a registry whose metrics are off. NB: they skip prometheus_client's
# __init__ (they are never registered nor read) and override every method feedkv calls.


class _OffCounter(Counter):
    def __init__(self) -> None:
        pass

    def labels(self, *labelvalues: object, **labelkwargs: object) -> Self:
        return self

    def inc(self, amount: float = 1, exemplar: dict[str, str] | None = None) -> None:
        pass


class _OffGauge(Gauge):
    def __init__(self) -> None:
        pass

    def labels(self, *labelvalues: object, **labelkwargs: object) -> Self:
        return self

    def inc(self, amount: float = 1) -> None:
        pass

    def dec(self, amount: float = 1) -> None:
        pass

    def set(self, value: float) -> None:
        pass


class _OffHistogram(Histogram):
    def __init__(self) -> None:
        pass

    def labels(self, *labelvalues: object, **labelkwargs: object) -> Self:
        return self

    def observe(self, amount: float, exemplar: dict[str, str] | None = None) -> None:
        pass


class Registry:
    """One node's metrics. Making a metric twice under one name raises ``ValueError``
    (``prometheus_client``'s): each struct is made once per node. ``enabled=False``:
    metrics that record nothing (see the module docstring)."""

    def __init__(self, *, enabled: bool = True) -> None:
        self.enabled = enabled
        self._inner = CollectorRegistry(auto_describe=True)
        self._exposed = CollectorRegistry()
        self._exposed.register(_Exposed(self._inner))

    def counter(self, name: str, documentation: str, labelnames: Sequence[str] = ()) -> Counter:
        if not self.enabled:
            return _OffCounter()
        return Counter(name, documentation, labelnames, registry=self._inner)

    def gauge(self, name: str, documentation: str, labelnames: Sequence[str] = ()) -> Gauge:
        if not self.enabled:
            return _OffGauge()
        return Gauge(name, documentation, labelnames, registry=self._inner)

    def histogram(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str] = (),
        buckets: Sequence[float] = NANOS_BUCKETS,
    ) -> Histogram:
        if not self.enabled:
            return _OffHistogram()
        return Histogram(name, documentation, labelnames, registry=self._inner, buckets=buckets)

    def lean_histogram(
        self,
        name: str,
        documentation: str,
        buckets: Sequence[float] = NANOS_BUCKETS,
        *,
        scale: float = 1.0,
        single_writer: bool = False,
    ) -> LeanHistogram:
        """A histogram for a hot path (:class:`LeanHistogram`; ``single_writer``: one
        thread alone ever observes it, :class:`SingleWriterHistogram`)."""
        if not self.enabled:
            return _OffLeanHistogram(buckets, scale=scale)
        kind = SingleWriterHistogram if single_writer else LeanHistogram
        histogram = kind(buckets, scale=scale)
        self._inner.register(_Lean(name, documentation, histogram))
        return histogram

    def sampled(
        self,
        name: str,
        documentation: str,
        read: Callable[[], Sample],
        *,
        labelnames: Sequence[str] = (),
        kind: str = "gauge",
    ) -> None:
        """A metric read by ``read()`` at each scrape (``kind``: ``gauge``, or
        ``counter`` for a total the component keeps itself). ``read`` runs on the
        scraping thread: it must be quick and must not block on the component's locks
        for long."""
        if self.enabled:
            self._inner.register(_Sampled(name, documentation, kind, read, labelnames))

    def exposition(self) -> bytes:
        """Every metric in Prometheus's text format (version 0.0.4)."""
        return generate_latest(self._exposed)
