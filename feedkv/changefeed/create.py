"""Planning ``CREATE CHANGEFEED`` and ``EXPERIMENTAL CHANGEFEED``: from a statement to
the spec of a changefeed, checked whole.

:func:`plan_changefeed` checks everything before anything starts: the user is an admin,
or holds CHANGEFEED on each table (SELECT for a sinkless changefeed) and names a sink
with credentials of its own (:func:`implicit_access`); the tables (and families) exist
as of the statement's timestamp, every option and the sink URI are valid together. A
failure raises :class:`~feedkv.errors.SQLError` and creates nothing. A target is a
table, one of its families, a range of its primary keys (``VALUES FROM (a) TO (b)``) or
one of its partitions (``PARTITION p``): each becomes a
:class:`~feedkv.changefeed.rows.Target` whose span is all the feed reads of it
(:func:`watched_targets`). ``FOR DATABASE db`` watches the tables of a database, as they
come and go (:mod:`feedkv.changefeed.database`). The service that then starts the
changefeed or its job is :mod:`feedkv.changefeed.service`; ``ALTER CHANGEFEED`` checks a
job's new spec with the same rules (:mod:`feedkv.changefeed.alter`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlglot import exp

from feedkv.changefeed.changefeed import ChangefeedSpec
from feedkv.changefeed.database import topic_name as database_topic_name
from feedkv.changefeed.headers import check_headers_column
from feedkv.changefeed.jobs import is_secret, redacted
from feedkv.changefeed.message_key import check_key_column
from feedkv.changefeed.options import ChangefeedOptions, option_error, parse_options
from feedkv.changefeed.query import CDCQuery
from feedkv.changefeed.rows import Target
from feedkv.changefeed.sink import (
    SINK_OPTIONS,
    SinkURI,
    local_paths,
    parse_sink_uri,
    sink_defaults,
)
from feedkv.errors import BatchTimestampBeforeGCError, SQLError
from feedkv.kv.db import KVClient
from feedkv.sql import catalog
from feedkv.sql import statements as st
from feedkv.sql.descriptor import DatabaseDescriptor, TableDescriptor, quote_name
from feedkv.sql.expr import Context, Scope, compile_expr
from feedkv.sql.row_codec import row_prefix
from feedkv.sql.types import coerce
from feedkv.util.hlc import Timestamp
from feedkv.util.locality import Locality

if TYPE_CHECKING:
    from feedkv.sql.session import Session

__all__ = [
    "Plan",
    "check_execution_locality",
    "check_history",
    "check_not_into_watched",
    "changefeed_text",
    "implicit_access",
    "options_text",
    "plan_changefeed",
    "is_admin",
    "require_admin",
    "require_changefeed_privilege",
    "require_explicit_access",
    "resolve_table",
    "sql_literal",
    "topic_name",
    "watched_target",
    "watched_targets",
]


@dataclass(frozen=True)
class Plan:
    spec: ChangefeedSpec
    sink: SinkURI | None
    now: Timestamp  # the statement's timestamp


def plan_changefeed(statement: st.CreateChangefeed, session: Session) -> Plan:
    """Validate ``statement`` as ``session``'s user; see the module docstring."""
    if session.in_transaction:
        raise SQLError(
            "25001", "CREATE CHANGEFEED cannot be used inside a transaction; COMMIT first"
        )
    db = session.db
    now = db.now()
    snapshot = catalog.Snapshot(db, now)
    admin = is_admin(session, snapshot)
    options = parse_options(statement.options, now=now, query=statement.query is not None)
    if options.execution_locality is not None:
        check_execution_locality(db, Locality(options.execution_locality))
    query = None
    if statement.query is not None:
        query = CDCQuery(statement.query.text)
    targets: list[Target] = []
    topics: dict[int, str] = {}
    database_id = None
    if statement.database is not None:
        if not admin:
            require_admin(session, snapshot, "create a changefeed FOR DATABASE")
        database = session.resolve_database(snapshot, statement.database)
        database_id = database.id
        for desc in catalog.list_tables(snapshot, database):
            targets.append(Target(desc.id))
            check_key_column(desc, options)
            topics[desc.id] = topic_name(database.name, desc.name, options)
            if options.cursor is not None:
                check_history(db, Target(desc.id), desc.name, options.cursor)
    for written in statement.targets:
        database, desc = resolve_table(session, snapshot, written)
        if not admin:
            need = "CHANGEFEED" if statement.sink is not None else "SELECT"
            require_changefeed_privilege(session, snapshot, desc, need)
        for target in watched_targets(desc, written):
            _check_distinct(target, targets, written.table)
            targets.append(target)
        if query is not None:
            query.check(desc)
        check_headers_column(desc, options)
        check_key_column(desc, options)
        topics[desc.id] = topic_name(database.name, desc.name, options)
        if options.cursor is not None:
            check_history(db, target, desc.name, options.cursor)
            check_exists_at(db, desc.id, desc.name, options.cursor)
    sink = None
    if statement.sink is not None:
        options = sink_defaults(statement.sink, options)
        sink = parse_sink_uri(statement.sink, options)
        if not admin:
            require_explicit_access(session, snapshot, sink)
        if sink.kind.whole_rows and query is not None:
            raise option_error(
                f"the {sink.kind.name} sink keeps whole rows by primary key: a changefeed "
                "into it takes tables, not a query (CREATE CHANGEFEED FOR TABLE ...)"
            )
        check_not_into_watched(sink, targets, topics)
    else:
        _check_sinkless(options)
    spec = ChangefeedSpec(
        targets=tuple(targets),
        topics=topics,
        options=options,
        start=options.cursor or now,
        sink_uri=statement.sink,
        description=_description(statement, options.given),
        user=session.user,
        query=statement.query.text if statement.query is not None else None,
        database_id=database_id,
    )
    return Plan(spec, sink, now)


