"""Changefeed jobs as records in the store: what a job is, where it stands, who runs it.

A job record (``F1 "job" id`` in the catalog, JSON) holds the changefeed's spec, its
status, its progress (the high-water mark its runner reported), the error that stopped
it, and a lease: the runner that owns it (a node id and an instance of that node's
process) and until when. Everything about a job is read and changed through records in
transactions, so ``SHOW CHANGEFEED JOBS`` from any client sees what the node running the
job sees, and a job outlives the process that created it.

``SHOW CHANGEFEED JOBS`` has CockroachDB 26.1's columns (:data:`SHOW_COLUMNS`); ``SHOW
JOBS`` and ``crdb_internal.jobs`` those of its jobs table (:data:`JOBS_COLUMNS`,
:data:`CRDB_INTERNAL_JOBS_COLUMNS`), with ``job_type`` ``CHANGEFEED`` and
``fraction_completed``, the part of an initial scan or a backfill done (``NULL`` while
none runs: a changefeed's progress is its high-water mark). Every write of a record
(:func:`put_job`) stamps ``modified``; the first one that gives it a runner stamps
``started``, the one that ends it ``finished``.

Statuses follow CockroachDB's::

    running ──PAUSE──> pause-requested ──runner stops──> paused ──RESUME──> running
    running ──CANCEL─> cancel-requested ─runner stops──> canceled
    running ──ends───> succeeded (end_time, initial_scan='only')
    running ──error──> failed, or paused with the error (on_error=pause)

A request on a job that no runner holds takes effect at once (``paused``,
``canceled``). Terminal jobs (canceled, failed, succeeded) no longer watch their tables,
so TRUNCATE is allowed again, and no longer hold back garbage collection
(:func:`protected_spans`).

A stream outside the job system (a ``feedkv`` Spark stream) holds history with a
:class:`HistoryHold` record (``F1 "hold" id``), moved up as its batches commit and
removed when it stops. A hold not renewed for ``HOLD_EXPIRES_AFTER_NS`` (a day, as
CockroachDB's ``gc_protect_expires_after``) lapses, so a stream that died without
stopping does not keep history forever.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from feedkv.changefeed.changefeed import ChangefeedSpec, resolved_topics
from feedkv.changefeed.options import parse_options
from feedkv.changefeed.rows import Target
from feedkv.changefeed.sink import parse_sink_uri, sink_topics
from feedkv.errors import InvalidArgumentError, SQLError
from feedkv.kv.txn import Txn
from feedkv.security.secrets import (
    KEY_FILE,
    SEALED_PREFIX,
    KeyMissing,
    Sealer,
    new_key,
    sealed_key_id,
)
from feedkv.sql import catalog
from feedkv.sql.arrays import Array
from feedkv.sql.descriptor import DatabaseDescriptor
from feedkv.sql.schema_jobs import list_schema_jobs
from feedkv.sql.types import ColumnType, Kind, logical_decimal
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

__all__ = [
    "ACTIVE",
    "CANCELED",
    "CANCEL_REQUESTED",
    "CRDB_INTERNAL_JOBS_COLUMNS",
    "JOBS_COLUMNS",
    "FAILED",
    "HOLD_EXPIRES_AFTER_NS",
    "PAUSED",
    "PAUSE_REQUESTED",
    "RUNNING",
    "SHOW_COLUMNS",
    "SUCCEEDED",
    "TERMINAL",
    "HistoryHold",
    "JobRecord",
    "Lease",
    "check_secrets",
    "delete_job",
    "existing_job",
    "get_job",
    "list_jobs",
    "is_secret",
    "jobs_row",
    "protected_spans",
    "protection_expired",
    "put_job",
    "redacted",
    "release_hold",
    "running_status",
    "show_row",
    "sink_topics_of",
    "table_names",
]

RUNNING = "running"
PAUSE_REQUESTED = "pause-requested"
PAUSED = "paused"
CANCEL_REQUESTED = "cancel-requested"
CANCELED = "canceled"
FAILED = "failed"
SUCCEEDED = "succeeded"
TERMINAL = frozenset({CANCELED, FAILED, SUCCEEDED})
ACTIVE = frozenset({RUNNING, PAUSE_REQUESTED, CANCEL_REQUESTED})  # a runner may hold it

# SHOW CHANGEFEED JOBS, as CockroachDB 26.1's
SHOW_COLUMNS = (
    "job_id",
    "description",
    "user_name",
    "status",
    "running_status",
    "created",
    "started",
    "finished",
    "modified",
    "high_water_timestamp",
    "readable_high_water_timestamptz",
    "error",
    "sink_uri",
    "full_table_names",
    "topics",
    "format",
    "name",
)

# SHOW JOBS, as CockroachDB's (the columns a changefeed job has)
JOBS_COLUMNS = (
    "job_id",
    "job_type",
    "description",
    "statement",
    "user_name",
    "status",
    "running_status",
    "created",
    "started",
    "finished",
    "modified",
    "fraction_completed",
    "error",
    "coordinator_id",
)
CRDB_INTERNAL_JOBS_COLUMNS = (*JOBS_COLUMNS[:12], "high_water_timestamp", *JOBS_COLUMNS[12:])
JOB_TYPE = "CHANGEFEED"

# Sink URI parameters whose values SHOW CHANGEFEED JOBS never prints.
_SECRET_WORDS = ("password", "secret", "token", "key", "cert", "auth", "credential")


@dataclass(frozen=True, slots=True)
class Lease:
    """``owner`` (``<node id>/<instance>``) runs the job until ``expires_ns`` (the HLC's
    wall time), renewing it while it runs."""

    owner: str
    expires_ns: int

    @property
    def node_id(self) -> str:
        return self.owner.split("/", 1)[0]

    @property
    def coordinator_id(self) -> int:
        """The number of the node running the job, CockroachDB's ``coordinator_id``
        (an INT8): ``n3`` is 3, and a store of its own (a node named by a token of its
        store, in no cluster) is node 1, as CockroachDB's single node is."""
        node = self.node_id
        return int(node[1:]) if node[:1] == "n" and node[1:].isdigit() else 1


