"""Schema-change jobs: the rows ``SHOW JOBS`` and ``crdb_internal.jobs`` list for a
``DROP TABLE`` or a ``TRUNCATE``, as CockroachDB's.

CockroachDB runs such a statement as a ``SCHEMA CHANGE`` job (it has ``succeeded`` once
the statement committed) and leaves a ``SCHEMA CHANGE GC`` job that waits for the GC TTL
before the table's data is cleared (``running``, its running status ``waiting for MVCC
GC``). feedkv does the same work inside the statement's transaction (the rows are
deleted as MVCC history that the store's GC removes once it is older than the GC TTL),
so its records say what happened: the schema change ``succeeded`` when the statement
committed, and the GC job is ``running`` until the table's GC TTL has passed since then,
after which nothing of the old rows can be read any more (a read in the past that far
back is refused) and it has ``succeeded``. The TTL is the table's zone's
``gc.ttlseconds`` (else the default zone's, else the store's default, 4 hours), as the
store's GC reads it (:func:`feedkv.sql.catalog.zone_gc_ttls`); times are the cluster's
HLC wall time, the clock every node's GC measures against.

A record (``F1 "schemajob" id`` in the catalog, JSON) is written in the statement's own
transaction, so a statement that rolls back leaves no job. That transaction also deletes
the records of jobs finished more than ``jobs.retention_time`` ago (CockroachDB's
setting, 14 days by default), so they do not pile up without bound.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass
from typing import Any

from feedkv.errors import SQLError
from feedkv.kv.txn import Txn
from feedkv.sql import catalog
from feedkv.storage.gc import DEFAULT_GC_TTL_NS

__all__ = [
    "DEFAULT_RETENTION_NS",
    "GC_RUNNING_STATUS",
    "RETENTION_SETTING",
    "SCHEMA_CHANGE",
    "SCHEMA_CHANGE_GC",
    "SchemaJob",
    "list_schema_jobs",
    "parse_retention_ns",
    "prune_schema_jobs",
    "record_drop",
]

SCHEMA_CHANGE = "SCHEMA CHANGE"
SCHEMA_CHANGE_GC = "SCHEMA CHANGE GC"
GC_RUNNING_STATUS = "waiting for MVCC GC"  # CockroachDB's words for a GC job's wait
RETENTION_SETTING = "jobs.retention_time"
DEFAULT_RETENTION_NS = 14 * 24 * 3600 * 1_000_000_000  # CockroachDB's jobs.retention_time


@dataclass(frozen=True, slots=True)
class SchemaJob:
    """One job. ``created_ns``: when the statement ran (HLC wall nanoseconds); a GC
    job's ``gc_after_ns`` is when its data is older than the GC TTL (``None``: a schema
    change, finished when it committed)."""

    id: int
    job_type: str
    description: str
    statement: str
    user: str
    created_ns: int
    gc_after_ns: int | None = None

    def status(self, now_ns: int) -> str:
        if self.gc_after_ns is not None and now_ns < self.gc_after_ns:
            return "running"
        return "succeeded"

    def finished_before(self, ns: int) -> bool:
        """Whether the job had finished before ``ns``."""
        return (self.gc_after_ns or self.created_ns) < ns

    def row(self, now_ns: int, *, high_water: bool = False) -> tuple[Any, ...]:
        """A row of the jobs columns (``job_id`` ... ``coordinator_id``, as
        :data:`feedkv.changefeed.jobs.JOBS_COLUMNS`); ``high_water``: with
        ``crdb_internal.jobs``' ``high_water_timestamp`` (NULL: none) after
        ``fraction_completed``."""
        status = self.status(now_ns)
        done = status == "succeeded"
        finished = (self.gc_after_ns or self.created_ns) if done else None
        row = (
            self.id,
            self.job_type,
            self.description,
            self.statement,
            self.user,
            status,
            None if done else GC_RUNNING_STATUS,
            _time(self.created_ns),
            _time(self.created_ns),
            _time(finished),
            _time(finished or self.created_ns),
            1.0 if done else 0.0,
            "",
            None,
        )
        return (*row[:12], None, *row[12:]) if high_water else row

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "id": self.id,
                "job_type": self.job_type,
                "description": self.description,
                "statement": self.statement,
                "user": self.user,
                "created_ns": self.created_ns,
                "gc_after_ns": self.gc_after_ns,
            }
        ).encode()

    @staticmethod
    def from_json(raw: bytes) -> SchemaJob:
        record = json.loads(raw)
        return SchemaJob(
            record["id"],
            record["job_type"],
            record["description"],
            record["statement"],
            record["user"],
            record["created_ns"],
            record.get("gc_after_ns"),
        )


def record_drop(
    txn: Txn,
    ids: tuple[int, int],
    description: str,
    statement: str,
    user: str,
    *,
    now_ns: int,
    gc_ttl_ns: int | None,
) -> None:
    """Record, in ``txn`` (the DROP TABLE or TRUNCATE's), its schema change (``ids[0]``,
    succeeded) and the GC job that clears the old rows (``ids[1]``) after ``gc_ttl_ns``
    (the table's zone's; ``None``: the store's default). ``description``: the statement
    on the table, its name qualified (``DROP TABLE test.public.a``); ``now_ns``: the HLC
    wall time. Records of jobs finished more than ``jobs.retention_time`` before
    ``now_ns`` are deleted in the same transaction."""
    ttl = DEFAULT_GC_TTL_NS if gc_ttl_ns is None else gc_ttl_ns
    change = SchemaJob(ids[0], SCHEMA_CHANGE, description, statement, user, now_ns)
    gc = SchemaJob(
        ids[1],
        SCHEMA_CHANGE_GC,
        f"GC for {description}",
        statement,
        user,
        now_ns,
        gc_after_ns=now_ns + ttl,
    )
    prune_schema_jobs(txn, now_ns - retention_ns(txn))
    for job in (change, gc):
        txn.put(catalog.schema_job_key(job.id), job.to_json())


def retention_ns(reader: catalog.Reader) -> int:
    """``jobs.retention_time``: how long a finished job's record is kept."""
    raw = catalog.get_setting(reader, RETENTION_SETTING)
    if raw is None:
        return DEFAULT_RETENTION_NS
    try:
        return parse_retention_ns(raw)
    except SQLError:
        return DEFAULT_RETENTION_NS  # NB: refused when set; an older value that no longer parses


def parse_retention_ns(value: str) -> int:
    """A ``jobs.retention_time`` value (``336h``, ``10m``); SQLSTATE 22023 when it is
    not a positive duration."""
    return catalog.setting_duration_ns(RETENTION_SETTING, value)


def prune_schema_jobs(txn: Txn, before_ns: int) -> int:
    """Delete the records of jobs that finished before ``before_ns``; returns how many."""
    pruned = 0
    for job in list_schema_jobs(txn):
        if job.finished_before(before_ns):
            txn.delete(catalog.schema_job_key(job.id))
            pruned += 1
    return pruned


def list_schema_jobs(reader: catalog.Reader) -> list[SchemaJob]:
    """Every schema-change job, oldest first."""
    start, end = catalog.schema_job_span()
    return [SchemaJob.from_json(kv.value) for kv in reader.scan(start, end)]


def _time(ns: int | None) -> datetime.datetime | None:
    if ns is None:
        return None
    return datetime.datetime.fromtimestamp(ns / 1e9, tz=datetime.UTC)
