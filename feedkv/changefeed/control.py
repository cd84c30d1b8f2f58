"""``PAUSE JOB``, ``RESUME JOB`` and ``CANCEL JOB``: a request recorded on the job.

A request moves the job's status in a transaction; the registry running the job
(:mod:`feedkv.changefeed.registry`) sees it and stops the job, which then records that
it paused or was canceled. A job no runner holds moves at once. The statement waits up
to :data:`CONTROL_WAIT_S` for the runner to stop.
"""

from __future__ import annotations

from feedkv.changefeed.jobs import (
    CANCEL_REQUESTED,
    CANCELED,
    PAUSE_REQUESTED,
    PAUSED,
    RUNNING,
    JobRecord,
    existing_job,
    get_job,
    put_job,
)
from feedkv.errors import SQLError
from feedkv.kv.txn import Txn

__all__ = ["CONTROL_WAIT_S", "REQUESTED", "request", "requested"]

CONTROL_WAIT_S = 30.0  # how long PAUSE / CANCEL JOB wait for the runner to stop
REQUESTED = frozenset({PAUSE_REQUESTED, CANCEL_REQUESTED})

_DONE = {"pause": "paused", "resume": "resumed", "cancel": "canceled"}


def request(txn: Txn, job_id: int, action: str) -> None:
    """Record ``action`` (``pause``, ``resume`` or ``cancel``) on job ``job_id``."""
    record = existing_job(get_job(txn, job_id), job_id, txn)
    status, watching = requested(record, action)
    if status != record.status:
        updated = record.replace(status=status)
        if action == "resume":
            updated = updated.replace(error="", running_status="")
        elif status == CANCELED:
            # NB: no runner holds the job to clear it, as one does when it stops: a
            # canceled job said "paused" (or "paused on error: ...") otherwise
            updated = updated.replace(running_status="")
        put_job(txn, updated, watching=watching)


def requested(record: JobRecord, action: str) -> tuple[str, bool | None]:
    """The status ``action`` moves ``record`` to, and whether it then watches its
    tables (``None``: unchanged). Raises when the action does not apply."""
    status = record.status
    held = record.lease is not None  # a runner has it, or had it and will be found dead
    if action == "pause":
        if status in (PAUSED, PAUSE_REQUESTED):
            return status, None
        if status == RUNNING:
            return (PAUSE_REQUESTED if held else PAUSED), None
    elif action == "resume":
        if status in (RUNNING, PAUSED):
            return RUNNING, None
    elif action == "cancel":
        if status in (RUNNING, PAUSED, PAUSE_REQUESTED):
            return (CANCEL_REQUESTED, None) if held else (CANCELED, False)
        if status == CANCEL_REQUESTED:
            return status, None
    raise SQLError("55000", f"job {record.id} is {status}: it cannot be {_DONE[action]}")