@dataclass(frozen=True, slots=True)
class JobRecord:
    """A changefeed job. ``created`` is the CREATE statement's timestamp: relative option
    values (``cursor='-10s'``) stay anchored to it when options are parsed again.
    ``name`` is a named changefeed's name and ``database_id`` its database's
    (:mod:`feedkv.changefeed.feed_names`); ``None`` for one known by its id only."""

    id: int
    spec: ChangefeedSpec
    created: Timestamp
    status: str = RUNNING
    high_water: Timestamp | None = None
    running_status: str = ""
    error: str = ""
    lease: Lease | None = None
    started: Timestamp | None = None  # when a runner first took it
    finished: Timestamp | None = None  # when it ended (canceled, failed, succeeded)
    modified: Timestamp | None = None  # the last write of the record
    fraction_completed: float | None = None  # of a scan running now (None: none runs)
    scan_rows: int | None = None  # rows its runner's scans emitted (None: it does not say)
    scanned: bool = False  # its runner finished its initial scan (before the mark moves)
    name: str | None = None
    database_id: int | None = None
    # ALTER CHANGEFEED ... ADD ... WITH initial_scan: the tables added, scanned as of
    # added_scan_at (the high-water mark then) once the job runs from there again
    added_scans: tuple[int, ...] = ()
    added_scan_at: Timestamp | None = None

    def replace(self, **changes: Any) -> JobRecord:
        return dataclasses.replace(self, **changes)

    def pending_scans(self) -> frozenset[int]:
        """The added tables still to scan: while the high-water mark has not moved past
        the point they are scanned at (a run that stops before its scan is flushed
        leaves the mark there, and the next run scans them again)."""
        if self.added_scan_at is None or self.high_water != self.added_scan_at:
            return frozenset()
        return frozenset(self.added_scans)

    def resume_spec(self) -> ChangefeedSpec:
        """The spec to run from the recorded high-water mark: after it, with no scan
        but that of the tables added with ``initial_scan`` (:meth:`pending_scans`)."""
        spec = dataclasses.replace(self.spec, scan_tables=self.pending_scans())
        if self.high_water is None or self.high_water <= spec.start:
            return spec
        options = dataclasses.replace(spec.options, initial_scan="no")
        return dataclasses.replace(spec, start=self.high_water, options=options)

    def to_json(self, sealer: Sealer) -> bytes:
        """The record, its sink URI and options sealed (they may hold credentials)."""
        spec = self.spec
        context = _context(self.id)
        options = json.dumps([list(pair) for pair in spec.options.given])
        return json.dumps(
            {
                "id": self.id,
                "status": self.status,
                "created": str(self.created),
                "high_water": str(self.high_water) if self.high_water else None,
                "running_status": self.running_status,
                "error": self.error,
                "lease": [self.lease.owner, self.lease.expires_ns] if self.lease else None,
                "started": _text(self.started),
                "finished": _text(self.finished),
                "modified": _text(self.modified),
                "fraction_completed": self.fraction_completed,
                "scan_rows": self.scan_rows,
                "scanned": self.scanned,
                "name": [self.database_id, self.name] if self.name is not None else None,
                **(
                    {"added_scans": [list(self.added_scans), str(self.added_scan_at)]}
                    if self.added_scan_at is not None
                    else {}
                ),
                "spec": {
                    "targets": [
                        [t.table_id, t.family, *(b.hex() for b in t.bounds or ())]
                        for t in spec.targets
                    ],
                    "topics": {str(k): v for k, v in spec.topics.items()},
                    "options": sealer.seal(options, context),
                    "start": str(spec.start),
                    "sink_uri": sealer.seal(spec.sink_uri, context) if spec.sink_uri else None,
                    "description": spec.description,
                    "user": spec.user,
                    "query": spec.query,
                    "database_id": spec.database_id,
                },
            }
        ).encode()

    @classmethod
    def from_json(cls, data: bytes, sealer: Sealer | None) -> JobRecord:
        """``sealer``: the cluster's (``None``: it has none yet, so nothing is sealed)."""
        d = json.loads(data)
        s = d["spec"]
        created = Timestamp.parse(d["created"])
        context = _context(d["id"])
        options = s["options"]
        if isinstance(options, str):
            options = json.loads(_open(sealer, options, context))
        sink_uri = s["sink_uri"]
        if isinstance(sink_uri, str) and sink_uri.startswith(SEALED_PREFIX):
            sink_uri = _open(sealer, sink_uri, context)
        start = Timestamp.parse(s["start"])
        # NB: ALTER CHANGEFEED ... SET cursor may move the start past the creation: the
        # cursor is then no more "in the future" than it was when it was set.
        anchor = max(created, start)
        spec = ChangefeedSpec(
            targets=tuple(
                Target(t[0], t[1], (bytes.fromhex(t[2]), bytes.fromhex(t[3])) if t[2:] else None)
                for t in s["targets"]
            ),
            topics={int(k): v for k, v in s["topics"].items()},
            options=parse_options(
                [tuple(pair) for pair in options], now=anchor, query=s["query"] is not None
            ),
            start=start,
            sink_uri=sink_uri,
            description=s["description"],
            user=s["user"],
            query=s["query"],
            database_id=s.get("database_id"),
        )
        lease = Lease(d["lease"][0], d["lease"][1]) if d["lease"] else None
        database_id, name = d.get("name") or (None, None)
        added_scans, added_scan_at = d.get("added_scans") or ((), None)
        return cls(
            id=d["id"],
            spec=spec,
            created=created,
            status=d["status"],
            high_water=Timestamp.parse(d["high_water"]) if d["high_water"] else None,
            running_status=d["running_status"],
            error=d["error"],
            lease=lease,
            # NB: .get: records written before these fields existed have none
            started=_parsed(d.get("started")),
            finished=_parsed(d.get("finished")),
            modified=_parsed(d.get("modified")),
            fraction_completed=d.get("fraction_completed"),
            scan_rows=d.get("scan_rows"),
            scanned=bool(d.get("scanned", False)),
            name=name,
            database_id=database_id,
            added_scans=tuple(added_scans),
            added_scan_at=_parsed(added_scan_at),
        )


