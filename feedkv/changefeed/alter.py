"""``ALTER CHANGEFEED``: a paused job's targets, options and sink changed, checked as
strictly as a new changefeed's (:mod:`feedkv.changefeed.create`). An added table is
followed from the job's high-water mark.

Two changes are the CDC design's: ``INTO '<sink>'`` moves the job to another sink (its
options must suit it; the job resumes there from its high-water mark), and ``SET cursor
= '<ts>'`` moves the high-water mark itself, back or forward: resumed, the job emits
every change after the cursor and scans nothing. A cursor below the garbage-collection
threshold of a watched table is refused, naming the threshold. ``initial_scan`` cannot
change, nor can ``cursor`` be unset. ``end_time`` can be neither set nor unset, as in
CockroachDB (its ``AlterChangefeedUnsupportedOptions``), with its message.

``ADD t WITH initial_scan`` (CockroachDB's form; ``initial_scan = 'yes'`` too) scans the
added table as of the job's high-water mark when it resumes, before it goes on: the
table's rows then, followed by its changes after. Without it, an added table is followed
from the high-water mark with no scan, as in CockroachDB.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from feedkv.changefeed.changefeed import ChangefeedSpec
from feedkv.changefeed.create import (
    check_execution_locality,
    check_exists_at,
    check_history,
    check_not_into_watched,
    require_changefeed_privilege,
    require_explicit_access,
    resolve_table,
    topic_name,
    watched_targets,
)
from feedkv.changefeed.database import database_tables
from feedkv.changefeed.feed_names import create_statement
from feedkv.changefeed.jobs import (
    PAUSED,
    JobRecord,
    existing_job,
    get_job,
    put_job,
    table_names,
)
from feedkv.changefeed.options import check_option_name, option_error, parse_options
from feedkv.changefeed.sink import parse_sink_uri, sink_defaults
from feedkv.errors import SQLError
from feedkv.kv.txn import Txn
from feedkv.sql import catalog
from feedkv.sql import statements as st
from feedkv.util.locality import Locality

if TYPE_CHECKING:
    from feedkv.sql.session import Session

__all__ = ["alter", "altered_spec"]

# Options that say where a changefeed starts: ALTER CHANGEFEED cannot change them.
_FIXED_OPTIONS = frozenset({"cursor", "initial_scan", "no_initial_scan", "initial_scan_only"})
_SCAN_OPTIONS = ("initial_scan", "no_initial_scan", "initial_scan_only")
# Options CockroachDB refuses to alter besides those, answered with its words.
_UNALTERABLE = frozenset({"end_time"})


def alter(txn: Txn, job_id: int, statement: st.AlterChangefeed, session: Session) -> None:
    """Apply ``statement`` to job ``job_id`` (the one it names), which must be paused."""
    record = existing_job(get_job(txn, job_id), job_id, txn)
    if record.status != PAUSED:
        raise SQLError(
            "55000",
            f"job {record.id} is {record.status}: ALTER CHANGEFEED changes paused jobs "
            f"only (PAUSE JOB {record.id} first)",
        )
    spec = altered_spec(record, statement, session, txn)
    old = {t.table_id for t in record.spec.targets}
    new = {t.table_id for t in spec.targets}
    for table_id in old - new:
        catalog.set_changefeed_watch(txn, table_id, record.id, watching=False)
    altered = record.replace(spec=spec)
    if any(name == "cursor" for name, _ in statement.set_options):
        for target in spec.targets:
            names = table_names(txn, target.table_id)
            name = names[1] if names else "?"
            check_history(session.db, target, name, spec.start)
            check_exists_at(session.db, target.table_id, name, spec.start)
        altered = altered.replace(high_water=spec.start)  # resumed, it runs from there
    altered = _with_scans(altered, record, statement, session, txn)
    description = create_statement(altered, txn)  # with its name, if it has one
    put_job(
        txn, altered.replace(spec=dataclasses.replace(spec, description=description)), watching=True
    )


def _with_scans(
    altered: JobRecord, record: JobRecord, statement: st.AlterChangefeed, session: Session, txn: Txn
) -> JobRecord:
    """``altered`` with the tables to scan when it resumes: those added now ``WITH
    initial_scan`` and those added so before whose scan has not run, less the tables no
    longer watched; each is scanned as of the high-water mark it resumes from."""
    scans = set(record.pending_scans())
    for written in statement.scanned:
        _database, desc = resolve_table(session, txn, written)
        scans.add(desc.id)
    scans &= {t.table_id for t in altered.spec.targets}
    if not scans:
        return altered.replace(added_scans=(), added_scan_at=None)
    return altered.replace(added_scans=tuple(sorted(scans)), added_scan_at=altered.high_water)


def altered_spec(
    record: JobRecord, statement: st.AlterChangefeed, session: Session, txn: Txn
) -> ChangefeedSpec:
    """``record``'s spec with ``statement``'s changes, validated like a new one (its
    description is :func:`alter`'s to redo)."""
    spec = record.spec
    if (statement.add or statement.drop) and spec.database_id is not None:
        raise option_error(
            "a FOR DATABASE changefeed watches every table of its database: it takes no ADD or DROP"
        )
    if (statement.add or statement.drop) and spec.query is not None:
        raise option_error(
            "a CDC query changefeed watches its query's table: it takes no ADD or DROP"
        )
    if (statement.add or statement.drop) and record.high_water is None:
        raise SQLError(
            "55000",
            f"job {record.id} has not finished its initial scan; it can gain or lose tables "
            "once it has",
        )
    given = dict(spec.options.given)
    setting = [name for name, _ in statement.set_options]
    for name in statement.unset:
        check_option_name(name)  # NB: SET's names are checked as they are parsed
    for name in [*statement.unset, *setting]:
        if name == "cursor" and name not in statement.unset:
            continue  # SET cursor moves the high-water mark
        if name in _UNALTERABLE:
            raise option_error(f'cannot alter option "{name}"')
        if name in _FIXED_OPTIONS:
            raise option_error(
                f"option {name} says where the changefeed started: it cannot be altered"
            )
        if name == "lake_mode":
            raise option_error(
                "option lake_mode says what the lake tables hold: it cannot be altered; "
                "create a changefeed into another lake path instead"
            )
    for name in statement.unset:
        given.pop(name, None)
    given.update(statement.set_options)
    start = spec.start
    if "cursor" in setting:
        moved = parse_options([("cursor", given["cursor"])], now=session.db.now()).cursor
        start = moved if moved is not None else start
        given["cursor"] = str(start)  # absolute: '-10s' meant the ALTER's time
        for name in _SCAN_OPTIONS:
            given.pop(name, None)
    sink_uri = statement.sink if statement.sink is not None else spec.sink_uri or ""
    # NB: a cursor moved past the job's creation is not "in the future" (jobs.from_json)
    anchor = max(record.created, start)
    options = sink_defaults(
        sink_uri, parse_options(given.items(), now=anchor, query=spec.query is not None)
    )
    sink = parse_sink_uri(sink_uri, options)  # the sink must (still) accept them
    if "execution_locality" in setting and options.execution_locality is not None:
        check_execution_locality(session.db, Locality(options.execution_locality))
    if statement.sink is not None:
        require_explicit_access(session, txn, sink)
    if statement.sink is not None and sink.kind.whole_rows and spec.query is not None:
        raise option_error(
            f"the {sink.kind.name} sink keeps whole rows by primary key: a CDC query "
            "changefeed cannot move into it"
        )
    targets = list(spec.targets)
    for written in statement.drop:
        _database, desc = resolve_table(session, txn, written)
        for dropped in watched_targets(desc, written):
            if dropped not in targets:
                raise option_error(f"table {written.table} is not a target of job {record.id}")
            targets.remove(dropped)
    for written in statement.add:
        _database, desc = resolve_table(session, txn, written)
        require_changefeed_privilege(session, txn, desc, "CHANGEFEED")
        for added in watched_targets(desc, written):
            if added in targets:
                raise option_error(f"table {written.table} is already a target of job {record.id}")
            targets.append(added)
    if spec.database_id is not None:  # FOR DATABASE: the tables of the moment
        found = database_tables(session.db, spec.database_id, options, session.db.now())
        if found is None:
            raise option_error(f"the database of job {record.id} was dropped")
        targets, topics = list(found[0]), found[1]
    else:
        if not targets:
            raise option_error(
                f"job {record.id} would watch no table; CANCEL JOB {record.id} instead"
            )
        topics = {}
        for target in targets:
            names = table_names(txn, target.table_id)
            if names is None:
                raise option_error(f"table [{target.table_id}] of job {record.id} was dropped")
            topics[target.table_id] = topic_name(*names, options)
    if statement.sink is not None:
        check_not_into_watched(sink, targets, topics)
    return dataclasses.replace(
        spec,
        targets=tuple(targets),
        topics=topics,
        options=options,
        start=start,
        sink_uri=sink_uri or None,
    )
