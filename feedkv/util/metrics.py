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
use. A counter is written as CockroachDB writes one: ``# TYPE x counter`` over samples
named ``x`` (text format 0.0.4 asks for no suffix), without ``_created`` samples. NB:
``prometheus_client`` would write a counter ``x`` as ``x_total`` (OpenMetrics' rule), so
its family is built as a gauge (written verbatim) and :meth:`Registry.exposition` types it
``counter`` in its text.

Two kinds of metric:

- pushed: a :class:`Counter`, :class:`Gauge` or :class:`LeanHistogram` that the code
  moves, each a few attributes under a lock (none for a histogram: its observations are
  appended to a list and counted in batches, see :func:`_take`), read by the registry at
  scrape time; a labelled one hands out a child per tuple of label values
  (:meth:`Counter.labels`), which a hot path binds once; a :class:`Tally` counts a hot
  path's events by kind the same way, for sampled metrics to read;
- sampled (:meth:`Registry.sampled`): a function read at scrape time, for what a
  component already knows (running feeds, live nodes, LMDB's map use): no cost
  between scrapes.

NB: the exposition is ``prometheus_client``'s (:func:`generate_latest`, from the
metric families the registry's collectors build); its own ``Counter`` and ``Histogram``
are not used: an increment of theirs costs a few times one of these (checks, exemplars,
a lock per value; 0.9 against 0.35 microseconds, measured), which each SQL statement
paid several times, and at each scrape their samples had to be renamed and their
``_created`` samples dropped.

A registry made with ``enabled=False`` (a node started with its metrics off, which
``feedkv bench changefeed`` compares against one with them on) hands out metrics that
record nothing and exposes none: the structs built on it work unchanged, at the cost of
a call that returns at once.
"""

from __future__ import annotations

import logging
import threading
from bisect import bisect_left
from collections import Counter as _Multiset
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import Self, TypeVar, cast

from prometheus_client import CollectorRegistry, Metric
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

__all__ = [
    "CONTENT_TYPE",
    "NANOS_BUCKETS",
    "Counter",
    "Gauge",
    "LeanHistogram",
    "Registry",
    "Sample",
    "SingleWriterHistogram",
    "Tally",
]

log = logging.getLogger(__name__)

# NB: generate_latest writes text format 0.0.4 (names of the legacy character set), which
# every Prometheus reads; the library's "latest" content type names 1.0.0
CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4

# A bucket's bound as Prometheus (Go) writes it, as prometheus_client's histograms do
# (NB: the library leaves the function untyped)
_go_float = cast(Callable[[float], str], floatToGoString)

# How many observations a lock-free metric holds before its writer counts them (see
# _take): a bound on its memory between scrapes.
FOLD_EVERY = 1024

# Latencies in nanoseconds, as CockroachDB measures them: 100us to a minute.
NANOS_BUCKETS: tuple[float, ...] = (
    *(m * 10**e for e in range(5, 10) for m in (1, 2.5, 5)),
    1e10,
    3e10,
    6e10,
)

# What a sampled metric reads: a value, or a value for each tuple of label values.
Sample = float | Mapping[tuple[str, ...], float]

_V = TypeVar("_V")

# A family's values at a scrape, which the next one compares with its own (see
# Registry.exposition): a value for each tuple of label values; a histogram's, the count
# of each bucket and the sum; a sampled metric's, what it read (None: its read failed).
_Values = tuple[tuple[tuple[str, ...], float], ...]
_Histograms = tuple[tuple[tuple[str, ...], tuple[int, ...], float], ...]
_State = float | _Values | _Histograms | None


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
        self.counter = kind == "counter"
        # NB: a counter is built as a gauge (see the module docstring)
        self._kind = "gauge" if self.counter else kind
        self._read = read
        self._labelnames = tuple(labelnames)

    def describe(self) -> Iterable[Metric]:
        # NB: the registry reads the names here when the metric is made, before the
        # component it samples may exist
        return [Metric(self._name, self._documentation, self._kind)]

    def collect(self) -> Iterable[Metric]:
        return [self.family(self.state())]

    def state(self) -> float | _Values | None:
        """What ``read()`` gives now: a value, its values by labels, or ``None`` when it
        failed."""
        try:
            sample = self._read()
        except Exception:  # a scrape must not fail for one metric
            log.exception("metric %s could not be read", self._name)
            return None
        if isinstance(sample, Mapping):
            return tuple(sample.items())
        return float(sample)

    def family(self, state: _State) -> Metric:
        metric = Metric(self._name, self._documentation, self._kind)
        if isinstance(state, tuple):
            for values, value in cast(_Values, state):
                metric.add_sample(
                    self._name, dict(zip(self._labelnames, values, strict=True)), value
                )
        elif state is not None:
            metric.add_sample(self._name, {}, state)
        return metric


class _Labelled:
    """What the pushed metrics share: a metric made with label names holds no value of
    its own but a child per tuple of label values (:meth:`labels`), made on first use
    and kept; one made without holds its value."""

    __slots__ = ("_children", "_labelnames", "_lock")

    def __init__(self, labelnames: Sequence[str]) -> None:
        self._labelnames = tuple(labelnames)
        self._children: dict[tuple[str, ...], Self] | None = {} if labelnames else None
        self._lock = threading.Lock()

    def labels(self, *values: str) -> Self:
        """The child of ``values`` (one for each label name, in their order). NB: a hot
        path binds it once rather than look it up for each event."""
        children = self._children
        if children is None:
            raise ValueError("this metric has no labels: record on it directly")
        if len(values) != len(self._labelnames):
            raise ValueError(f"expected values of {self._labelnames}, got {values}")
        child = children.get(values)
        if child is None:
            with self._lock:
                child = children.setdefault(values, self._child())
        return child

    def _child(self) -> Self:
        raise NotImplementedError

    def _series(self) -> tuple[tuple[tuple[str, ...], Self], ...]:
        """Each series as ``(label values, the metric holding its value)``, in the order
        their labels were first used."""
        if self._children is None:
            return (((), self),)
        with self._lock:
            return tuple(self._children.items())

    def _unlabelled(self) -> None:
        if self._children is not None:
            raise _labelled(self._labelnames)


def _labelled(labelnames: tuple[str, ...]) -> ValueError:
    """The error of a value recorded on a metric with labels rather than on a child."""
    return ValueError(
        f"this metric has labels {labelnames}: record on one of its children (labels(...))"
    )


def _take(pending: list[_V]) -> list[_V]:
    """Remove and return what ``pending`` holds now, for a lock-free metric's folding
    (its caller holds the metric's lock: one folder at a time).

    NB: what makes recording without a lock exact. A writer only ever appends, one
    ``list.append`` (atomic under the GIL, as in free-threaded builds); the copy and the
    deletion of the copied prefix are each one C call, so an append landing between them
    lies past the prefix and is kept for the next fold. (Swapping in a new list instead
    would lose an append made to the old one by a writer that had read it.)"""
    batch = pending[:]
    del pending[: len(batch)]
    return batch


class Tally:
    """Counts of events by kind (``0 <= index < kinds``), for a hot path that counts
    each of its events by its kind (each SQL statement by its type): an addition is one
    ``list.append`` without a lock, the appended kinds counted at each read and every
    :data:`FOLD_EVERY` additions. The owner exposes the counts through sampled metrics
    (:meth:`Registry.sampled`) reading :meth:`counts`."""

    __slots__ = ("_counts", "_lock", "_pending")

    def __init__(self, kinds: int) -> None:
        self._counts = [0] * kinds
        self._lock = threading.Lock()
        self._pending: list[int] = []

    def add(self, index: int) -> None:
        """Count one event of kind ``index``. NB: not checked here: a kind out of range
        fails the next read (the callers pass constants)."""
        pending = self._pending
        pending.append(index)
        if len(pending) >= FOLD_EVERY:
            with self._lock:
                self._fold()

    def counts(self) -> tuple[int, ...]:
        """The count of each kind now."""
        with self._lock:
            self._fold()
            return tuple(self._counts)

    def _fold(self) -> None:
        counts = self._counts
        for index, n in _Multiset(_take(self._pending)).items():
            counts[index] += n


class _Valued(_Labelled):
    """A metric of one value a series (a counter, a gauge)."""

    __slots__ = ("_value",)

    def __init__(self, labelnames: Sequence[str] = ()) -> None:
        super().__init__(labelnames)
        self._value = 0.0

    @property
    def value(self) -> float:
        return self._value

    def _child(self) -> Self:
        return type(self)()


class Counter(_Valued):
    """A total that only grows: an addition is one ``+=`` under a lock (the registry reads
    it at scrape time), exposed as CockroachDB names it (see the module docstring)."""

    __slots__ = ()

    def inc(self, amount: float = 1) -> None:
        """Add ``amount`` (at least 0)."""
        if amount < 0 or self._children is not None:
            self._unlabelled()
            raise ValueError(f"a counter only grows: cannot add {amount}")
        with self._lock:
            self._value += amount


class Gauge(_Valued):
    """A value that goes up and down, set or moved under a lock."""

    __slots__ = ()

    def set(self, value: float) -> None:
        self._unlabelled()
        self._value = float(value)

    def inc(self, amount: float = 1) -> None:
        self._unlabelled()
        with self._lock:
            self._value += amount

    def dec(self, amount: float = 1) -> None:
        self.inc(-amount)


class _Refused(list[float]):
    """The pending observations of a labelled lean histogram, which holds none of its
    own (see :class:`_Labelled`): an observation on it rather than on a child is refused
    as :meth:`_Labelled._unlabelled` refuses it."""

    __slots__ = ("_labelnames",)

    def __init__(self, labelnames: tuple[str, ...]) -> None:
        super().__init__()
        self._labelnames = labelnames

    def append(self, value: float) -> None:
        raise _labelled(self._labelnames)


class LeanHistogram(_Labelled):
    """A histogram for a hot path: an observation is appended to a list without a lock;
    every :data:`FOLD_EVERY` of them, and at each scrape, they are counted in one batch
    of C calls (the buckets by bisection, the sum), where ``prometheus_client``'s scans
    its buckets in Python and takes a lock for the sum and another for the bucket (0.6 to
    2 microseconds an observation, the more the later the bucket; a bisection and one
    lock took 0.3, measured, and the lock's ``with`` was half of what a SQL statement's
    two observations ran in Python). The registry reads it at scrape time; the
    exposition is the library's own (:class:`HistogramMetricFamily`)."""

    __slots__ = ("_bounds", "_counts", "_les", "_pending", "_scale", "_sum")

    def __init__(
        self, buckets: Sequence[float], *, scale: float = 1.0, labelnames: Sequence[str] = ()
    ) -> None:
        """``buckets``: the upper bounds (inclusive, ascending; ``+Inf`` is added);
        ``scale``: what each observed value is multiplied by (``1e9``: seconds observed,
        nanoseconds exposed)."""
        super().__init__(labelnames)
        bounds = tuple(float(b) for b in buckets)
        if not bounds or list(bounds) != sorted(set(bounds)):
            raise ValueError(f"histogram buckets must be ascending and distinct: {bounds}")
        self._bounds = bounds
        self._les = (*(_go_float(b) for b in bounds), "+Inf")
        self._counts = [0] * (len(bounds) + 1)  # the last: above every bound (+Inf)
        self._sum = 0.0
        self._scale = float(scale)
        # NB: a labelled one's refuses what is observed on it, not on a child: the check
        # then costs an observation nothing
        self._pending: list[float] = _Refused(self._labelnames) if labelnames else []

    def observe(self, value: float) -> None:
        """Count ``value`` (times the scale), without a lock (see :func:`_take`)."""
        pending = self._pending
        pending.append(value)
        if len(pending) >= FOLD_EVERY:
            with self._lock:
                self._fold()

    def observe_tallied(self, value: float, tally: Tally, index: int) -> None:
        """:meth:`observe` ``value`` and :meth:`Tally.add` ``index`` to ``tally`` in
        one call: for a hot path that also counts its events by kind (each SQL
        statement by its type).

        NB: the tally's appends are counted when this histogram's are (or at a read of
        the tally, or its own :meth:`Tally.add`), so it holds at most twice
        :data:`FOLD_EVERY` of them."""
        pending = self._pending
        pending.append(value)
        tally._pending.append(index)
        if len(pending) >= FOLD_EVERY:
            with self._lock:
                self._fold()
            with tally._lock:
                tally._fold()

    def _fold(self) -> None:
        """Count the pending observations (under the lock)."""
        batch = _take(self._pending)
        if not batch:
            return
        scaled = list(map(self._scale.__mul__, batch))
        counts = self._counts
        for bucket, n in _Multiset(map(partial(bisect_left, self._bounds), scaled)).items():
            counts[bucket] += n
        self._sum += sum(scaled)

    def _child(self) -> Self:
        return type(self)(self._bounds, scale=self._scale)

    def _counted(self) -> tuple[tuple[int, ...], float]:
        """The count of each bucket (not cumulative) and the sum now."""
        with self._lock:
            self._fold()
            return tuple(self._counts), self._sum

    def _state(self) -> _Histograms:
        """Each series' bucket counts and sum now, by labels."""
        return tuple((values, *h._counted()) for values, h in self._series())

    def _family(self, name: str, documentation: str, state: _Histograms) -> HistogramMetricFamily:
        """``state`` as ``prometheus_client`` exposes a histogram."""
        family = HistogramMetricFamily(name, documentation, labels=self._labelnames)
        for values, counts, total in state:
            cumulative, buckets = 0, []
            for le, count in zip(self._les, counts, strict=True):
                cumulative += count
                buckets.append((le, float(cumulative)))
            family.add_metric(list(values), buckets, total)
        return family


class SingleWriterHistogram(LeanHistogram):
    """A :class:`LeanHistogram` that one thread alone observes, counting each
    observation at once, without the list: for a loop every other thread waits for (the
    engine's commit loop).

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


# Metrics of a registry whose metrics are off: never registered nor read; each call
# returns at once.


class _OffCounter(Counter):
    __slots__ = ()

    def labels(self, *values: str) -> Self:
        return self

    def inc(self, amount: float = 1) -> None:
        pass


class _OffGauge(Gauge):
    __slots__ = ()

    def labels(self, *values: str) -> Self:
        return self

    def set(self, value: float) -> None:
        pass

    def inc(self, amount: float = 1) -> None:
        pass


class _OffLeanHistogram(SingleWriterHistogram):
    __slots__ = ()

    def labels(self, *values: str) -> Self:
        return self

    def observe(self, value: float) -> None:
        pass

    def observe_tallied(self, value: float, tally: Tally, index: int) -> None:
        pass


class _OffTally(Tally):
    __slots__ = ()

    def add(self, index: int) -> None:
        pass


class _Pushed(Collector):
    """A pushed metric's families at scrape time: a counter under its own name (no
    ``_total``, no ``_created``: CockroachDB's names; built as a gauge, see the module
    docstring), a gauge, a histogram."""

    def __init__(self, name: str, documentation: str, metric: LeanHistogram | _Valued) -> None:
        self._name = name
        self._documentation = documentation
        self._metric = metric
        self.counter = isinstance(metric, Counter)
        self._kind = "histogram" if isinstance(metric, LeanHistogram) else "gauge"

    def describe(self) -> Iterable[Metric]:
        return [Metric(self._name, self._documentation, self._kind)]

    def collect(self) -> Iterable[Metric]:
        return [self.family(self.state())]

    def state(self) -> _Values | _Histograms:
        """The values now (a histogram's: its buckets' counts and its sum), by labels."""
        metric = self._metric
        if isinstance(metric, LeanHistogram):
            return metric._state()
        return tuple((values, series._value) for values, series in metric._series())

    def family(self, state: _State) -> Metric:
        metric = self._metric
        if isinstance(metric, LeanHistogram):
            return metric._family(self._name, self._documentation, cast(_Histograms, state))
        family = Metric(self._name, self._documentation, self._kind)
        names = metric._labelnames
        for values, value in cast(_Values, state):
            family.add_sample(self._name, dict(zip(names, values, strict=True)), value)
        return family


_M = TypeVar("_M", bound=LeanHistogram | _Valued)
_T = TypeVar("_T")


class Registry:
    """One node's metrics. Making a metric twice under one name raises ``ValueError``
    (``prometheus_client``'s): each struct is made once per node. ``enabled=False``:
    metrics that record nothing (see the module docstring)."""

    def __init__(self, *, enabled: bool = True) -> None:
        self.enabled = enabled
        # NB: prometheus_client's registry checks the names; the scrapes read the
        # collectors here, in the order they were made (the library's order)
        self._inner = CollectorRegistry(auto_describe=True)
        self._collectors: list[_Pushed | _Sampled] = []
        # each family's values at the last scrape, and their text
        self._formatted: dict[_Pushed | _Sampled, tuple[_State, bytes]] = {}
        self._scrapes = 0

    def counter(self, name: str, documentation: str, labelnames: Sequence[str] = ()) -> Counter:
        if not self.enabled:
            return _OffCounter()
        return self._pushed(name, documentation, Counter(labelnames))

    def gauge(self, name: str, documentation: str, labelnames: Sequence[str] = ()) -> Gauge:
        if not self.enabled:
            return _OffGauge()
        return self._pushed(name, documentation, Gauge(labelnames))

    def histogram(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str] = (),
        buckets: Sequence[float] = NANOS_BUCKETS,
    ) -> LeanHistogram:
        """A histogram of several writers (:class:`LeanHistogram`), with labels."""
        if not self.enabled:
            return _OffLeanHistogram(buckets)
        return self._pushed(name, documentation, LeanHistogram(buckets, labelnames=labelnames))

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
        return self._pushed(name, documentation, kind(buckets, scale=scale))

    def tally(self, kinds: int) -> Tally:
        """Counts by kind for a hot path (:class:`Tally`), which its owner exposes
        through sampled metrics."""
        return Tally(kinds) if self.enabled else _OffTally(kinds)

    def _pushed(self, name: str, documentation: str, metric: _M) -> _M:
        self._register(_Pushed(name, documentation, metric))
        return metric

    def _register(self, collector: _Pushed | _Sampled) -> None:
        self._inner.register(collector)
        self._collectors.append(collector)

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
            self._register(_Sampled(name, documentation, kind, read, labelnames))

    def per_scrape(self, read: Callable[[], _T]) -> Callable[[], _T]:
        """``read``, called at most once a scrape (:meth:`exposition`) however many
        sampled metrics call it: for metrics that share one costly read (the node's
        changefeed buffers, a file's lock each)."""
        last: list[tuple[int, _T]] = []

        def once() -> _T:
            scrape = self._scrapes
            if not last or last[0][0] != scrape:
                last[:] = [(scrape, read())]
            return last[0][1]

        return once

    def exposition(self) -> bytes:
        """Every metric in Prometheus's text format (version 0.0.4).

        NB: a family whose values are those it had at the last scrape is neither built
        nor formatted again, its text reused: building the library's families and
        formatting them is most of what a scrape costs (3-4 microseconds a sample),
        reading and comparing the values a tenth of it, and between two scrapes most
        families do not move (a node's 51 took 1.3 ms of CPU a scrape, measured, when
        each was built)."""
        self._scrapes += 1
        parts = []
        formatted = self._formatted
        for collector in self._collectors:
            state = collector.state()
            last = formatted.get(collector)
            if last is None or last[0] != state:
                family = collector.family(state)
                text = generate_latest(_One(family))
                if collector.counter:  # built as a gauge: typed counter here
                    name = family.name.encode()
                    gauge, counter = b"# TYPE %s gauge\n" % name, b"# TYPE %s counter\n" % name
                    text = text.replace(gauge, counter, 1)
                last = formatted[collector] = (state, text)
            parts.append(last[1])
        return b"".join(parts)


class _One(Collector):
    """One family, for :func:`generate_latest` to format."""

    def __init__(self, family: Metric) -> None:
        self._family = family

    def collect(self) -> Iterable[Metric]:
        return [self._family]