def _text(ts: Timestamp | None) -> str | None:
    return str(ts) if ts is not None else None


def _parsed(text: str | None) -> Timestamp | None:
    return Timestamp.parse(text) if text is not None else None


def _context(job_id: int) -> bytes:
    return f"job/{job_id}".encode()


def _sealer(reader: catalog.Reader) -> Sealer | None:
    """What opens the job records ``reader`` reads: the key this process holds (a
    secure one's, from its certs directory), also opening values sealed with the
    store's own key (an insecure node's); ``None``: neither exists yet, so no record
    holds a sealed value."""
    held = reader.sealer
    if isinstance(held, KeyMissing):
        raise held.error()
    stored = reader.get(catalog.SEALING_KEY)
    if held is None:
        return Sealer(stored, source="the store") if stored is not None else None
    return held.with_older(stored)


def _sealer_for_writing(txn: Txn) -> Sealer:
    """What seals the records ``txn`` writes: the key this process holds; an insecure
    one's is the store's, made in ``txn`` by the first record."""
    held = txn.sealer
    if isinstance(held, KeyMissing):
        raise held.error()
    if held is not None:
        return held
    key = txn.get(catalog.SEALING_KEY)
    if key is None:
        key = new_key()
        txn.put(catalog.SEALING_KEY, key)
    return Sealer(key, source="the store")


