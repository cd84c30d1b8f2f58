"""Random operation sequences against the real engine and a plain in-memory model.

Puts, conditional puts, deletes, delete-ranges, transactional intents, commits, aborts,
pushes and garbage collection run on both; every read, scan and export at random
timestamps must agree, errors included.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from feedkv.errors import (
    BatchTimestampBeforeGCError,
    ConditionFailedError,
    WriteIntentError,
    WriteTooOldError,
)
from feedkv.storage import export, gc, mvcc
from feedkv.storage.intent import TxnMeta, TxnStatus
from feedkv.storage.lmdb_engine import LMDBEngine
from feedkv.storage.schema import MVCC_DATABASES
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

KEYS = [b"a", b"a\x00", b"a\x00\x01", b"b", b"b\xff", b"c"]
VALUES = st.sampled_from([b"x", b"y", b"", b"\x00z", None])
SPANS = [
    Span(b"a", b"z"),
    Span(b"a", b"b"),
    Span(b"a\x00", b"b\xff"),
    Span(b"b", b"c"),
    Span(b"a\x00\x01", b"a\x01"),
]


def ts(n: int) -> Timestamp:
    return Timestamp(1000 + n // 3, n % 3)


@dataclass
class ModelIntent:
    txn: int
    ts: int
    value: bytes | None


@dataclass
class ModelTxn:
    id: bytes
    key: bytes
    write_ts: int
    seq: int = 0
    keys: set[bytes] = field(default_factory=set)

    def meta(self) -> TxnMeta:
        return TxnMeta(self.id, self.key, 0, ts(self.write_ts), self.seq)


class Model:
    """Committed versions per key (ascending), one intent per key, GC thresholds per span."""

    def __init__(self) -> None:
        self.versions: dict[bytes, list[tuple[int, bytes | None]]] = {}
        self.intents: dict[bytes, ModelIntent] = {}
        self.gc: list[tuple[Span, int]] = []

    def live_keys(self) -> list[bytes]:
        return sorted(
            k
            for k in set(self.versions) | set(self.intents)
            if self.versions.get(k) or k in self.intents
        )

    def threshold(self, span: Span) -> int:
        return max((t for s, t in self.gc if s.overlaps(span)), default=-1)

    def newest(self, key: bytes) -> tuple[int, bytes | None] | None:
        versions = self.versions.get(key)
        return versions[-1] if versions else None


class MVCCMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="feedkv-model-")
        self.engine = LMDBEngine(self.dir, databases=MVCC_DATABASES)
        self.model = Model()
        self.now = 3
        self.txns: list[ModelTxn] = []
        self.next_txn = 0

    def teardown(self) -> None:
        self.engine.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # Helpers.

    def tick(self) -> int:
        self.now += 1
        return self.now

    def pick_writer(self, data: st.DataObject, transactional: bool) -> tuple[ModelTxn | None, int]:
        """A transaction's next write (or a non-transactional one) and its timestamp."""
        txn = data.draw(st.sampled_from(self.txns)) if transactional and self.txns else None
        if txn is None:
            return None, self.tick()
        txn.seq += 1
        return txn, txn.write_ts

    def model_visible(self, key: bytes, at: int, txn: ModelTxn | None) -> tuple[str, bytes | None]:
        intent = self.model.intents.get(key)
        if intent is not None:
            if txn is not None and intent.txn == id(txn):
                return "value", intent.value
            if intent.ts <= at:
                return "conflict", None
        value = None
        for version_ts, version_value in self.model.versions.get(key, []):
            if version_ts <= at:
                value = version_value
        return "value", value

    def model_prepare(self, key: bytes, at: int, txn: ModelTxn | None) -> str | None:
        intent = self.model.intents.get(key)
        if intent is not None and (txn is None or intent.txn != id(txn)):
            return "intent"
        newest = self.model.newest(key)
        if newest is not None and newest[0] >= at:
            return "too_old"
        return None

    def model_write(self, key: bytes, at: int, value: bytes | None, txn: ModelTxn | None) -> None:
        if txn is None:
            self.model.versions.setdefault(key, []).append((at, value))
            return
        intent = self.model.intents.get(key)
        if intent is None:
            self.model.intents[key] = ModelIntent(id(txn), at, value)
        else:
            intent.ts = max(intent.ts, at)
            intent.value = value
        txn.keys.add(key)

    def run(self, fn):  # type: ignore[no-untyped-def]
        return self.engine.write(fn)

    # Writes.

    @rule(key=st.sampled_from(KEYS), value=VALUES, back=st.integers(0, 3))
    def put(self, key: bytes, value: bytes | None, back: int) -> None:
        at = self.tick() - back
        expected = self.model_prepare(key, at, None)
        try:
            self.run(lambda rw: mvcc.put(rw, key, ts(at), value))
        except WriteIntentError:
            assert expected == "intent"
            return
        except WriteTooOldError as exc:
            assert expected == "too_old"
            assert exc.actual_ts > exc.existing_ts
            return
        assert expected is None
        self.model_write(key, at, value, None)

    @rule()
    def begin(self) -> None:
        self.next_txn += 1
        at = self.tick()
        self.txns.append(ModelTxn(self.next_txn.to_bytes(16, "big"), KEYS[0], at))

    @precondition(lambda self: self.txns)
    @rule(data=st.data(), key=st.sampled_from(KEYS), value=VALUES)
    def txn_put(self, data: st.DataObject, key: bytes, value: bytes | None) -> None:
        txn = data.draw(st.sampled_from(self.txns))
        txn.seq += 1
        expected = self.model_prepare(key, txn.write_ts, txn)
        meta = txn.meta()
        try:
            self.run(lambda rw: mvcc.put(rw, key, meta.write_ts, value, txn=meta))
        except WriteIntentError:
            assert expected == "intent"
            return
        except WriteTooOldError:
            assert expected == "too_old"
            return
        assert expected is None
        self.model_write(key, txn.write_ts, value, txn)

    @rule(
        data=st.data(),
        key=st.sampled_from(KEYS),
        value=VALUES,
        expect=VALUES,
        transactional=st.booleans(),
    )
    def cput(
        self,
        data: st.DataObject,
        key: bytes,
        value: bytes | None,
        expect: bytes | None,
        transactional: bool,
    ) -> None:
        txn, at = self.pick_writer(data, transactional)
        expected = self.model_prepare(key, at, txn)
        if expected is None:
            current = self.model_visible(key, 10**9, txn)[1]
            if current != expect:
                expected = "condition"
        meta = txn.meta() if txn is not None else None
        try:
            self.run(lambda rw: mvcc.conditional_put(rw, key, ts(at), value, expect, txn=meta))
        except WriteIntentError:
            assert expected == "intent"
            return
        except WriteTooOldError:
            assert expected == "too_old"
            return
        except ConditionFailedError as exc:
            assert expected == "condition"
            assert exc.actual == self.model_visible(key, 10**9, txn)[1]
            return
        assert expected is None
        self.model_write(key, at, value, txn)

    @rule(data=st.data(), span=st.sampled_from(SPANS), transactional=st.booleans())
    def delete_range(self, data: st.DataObject, span: Span, transactional: bool) -> None:
        txn, at = self.pick_writer(data, transactional)
        problems = set()
        to_delete = []
        for key in self.model.live_keys():
            if not span.contains_key(key):
                continue
            problem = self.model_prepare(key, at, txn)
            if problem is not None:
                problems.add(problem)
            elif self.model_visible(key, 10**9, txn)[1] is not None:
                to_delete.append(key)
        # Every conflict is found before anything is written; intents win over too-old.
        outcome = next((p for p in ("intent", "too_old") if p in problems), None)
        meta = txn.meta() if txn is not None else None
        try:
            deleted, _ = self.run(lambda rw: mvcc.delete_range(rw, span, ts(at), txn=meta))
        except WriteIntentError:
            assert outcome == "intent"
            return
        except WriteTooOldError:
            assert outcome == "too_old"
            return
        assert outcome is None
        assert deleted == to_delete
        for key in to_delete:
            self.model_write(key, at, None, txn)

    @precondition(lambda self: self.txns)
    @rule(data=st.data(), status=st.sampled_from(list(TxnStatus)))
    def resolve(self, data: st.DataObject, status: TxnStatus) -> None:
        txn = data.draw(st.sampled_from(self.txns))
        if status is not TxnStatus.PENDING:
            txn.write_ts = max([self.tick()] + [self.model.intents[k].ts for k in txn.keys])
        else:
            txn.write_ts = self.tick()
        meta = txn.meta()
        span = Span(b"\x00", b"\xff")
        self.run(lambda rw: mvcc.resolve_intents(rw, span, meta, status))
        for key in sorted(txn.keys):
            intent = self.model.intents[key]
            if status is TxnStatus.PENDING:
                intent.ts = max(intent.ts, txn.write_ts)
                continue
            del self.model.intents[key]
            if status is TxnStatus.COMMITTED:
                self.model.versions.setdefault(key, []).append((txn.write_ts, intent.value))
        if status is not TxnStatus.PENDING:
            self.txns.remove(txn)

    @rule(span=st.sampled_from(SPANS), back=st.integers(0, 30))
    def collect_garbage(self, span: Span, back: int) -> None:
        threshold = max(self.now - back, 0)
        self.run(lambda rw: gc.gc(rw, span, ts(threshold)))
        self.model.gc.append((span, threshold))
        for key, versions in self.model.versions.items():
            if not span.contains_key(key):
                continue
            below = [v for v in versions if v[0] <= threshold]
            above = [v for v in versions if v[0] > threshold]
            keep = below[-1:] if below and below[-1][1] is not None else []
            versions[:] = keep + above

    # Reads.

    @rule(data=st.data(), key=st.sampled_from(KEYS), back=st.integers(0, 20))
    def get(self, data: st.DataObject, key: bytes, back: int) -> None:
        at = max(self.now - back, 0)
        txn = data.draw(st.sampled_from([None, *self.txns]))
        meta = txn.meta() if txn is not None else None
        with self.engine.snapshot() as snap:
            try:
                got = mvcc.get(snap, key, ts(at), txn=meta)
            except BatchTimestampBeforeGCError:
                assert at < self.model.threshold(Span.for_key(key))
                return
            except WriteIntentError as exc:
                assert at >= self.model.threshold(Span.for_key(key))
                assert self.model_visible(key, at, txn)[0] == "conflict"
                assert [i.key for i in exc.intents] == [key]
                return
        assert at >= self.model.threshold(Span.for_key(key))
        kind, value = self.model_visible(key, at, txn)
        assert kind == "value"
        assert (got.value if got else None) == value

    @rule(
        data=st.data(),
        span=st.sampled_from(SPANS),
        back=st.integers(0, 20),
        limit=st.one_of(st.none(), st.integers(0, 4)),
        reverse=st.booleans(),
    )
    def scan(
        self, data: st.DataObject, span: Span, back: int, limit: int | None, reverse: bool
    ) -> None:
        at = max(self.now - back, 0)
        txn = data.draw(st.sampled_from([None, *self.txns]))
        meta = txn.meta() if txn is not None else None
        threshold = self.model.threshold(span)
        rows: list[tuple[bytes, bytes]] = []
        conflicts: list[bytes] = []
        resume = None
        keys = [k for k in self.model.live_keys() if span.contains_key(k)]
        for key in reversed(keys) if reverse else keys:
            if limit is not None and len(rows) >= limit:
                if not conflicts:
                    resume = key
                break
            kind, value = self.model_visible(key, at, txn)
            if kind == "conflict":
                conflicts.append(key)
            elif value is not None:
                rows.append((key, value))
        with self.engine.snapshot() as snap:
            try:
                got = mvcc.scan(snap, span, ts(at), txn=meta, limit=limit, reverse=reverse)
            except BatchTimestampBeforeGCError:
                assert at < threshold
                return
            except WriteIntentError as exc:
                assert at >= threshold
                assert [i.key for i in exc.intents] == conflicts
                return
        assert at >= threshold
        assert not conflicts
        assert [(kv.key, kv.value) for kv in got.rows] == rows
        assert got.resume_key == resume

    @rule(
        span=st.sampled_from(SPANS),
        lo_back=st.integers(0, 40),
        width=st.integers(0, 40),
        diff=st.booleans(),
    )
    def incremental_export(self, span: Span, lo_back: int, width: int, diff: bool) -> None:
        lo = max(self.now - lo_back, 0)
        hi = lo + width
        expected = []
        for key, versions in self.model.versions.items():
            if not span.contains_key(key):
                continue
            for index, (version_ts, value) in enumerate(versions):
                if lo < version_ts <= hi:
                    prev = versions[index - 1][1] if diff and index > 0 else None
                    expected.append((ts(version_ts), key, value, prev))
        expected.sort(key=lambda e: (e[0], e[1]))
        expected_intents = sorted(
            k for k, i in self.model.intents.items() if span.contains_key(k) and i.ts <= hi
        )
        with self.engine.snapshot() as snap:
            try:
                result = export.export(snap, span, ts(lo), ts(hi), with_diff=diff)
            except BatchTimestampBeforeGCError:
                assert lo < self.model.threshold(span)
                return
        assert lo >= self.model.threshold(span)
        assert [(v.ts, v.key, v.value, v.prev_value) for v in result.versions] == expected
        assert [i.key for i in result.intents] == expected_intents

    @invariant()
    def latest_state_matches(self) -> None:
        everything = Span(b"\x00", b"\xff")
        with self.engine.snapshot() as snap:
            intents = mvcc.scan_intents(snap, everything)
        assert [i.key for i in intents] == sorted(self.model.intents)


MVCCMachine.TestCase.settings = settings(
    max_examples=150,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_mvcc_matches_model = pytest.mark.slow(20)(MVCCMachine.TestCase)
