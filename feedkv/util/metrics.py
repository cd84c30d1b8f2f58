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
  between scrapes.

A registry made with ``enabled=False`` (a node started with its metrics off, which
``feedkv bench changefeed`` compares against one with them on) hands out metrics that
record nothing and exposes none: the structs built on it work unchanged, at the cost of
a call that returns at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Self

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Metric
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from prometheus_client.registry import Collector

__all__ = [
    "CONTENT_TYPE",
    "NANOS_BUCKETS",
    "Registry",
    "Sample",
]

log = logging.getLogger(__name__)

# NB: generate_latest writes text format 0.0.4 (names of the legacy character set), which
# every Prometheus reads; the library's "latest" content type names 1.0.0
CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4

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
