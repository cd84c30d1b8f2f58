"""Sequences: ``nextval``, ``currval``, ``lastval`` and ``setval``.

A sequence's settings are its descriptor (:class:`~feedkv.sql.descriptor.SequenceDescriptor`);
its last value lives apart, at :func:`~feedkv.sql.catalog.sequence_value_key`, and is
changed by a KV increment (:meth:`~feedkv.kv.db.KVClient.increment`) outside the
statement's transaction, as in PostgreSQL and CockroachDB: a value handed out is never
handed out again, even when the transaction that took it rolls back (values have gaps,
never repeats), and concurrent sessions never wait on each other's transactions.

``currval`` and ``lastval`` are the session's own: the last value ``nextval`` (or
``setval``) gave in this session
(:class:`~feedkv.sql.session_context.SequenceState`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from feedkv.errors import SQLError
from feedkv.sql import catalog
from feedkv.sql.descriptor import SequenceDescriptor, quote_name
from feedkv.sql.relation import Relation
from feedkv.sql.types import ColumnType, Kind

if TYPE_CHECKING:
    from feedkv.sql.session_context import SessionContext

__all__ = [
    "FUNCTIONS",
    "as_relation",
    "call",
    "parse_sequence_name",
    "sequence_named",
    "sequence_reference",
    "sequences_called",
    "shown_default",
]

FUNCTIONS = ("nextval", "currval", "lastval", "setval")
INT8_MAX = 2**63 - 1
INT8_MIN = -(2**63)


def as_relation(sequence: SequenceDescriptor, rows: list[tuple[Any, ...]]) -> Relation:
    """``sequence`` read as a table, as PostgreSQL's: its ``rows`` (one, when read) of
    ``last_value``, ``log_cnt`` (always 0 here) and ``is_called`` (whether a value was
    handed out)."""
    int_type = ColumnType(Kind.INT)
    return Relation.of(
        sequence.name,
        ("last_value", "log_cnt", "is_called"),
        (int_type, int_type, ColumnType(Kind.BOOL)),
        rows,
    )


def parse_sequence_name(text: str) -> tuple[str | None, str]:
    """``(database, name)`` of a sequence named in a string (``'s'``, ``'db.s'``,
    ``'db.public.s'``, ``'"S"'``): a part is lower-cased unless double-quoted."""
    parts = []
    for part in text.split("."):
        part = part.strip()
        if len(part) >= 2 and part[0] == part[-1] == '"':
            parts.append(part[1:-1].replace('""', '"'))
        elif part:
            parts.append(part.lower())
        else:
            raise SQLError("42602", f"invalid sequence name {text!r}")
    if len(parts) == 1:
        return None, parts[0]
    if len(parts) == 2:
        return (None if parts[0] == "public" else parts[0]), parts[1]
    if len(parts) == 3 and parts[1] == "public":
        return parts[0], parts[2]
    raise SQLError("42602", f"invalid sequence name {text!r}")


def sequence_reference(database: str, name: str) -> str:
    """How a column's DEFAULT names the sequence it calls nextval() on, resolved when the
    column is made (as CockroachDB keeps the sequence's id): ``"db".public."s"``, which
    names the same sequence from a session in any database."""
    return f"{quote_name(database)}.public.{quote_name(name)}"


_NEXTVAL = re.compile(r"nextval\('((?:[^']|'')*)'\)", re.IGNORECASE)


def sequences_called(default: str) -> list[tuple[str | None, str]]:
    """``(database, name)`` of each sequence a column's DEFAULT calls nextval() on."""
    return [parse_sequence_name(m.group(1).replace("''", "'")) for m in _NEXTVAL.finditer(default)]


def shown_default(default: str, database: str) -> str:
    """A column's DEFAULT text as CockroachDB shows it (SHOW CREATE TABLE,
    information_schema): each ``nextval('s')`` as its reference to the sequence,
    ``nextval('public.s'::REGCLASS)``, the sequence's database first when it is not
    ``database`` (the table's)."""
    if "nextval" not in default.lower():
        return default

    def shown(match: re.Match[str]) -> str:
        named, name = parse_sequence_name(match.group(1).replace("''", "'"))
        prefix = "" if named in (None, database) else f"{quote_name(named)}."
        text = f"{prefix}public.{quote_name(name)}".replace("'", "''")
        return f"nextval('{text}'::REGCLASS)"

    return _NEXTVAL.sub(shown, default)


def sequence_named(
    session: SessionContext, reader: catalog.Reader, text: str
) -> SequenceDescriptor:
    """The sequence ``text`` names; 42P01 if there is none, 42809 if it names a table
    or a view."""
    database, name = parse_sequence_name(text)
    found = session.resolve_database(reader, database or session.database)
    return catalog.sequence_by_name(reader, found, name)


def call(
    session: SessionContext, reader: catalog.Reader | None, function: str, args: Sequence[Any]
) -> int | None:
    """Run sequence function ``function`` (one of :data:`FUNCTIONS`) on ``args`` for
    ``session``; ``reader`` resolves the sequence's name (the statement's
    transaction)."""
    if function == "lastval":
        _arguments(function, args, 0, 0)
        if session.sequences.last is None:
            raise SQLError("55000", "lastval is not yet defined in this session")
        return session.sequences.last
    _arguments(function, args, 1, 3 if function == "setval" else 1)
    if function != "currval" and session.variable("transaction_read_only") == "on":
        raise SQLError("25006", f"cannot execute {function}() in a read-only transaction")
    if args[0] is None:
        return None
    if not isinstance(args[0], str):
        raise SQLError("42883", f"{function}() takes the sequence's name as a string")
    if reader is None:
        reader = catalog.Snapshot(session.db, session.db.now())
    sequence = sequence_named(session, reader, args[0])
    _require(session, reader, sequence, "SELECT" if function == "currval" else "UPDATE")
    key = catalog.sequence_value_key(sequence)
    if function == "currval":
        value = session.sequences.values.get(sequence.id)
        if value is None:
            raise SQLError(
                "55000", f'currval of sequence "{sequence.name}" is not yet defined in this session'
            )
        return value
    if function == "nextval":
        value = session.db.increment(
            key, sequence.increment, initial=sequence.start - sequence.increment
        )
        if value > sequence.max_value or value < sequence.min_value:
            bound = "maximum" if value > sequence.max_value else "minimum"
            limit = sequence.max_value if bound == "maximum" else sequence.min_value
            raise SQLError(
                "2200H", f'nextval: reached {bound} value of sequence "{sequence.name}" ({limit})'
            )
        session.sequences.note(sequence.id, value)
        return value
    return _setval(session, sequence, key, args)


def _setval(
    session: SessionContext, sequence: SequenceDescriptor, key: bytes, args: Sequence[Any]
) -> int | None:
    value = args[1]
    called = args[2] if len(args) > 2 else True
    if value is None or called is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise SQLError("42883", "setval() takes an integer value")
    if not isinstance(called, bool):
        raise SQLError("42883", "setval()'s third argument is a boolean (is_called)")
    if not sequence.min_value <= value <= sequence.max_value:
        raise SQLError(
            "22003",
            f'setval: value {value} is out of bounds for sequence "{sequence.name}" '
            f"({sequence.min_value}..{sequence.max_value})",
        )
    stored = value if called else value - sequence.increment
    session.db.put(key, str(stored).encode())  # NB: outside the transaction, as nextval
    if called:
        session.sequences.note(sequence.id, value)
    return value


def _arguments(function: str, args: Sequence[Any], least: int, most: int) -> None:
    if not least <= len(args) <= most:
        raise SQLError("42883", f"unknown signature: {function}() with {len(args)} arguments")


def _require(
    session: SessionContext, reader: catalog.Reader, sequence: SequenceDescriptor, privilege: str
) -> None:
    if session.user == catalog.ROOT:
        return
    if catalog.is_admin(reader, session.user):
        return
    if privilege not in catalog.get_privileges(reader, sequence.id, session.user):
        raise SQLError(
            "42501",
            f"user {session.user} does not have {privilege} privilege on relation {sequence.name}",
        )