def watched_targets(desc: TableDescriptor, written: st.ChangefeedTarget) -> list[Target]:
    """The targets ``written`` names in ``desc``: the table, or a span of it
    for each span of its ``PARTITION p`` (42704 when it has none such), or its ``VALUES
    FROM (a) TO (b)`` (see :func:`watched_target`)."""
    if written.partition is None:
        return [watched_target(desc, written)]
    if written.family is not None:
        desc.family(written.family)  # 42704 when it does not exist
    partition = desc.partition(written.partition)
    return [Target(desc.id, written.family, span) for span in partition.spans]


def watched_target(desc: TableDescriptor, written: st.ChangefeedTarget) -> Target:
    """The :class:`Target` ``written`` names in ``desc``: its family must exist (42704),
    and ``VALUES FROM (a) TO (b)`` bounds are values of a prefix of the primary key
    (of its columns' types, not NULL) with ``a`` below ``b``."""
    if written.family is not None:
        desc.family(written.family)  # 42704 when it does not exist
    if written.start is None or written.end is None:
        return Target(desc.id, written.family)
    start = _bound_key(desc, written.start, "FROM")
    end = _bound_key(desc, written.end, "TO")
    if start >= end:
        raise option_error(
            f"VALUES FROM ({_values_text(written.start)}) TO ({_values_text(written.end)}) "
            f"of table {desc.name} watches no row: FROM must sort below TO"
        )
    return Target(desc.id, written.family, (start, end))


def _bound_key(desc: TableDescriptor, values: tuple[exp.Expr, ...], clause: str) -> bytes:
    keys = desc.key_columns
    if not values or len(values) > len(keys):
        raise option_error(
            f"VALUES {clause} ({_values_text(values)}) of table {desc.name}: give 1 to "
            f"{len(keys)} values, a prefix of its primary key ({', '.join(c.name for c in keys)})"
        )
    coerced = []
    for node, column in zip(values, keys, strict=False):
        try:
            value = compile_expr(node, Scope())((), Context())
        except SQLError as exc:
            raise option_error(
                f"VALUES {clause} of table {desc.name}: {node.sql()} is not a constant "
                f"({exc.message})"
            ) from None
        value = coerce(value, column.type, column.name)
        if value is None:
            raise option_error(
                f"VALUES {clause} of table {desc.name}: the value of column {column.name} "
                "cannot be NULL"
            )
        coerced.append(value)
    return row_prefix(desc, coerced)


def _values_text(values: tuple[exp.Expr, ...]) -> str:
    return ", ".join(node.sql() for node in values)