def _open(sealer: Sealer | None, text: str, context: bytes) -> str:
    if sealer is None:
        kid = sealed_key_id(text)
        raise InvalidArgumentError(
            f"a changefeed job's secrets are sealed with the secrets key {kid}, but this "
            "node is insecure (no certs directory, so no key): start it with --certs-dir "
            f"naming the directory whose {KEY_FILE} sealed them"
            if kid is not None
            else "a job record holds sealed values but the store has no key"
        )
    return sealer.open(text, context)


def check_secrets(reader: catalog.Reader) -> None:
    """Check that every job record's sealed values name a key this process holds, so a
    node started with the wrong certs directory (or none) refuses to start instead of
    failing its jobs; InvalidArgumentError names the key it lacks."""
    start, end = catalog.job_span()
    records = reader.scan(start, end)
    if not records:
        return
    sealer = _sealer(reader)
    for kv in records:
        spec = json.loads(kv.value)["spec"]
        for value in (spec["options"], spec["sink_uri"]):
            if not isinstance(value, str) or not value.startswith(SEALED_PREFIX):
                continue
            if sealer is None:
                _open(sealer, value, b"")  # raises, naming the key the value needs
            kid = sealed_key_id(value)
            if sealer is not None and kid is not None and not sealer.holds(kid):
                raise InvalidArgumentError(sealer.missing(kid))


def get_job(reader: catalog.Reader, job_id: int) -> JobRecord | None:
    data = reader.get(catalog.job_key(job_id))
    return JobRecord.from_json(data, _sealer(reader)) if data is not None else None


def existing_job(
    record: JobRecord | None, job_id: int, reader: catalog.Reader | None = None
) -> JobRecord:
    """``record``, read as changefeed job ``job_id``: it must exist (SQLSTATE 42704).
    With ``reader``, an id of a schema-change job (which SHOW JOBS lists too) is refused
    as what it is (0A000), not as a job that does not exist."""
    if record is None and reader is not None:
        for other in list_schema_jobs(reader):
            if other.id == job_id:
                raise SQLError(
                    "0A000",
                    f"job {job_id} is a {other.job_type} job: this statement applies to "
                    "changefeed jobs only",
                )
    if record is None:
        raise SQLError("42704", f"job with ID {job_id} does not exist")
    return record


def list_jobs(reader: catalog.Reader) -> list[JobRecord]:
    """Every job, oldest first."""
    start, end = catalog.job_span()
    sealer = _sealer(reader)
    return [JobRecord.from_json(kv.value, sealer) for kv in reader.scan(start, end)]


def put_job(txn: Txn, record: JobRecord, *, watching: bool | None = None) -> None:
    """Write ``record``, stamped ``modified`` (and ``started`` or ``finished`` when this
    write gives it its first runner or ends it) at the transaction's timestamp; with
    ``watching``, also record (or forget) that it watches its tables, which TRUNCATE
    checks."""
    now = txn.read_ts or Timestamp(time.time_ns())
    record = record.replace(modified=now)
    if record.started is None and record.lease is not None:
        record = record.replace(started=now)
    if record.status in TERMINAL:
        record = record.replace(finished=record.finished or now, fraction_completed=None)
    txn.put(catalog.job_key(record.id), record.to_json(_sealer_for_writing(txn)))
    if watching is not None:
        for target in record.spec.targets:
            catalog.set_changefeed_watch(txn, target.table_id, record.id, watching=watching)


