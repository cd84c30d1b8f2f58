"""``regclass``, a relation's OID that prints as its name, as the catalog queries of
psql and ORMs use it: ``'t'::regclass`` (the OID of the relation ``t`` of the
session's database, 42P01 when there is none), ``to_regclass('t')`` (NULL then),
``c.oid = 't'::regclass``, and ``oid::regclass``, which prints the relation's name
(quoted where it must be) or the number when no relation has that OID.

As CockroachDB reads the name: an identifier, lower-cased unless double-quoted, with
surrounding blanks ignored; qualified by ``public`` (or ``pg_catalog``), and also by the
session's database; a text of digits is an OID itself. Pure: the catalog
(:mod:`feedkv.pgwire.catalog`) hands over the OIDs of its relations by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from feedkv.errors import SQLError
from feedkv.sql.descriptor import quote_name

__all__ = ["name_parts", "regclass_name", "regclass_oid"]

_SCHEMAS = ("public", "pg_catalog")


def name_parts(text: str) -> list[str]:
    """The parts of the dotted name ``text``, each lower-cased unless quoted; 42P01 for
    text that is no name (as CockroachDB, which names it in the message)."""
    parts: list[str] = []
    current: list[str] = []
    quoted = False
    i, text = 0, text.strip()
    while i < len(text):
        ch = text[i]
        if quoted:
            if ch == '"' and text[i + 1 : i + 2] == '"':
                current.append('"')
                i += 1
            elif ch == '"':
                quoted = False
            else:
                current.append(ch)
        elif ch == '"':
            quoted = True
        elif ch == ".":
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(ch.lower())
        i += 1
    parts.append("".join(current).strip())
    if quoted or not all(parts):
        raise SQLError("42P01", f'relation "{text}" does not exist')
    return parts


def regclass_oid(
    value: Any, relations: Mapping[str, int], database: str, *, missing_ok: bool = False
) -> int | None:
    """The OID of the relation ``value`` names (an OID as is), from ``relations`` (OIDs
    by bare name); NULL for NULL; an unknown name is 42P01, or NULL if ``missing_ok``
    (``to_regclass``)."""
    if value is None:
        return None
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if text.isdigit():
        return int(text)
    parts = name_parts(text)
    *qualifiers, name = parts
    known = len(qualifiers) <= 2 and (
        not qualifiers
        or (qualifiers[-1] in _SCHEMAS and (len(qualifiers) == 1 or qualifiers[0] == database))
    )
    oid = relations.get(name) if known else None
    if oid is None and not missing_ok:
        raise SQLError("42P01", f'relation "{".".join(parts)}" does not exist')
    return oid


def regclass_name(oid: Any, names: Mapping[int, str]) -> str | None:
    """How the regclass ``oid`` prints: its relation's name, else the number (0, no
    relation, as ``-``, as PostgreSQL prints it)."""
    if oid is None:
        return None
    if int(oid) == 0:
        return "-"
    name = names.get(int(oid))
    return quote_name(name) if name is not None else str(int(oid))
