"""feedkv's grants as PostgreSQL's ``aclitem[]`` text: what ``pg_class.relacl`` and
``pg_database.datacl`` hold for psql's ``\\dp`` (``\\z``) and ``\\l``.

An aclitem is ``grantee=privchars/grantor``, its letters in PostgreSQL's order
(``arwdDxtXUCcT``: INSERT, SELECT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER,
EXECUTE, USAGE, CREATE, CONNECT, TEMPORARY). A privilege PostgreSQL has no letter
for (feedkv's CHANGEFEED, DROP) is left out, as CockroachDB leaves it out of the
aclitems it writes (``pg_default_acl.defaclacl``); a grantee holding only such
privileges has no aclitem. The grantor is the object's owner, who is the only one
feedkv lets grant (an admin, on the owner's behalf).

NB: CockroachDB itself leaves ``relacl`` NULL; feedkv fills it so that ``\\dp`` shows
what ``SHOW GRANTS`` does.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["acl_items", "aclitem"]

# PostgreSQL's ACL letters in the order aclitemout writes them (its AclMode bits)
_LETTERS = (
    ("INSERT", "a"),
    ("SELECT", "r"),
    ("UPDATE", "w"),
    ("DELETE", "d"),
    ("TRUNCATE", "D"),
    ("REFERENCES", "x"),
    ("TRIGGER", "t"),
    ("EXECUTE", "X"),
    ("USAGE", "U"),
    ("CREATE", "C"),
    ("CONNECT", "c"),
    ("TEMPORARY", "T"),
)


def aclitem(grantee: str, privileges: Iterable[str], grantor: str) -> str | None:
    """``grantee=privchars/grantor`` (``None``: no privilege of ``privileges`` has a
    PostgreSQL letter)."""
    held = set(privileges)
    letters = "".join(letter for name, letter in _LETTERS if name in held)
    return f"{grantee}={letters}/{grantor}" if letters else None


def acl_items(grants: Iterable[tuple[str, Iterable[str]]], grantor: str) -> list[str]:
    """The aclitems of ``(grantee, privileges)`` grants on one object, by grantee."""
    ordered = sorted(grants, key=lambda grant: grant[0])
    items = (aclitem(grantee, privileges, grantor) for grantee, privileges in ordered)
    return [item for item in items if item is not None]