def delete_job(txn: Txn, record: JobRecord) -> None:
    """Forget ``record``: its record, and that it watches its tables."""
    for target in record.spec.targets:
        catalog.set_changefeed_watch(txn, target.table_id, record.id, watching=False)
    txn.delete(catalog.job_key(record.id))


HOLD_EXPIRES_AFTER_NS = 24 * 3600 * 1_000_000_000


@dataclass(frozen=True, slots=True)
class HistoryHold:
    """A stream's hold on ``table_id``'s history from ``since`` on, until ``expires``
    (wall nanoseconds) unless renewed."""

    id: str
    table_id: int
    since: Timestamp
    expires: int

    @classmethod
    def renewed(
        cls,
        hold_id: str,
        table_id: int,
        since: Timestamp,
        now: Timestamp,
        after_ns: int = HOLD_EXPIRES_AFTER_NS,
    ) -> HistoryHold:
        """The hold as placed (or renewed) at ``now``: it lapses ``after_ns`` later."""
        return cls(hold_id, table_id, since, now.wall + after_ns)

    def put(self, txn: Txn) -> None:
        value = {
            "id": self.id,
            "table_id": self.table_id,
            "since": str(self.since),
            "expires": self.expires,
        }
        txn.put(catalog.hold_key(self.id), json.dumps(value).encode())

    @classmethod
    def from_json(cls, raw: bytes) -> HistoryHold:
        v = json.loads(raw)
        return cls(v["id"], v["table_id"], Timestamp.parse(v["since"]), v["expires"])


def release_hold(txn: Txn, hold_id: str) -> None:
    txn.delete(catalog.hold_key(hold_id))


def _holds(reader: catalog.Reader) -> list[HistoryHold]:
    start, end = catalog.hold_span()
    return [HistoryHold.from_json(kv.value) for kv in reader.scan(start, end)]


def protection_expired(record: JobRecord, now: Timestamp) -> bool:
    """Whether a paused job's protection of its history has lapsed under its
    ``gc_protect_expires_after``: it has been paused (its record unchanged) for longer
    than that. CockroachDB then lets the data go and cancels the job."""
    after = record.spec.options.gc_protect_expires_after
    if after is None or record.status != PAUSED:
        return False
    since = record.modified or record.created
    return now.wall - since.wall > after * 1e9


def protected_spans(reader: catalog.Snapshot) -> list[tuple[Span, Timestamp]]:
    """What garbage collection must keep as of ``reader``'s timestamp: for the jobs that
    have not ended (paused ones too, until their ``gc_protect_expires_after`` lapses),
    each target table's rows and descriptor history from the job's high-water mark (or
    its start) on; for each hold that has not lapsed, its table's from its timestamp
    on."""
    held: list[tuple[int, Timestamp]] = []
    for record in list_jobs(reader):
        if record.status in TERMINAL or protection_expired(record, reader.ts):
            continue
        since = record.high_water or record.spec.start
        held += [(target.table_id, since) for target in record.spec.targets]
        database = (
            catalog.get_descriptor(reader, record.spec.database_id)
            if record.spec.database_id is not None
            else None
        )
        if isinstance(database, DatabaseDescriptor):  # FOR DATABASE: its tables of now too
            held += [(desc.id, since) for desc in catalog.list_tables(reader, database)]
    held += [(h.table_id, h.since) for h in _holds(reader) if h.expires > reader.ts.wall]
    spans = []
    for table_id, since in held:
        spans.append((Target(table_id).span, since))
        spans.append((Span.for_key(catalog.descriptor_key(table_id)), since))
    return spans