def _check_distinct(target: Target, targets: list[Target], table: st.TableName) -> None:
    """Two targets of one table (and family) may not overlap: a row would be emitted
    twice."""
    for other in targets:
        same = other.table_id == target.table_id and other.family == target.family
        if same and other.span.start < target.span.end and target.span.start < other.span.end:
            raise option_error(
                f"table {table} is a target more than once"
                + (" (its VALUES FROM ... TO ranges overlap)" if target.bounds else "")
            )


def check_not_into_watched(sink: SinkURI, targets: list[Target], topics: dict[int, str]) -> None:
    """A changefeed into a SQL table may not write into a table it watches."""
    if sink.scheme == "experimental-sql" and any(
        topics[t.table_id].split(".")[-1] == (sink.host + sink.path).split(".")[-1].strip("/")
        for t in targets
    ):
        raise option_error("a changefeed cannot write into a table it watches")


def check_history(db: KVClient, target: Target, table: str, cursor: Timestamp) -> None:
    """Refuse a cursor older than what garbage collection kept of ``table`` (the
    message names the threshold)."""
    try:
        for _version in db.export(target.span, cursor, cursor):  # an empty window: a check
            pass
    except BatchTimestampBeforeGCError as exc:
        raise option_error(
            f"cursor {cursor} is too old: table {table}'s history before it has been garbage "
            f"collected ({exc})"
        ) from None


def check_exists_at(db: KVClient, table_id: int, table: str, cursor: Timestamp) -> None:
    """Refuse a cursor from before ``table`` was created, as CockroachDB does (it resolves
    the targets as of the cursor): from there the feed would send the table's whole
    history as if it were news, or, with ``initial_scan='only'``, nothing."""
    if catalog.Snapshot(db, cursor).get(catalog.descriptor_key(table_id)) is None:
        raise SQLError(
            "42P01",
            f'failed to resolve targets in the CHANGEFEED stmt: table "{table}" does not exist',
            detail=f"do the targets exist at the specified cursor time {cursor}?",
        )


def check_execution_locality(db: KVClient, wanted: Locality) -> None:
    """Refuse a locality filter no live node of the cluster matches, with CockroachDB's
    error: the job could run nowhere (a node of its own has no locality)."""
    if not any(
        n.live and n.membership == "active" and n.locality.matches(wanted) for n in db.nodes()
    ):
        raise option_error(f"no instances found matching locality filter {wanted}")


def _check_sinkless(options: ChangefeedOptions) -> None:
    if options.format == "parquet":
        raise option_error(
            "format=parquet needs a file sink (CREATE CHANGEFEED ... INTO 'file://...')"
        )
    for name, _value in options.given:
        if name in SINK_OPTIONS:
            raise option_error(f"option {name} is not usable without a sink")


def _description(statement: st.CreateChangefeed, given: tuple[tuple[str, str | None], ...]) -> str:
    """The statement as its job's description has it, as CockroachDB writes one: each
    target as written (``TABLE t``), the sink URI's secrets redacted, the options
    sorted in ``WITH OPTIONS (...)`` (:func:`options_text`)."""
    targets = None
    if statement.database is not None:
        targets = f"DATABASE {quote_name(statement.database)}"
    elif statement.query is None:
        targets = ", ".join(_target_text(t) for t in statement.targets)
    name = statement.name.name if statement.name is not None else None
    query = statement.query.text if statement.query is not None else None
    return changefeed_text(name, targets, statement.sink, given, query)


def changefeed_text(
    name: str | None,
    targets: str | None,
    sink_uri: str | None,
    given: tuple[tuple[str, str | None], ...],
    query: str | None,
) -> str:
    """``CREATE CHANGEFEED [name] [FOR targets] [INTO 'sink'] [WITH OPTIONS (...)] [AS
    query]``, as a job's description has it: the sink's secrets redacted, the options
    as :func:`options_text` writes them."""
    text = "CREATE CHANGEFEED"
    if name is not None:
        text += f" {quote_name(name)}"
    if targets is not None:
        text += f" FOR {targets}"
    if sink_uri is not None:
        text += f" INTO {sql_literal(redacted(sink_uri))}"
    text += options_text(given)
    if query is not None:
        text += f" AS {query}"
    return text