def show_row(record: JobRecord, reader: catalog.Reader) -> tuple[Any, ...]:
    """``record`` as a row of :data:`SHOW_COLUMNS`."""
    spec = record.spec
    names = []
    for target in spec.targets:
        found = table_names(reader, target.table_id)
        names.append(f"{found[0]}.public.{found[1]}" if found else f"[{target.table_id}]")
    high_water = record.high_water
    return (
        record.id,
        spec.description,
        spec.user,
        record.status,
        record.running_status,
        _time(record.created),
        _time(record.started),
        _time(record.finished),
        _time(record.modified),
        logical_decimal(high_water) if high_water else None,
        _time(high_water),
        record.error,
        redacted(spec.sink_uri or ""),
        Array(tuple(names), ColumnType(Kind.STRING)),  # STRING[], as CockroachDB's
        _joined(sink_topics_of(spec, reader)),
        spec.options.format,
        record.name,
    )


def sink_topics_of(spec: ChangefeedSpec, reader: catalog.Reader) -> tuple[str, ...] | None:
    """The topics of its sink that the changefeed ``spec`` sends its tables' rows to (a
    topic of each column family when families are split), as its sink names them;
    ``None`` for a sink without topics (or a changefeed without a sink)."""
    if spec.sink_uri is None:
        return None
    try:
        uri = parse_sink_uri(spec.sink_uri, spec.options)
    except (InvalidArgumentError, SQLError):  # checked when made: only a later change
        return None
    return sink_topics(uri, resolved_topics(spec, lambda t: catalog.table_by_id(reader, t)))


def _joined(topics: tuple[str, ...] | None) -> str | None:
    return ",".join(topics) if topics is not None else None


def jobs_row(record: JobRecord, *, high_water: bool = False) -> tuple[Any, ...]:
    """``record`` as a row of :data:`JOBS_COLUMNS` (``high_water``: of
    :data:`CRDB_INTERNAL_JOBS_COLUMNS`)."""
    spec = record.spec
    lease = record.lease
    row = (
        record.id,
        JOB_TYPE,
        spec.description,
        spec.description,
        spec.user,
        record.status,
        record.running_status,
        _time(record.created),
        _time(record.started),
        _time(record.finished),
        _time(record.modified),
        record.fraction_completed,
        record.error,
        lease.coordinator_id if lease is not None else None,
    )
    if not high_water:
        return row
    mark = logical_decimal(record.high_water) if record.high_water else None
    return (*row[:12], mark, *row[12:])


def running_status(high_water: Timestamp) -> str:
    """A running changefeed's ``running_status``, as CockroachDB words it:
    ``running: resolved=<seconds>.<nanoseconds>,<logical>`` (an HLC timestamp as
    CockroachDB prints one)."""
    seconds, nanos = divmod(high_water.wall, 1_000_000_000)
    return f"running: resolved={seconds}.{nanos:09d},{high_water.logical}"


def _time(ts: Timestamp | None) -> datetime.datetime | None:
    """A TIMESTAMPTZ column's value of ``ts`` (microseconds, as PostgreSQL keeps them)."""
    if ts is None:
        return None
    return datetime.datetime.fromtimestamp(ts.wall / 1e9, tz=datetime.UTC)


def table_names(reader: catalog.Reader, table_id: int) -> tuple[str, str] | None:
    """The names of table ``table_id`` and of its database (``None``: it was dropped)."""
    desc = catalog.table_by_id(reader, table_id)
    database = catalog.get_descriptor(reader, desc.database_id) if desc else None
    if desc is None or desc.dropped or database is None:
        return None
    return database.name, desc.name


def is_secret(name: str) -> bool:
    """Whether a sink parameter or an option named ``name`` holds a secret."""
    return any(word in name.lower() for word in _SECRET_WORDS)


def redacted(uri: str) -> str:
    """``uri`` with the values of secret-looking query parameters (passwords, keys,
    tokens, certificates) and any password in its authority replaced by ``redacted``."""
    parts = urlsplit(uri)
    params = [
        (name, "redacted" if is_secret(name) else value)
        for name, value in parse_qsl(parts.query, keep_blank_values=True)
    ]
    netloc = parts.netloc
    if parts.password:
        netloc = netloc.replace(f":{parts.password}@", ":redacted@", 1)
    out = urlunsplit(parts._replace(netloc=netloc, query=urlencode(params, safe="/:")))
    written = f"{parts.scheme}://"
    if uri.startswith(written) and not out.startswith(written):
        # NB: urlunsplit drops an empty authority for schemes it does not know
        # (delta:///dir came out as delta:/dir)
        out = written + out[len(parts.scheme) + 1 :]
    return out