def _target_text(target: st.ChangefeedTarget) -> str:
    """``TABLE t [FAMILY f] [PARTITION p | VALUES FROM (...) TO (...)]``, as written."""
    text = f"TABLE {target.table}"
    if target.family is not None:
        text += f" FAMILY {quote_name(target.family)}"
    if target.partition is not None:
        text += f" PARTITION {quote_name(target.partition)}"
    if target.start is not None and target.end is not None:
        start, end = (
            ", ".join(e.sql(dialect="postgres") for e in b) for b in (target.start, target.end)
        )
        text += f" VALUES FROM ({start}) TO ({end})"
    return text


def options_text(given: tuple[tuple[str, str | None], ...]) -> str:
    """`` WITH OPTIONS (name = 'value', flag, ...)``, as CockroachDB writes a changefeed's
    options in its job's description: sorted by name, a secret's value redacted (``''``
    when there are none)."""
    if not given:
        return ""
    shown = [
        name
        if value is None
        else f"{name} = {sql_literal('redacted' if is_secret(name) else value)}"
        for name, value in sorted(given, key=lambda option: option[0])
    ]
    return f" WITH OPTIONS ({', '.join(shown)})"


def sql_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def topic_name(database: str, table: str, options: ChangefeedOptions) -> str:
    return database_topic_name(database, table, options)


def resolve_table(
    session: Session, reader: catalog.Reader, written: st.ChangefeedTarget
) -> tuple[DatabaseDescriptor, TableDescriptor]:
    """The table a changefeed target names, and its database (42P01 if none)."""
    database = session.resolve_database(reader, written.table.database or session.database)
    return database, catalog.table_by_name(reader, database, written.table.name)


def is_admin(session: Session, reader: catalog.Reader) -> bool:
    return catalog.is_admin(reader, session.user)


def require_changefeed_privilege(
    session: Session, reader: catalog.Reader, desc: TableDescriptor, need: str
) -> None:
    """42501 unless ``session``'s user is an admin or holds ``need`` on ``desc``."""
    if is_admin(session, reader) or need in catalog.get_privileges(reader, desc.id, session.user):
        return
    raise SQLError(
        "42501",
        f"user {session.user} requires the {need} privilege on table {desc.name} "
        "(or the admin role) to create this changefeed",
    )


def implicit_access(sink: SinkURI) -> str | None:
    """Why ``sink`` would write with the node's own access rather than credentials its
    URI gives (CockroachDB's implicit access: ``nodelocal://``, ``AUTH=implicit``), or
    ``None``. Only admins may create such a changefeed (CockroachDB: admins and holders
    of EXTERNALIOIMPLICITACCESS; feedkv has no system privileges): another user could
    write into other users' files, or anywhere the node's cloud identity may."""
    if sink.scheme in ("file", "nodelocal") or local_paths(sink):
        return "it writes files on the node's own disk"
    if (sink.param("AUTH") or "").lower() == "implicit":
        return "AUTH=implicit signs in with the node's own credentials"
    if sink.scheme in ("s3", "delta+s3") and not sink.param("AWS_ACCESS_KEY_ID"):
        return "without AWS_ACCESS_KEY_ID it signs in with the node's own AWS credentials"
    if (sink.param("sasl_mechanism") or "").upper() == "AWS_MSK_IAM":
        return "AWS_MSK_IAM assumes its role with the node's own AWS credentials"
    if sink.scheme == "iceberg" and not sink.param("catalog_uri"):
        return "a catalog of pyiceberg's configuration is the node's"
    if sink.scheme == "experimental-sql":
        return "it creates and writes its table as the node"
    return None


def require_explicit_access(session: Session, reader: catalog.Reader, sink: SinkURI) -> None:
    """42501 for a user other than an admin whose sink has :func:`implicit_access`."""
    why = implicit_access(sink)
    if why is None or is_admin(session, reader):
        return
    raise SQLError(
        "42501",
        f"user {session.user} does not have the admin role needed to create a changefeed "
        f"into a {sink.scheme}:// sink: {why}; give the sink credentials of its own (a "
        "webhook, Kafka, or cloud storage with keys)",
    )


def require_admin(session: Session, reader: catalog.Reader, what: str) -> None:
    if not catalog.is_admin(reader, session.user):
        raise SQLError(
            "42501", f"user {session.user} does not have the admin role needed to {what}"
        )
