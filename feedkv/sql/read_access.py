"""Which raw reads a user who is not root may make: the keys of the tables it may SELECT.

A secure node's gRPC API is for the nodes and root (:mod:`feedkv.kv.access`); another
user may read through it only what a client of one table needs, which is what the Spark
data source does when it reads as that user (as a CockroachDB sinkless changefeed needs
SELECT on its tables). Each span read must lie inside one of:

- a table's keys (:func:`~feedkv.sql.row_codec.table_span`: its rows and every index),
  when the user holds ``SELECT`` on the table (or is an admin);
- a descriptor's key: the table's own under the same rule (its schema, and its history,
  which decoding older rows needs), or a database's (a name and an id);
- a name's entry, read as a point (a name and the id it stands for: CockroachDB lets
  every user read ``system.namespace``).

A span that crosses from one table into another, the catalog's other records (users,
grants, jobs and their secrets, holds, settings) and every system key stay root's, with
a :class:`~feedkv.errors.PermissionDeniedError` saying what was refused.

Cost: the grants are read at the time of the check, so a ``REVOKE`` holds for the next
batch; one point read per table a batch reads (and the user's record only when that
finds no grant), shared by the batch's reads: about 0.1 ms a batch on a single node
here, against 0.7 ms for a scan of ten rows over TLS and a few ms for a page of a
thousand. A cache would need telling when a grant changes (grants are not in the
descriptor, so its version does not say). :func:`read_target` is the pure part.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from feedkv.errors import PermissionDeniedError
from feedkv.kv.access import Read
from feedkv.rangefeed.feed_client import KV
from feedkv.security.secrets import HeldKey
from feedkv.sql import catalog
from feedkv.sql.descriptor import DatabaseDescriptor
from feedkv.sql.row_codec import table_id_of_key, table_span
from feedkv.storage.mvcc import KeyValue
from feedkv.util.keys import key_next

__all__ = ["DescriptorRead", "NameRead", "TableRead", "TableReadAccess", "read_target"]

SELECT = "SELECT"


@dataclass(frozen=True, slots=True)
class TableRead:
    """Keys of table ``table_id``: rows or index entries."""

    table_id: int


@dataclass(frozen=True, slots=True)
class DescriptorRead:
    """The descriptor (any version) of ``descriptor_id``."""

    descriptor_id: int


@dataclass(frozen=True, slots=True)
class NameRead:
    """One name's entry."""


Target = TableRead | DescriptorRead | NameRead


def read_target(read: Read) -> Target:
    """What ``read`` reads, if it lies inside one thing a user may be let read;
    :class:`PermissionDeniedError` saying why not otherwise."""
    span = read.span
    table_id = table_id_of_key(span.start)
    if table_id is not None:
        if table_span(table_id).contains(span):
            return TableRead(table_id)
        raise PermissionDeniedError(
            f"the span {span} reaches beyond table {table_id}'s keys: a user other than "
            "root reads one table at a time"
        )
    descriptor_id = catalog.descriptor_id_of_key(span.start)
    if descriptor_id is not None and span.end <= key_next(span.start):
        return DescriptorRead(descriptor_id)
    if read.point and catalog.is_name_key(span.start):
        return NameRead()
    raise PermissionDeniedError(
        f"the span {span} holds system keys, which only root reads through the raw KV "
        "API; another user reads the tables it holds SELECT on"
    )


class _Latest:
    """A catalog reader at the time of each read (a check needs no snapshot: each grant
    is one key)."""

    def __init__(self, db: KV) -> None:
        self._db = db

    @property
    def sealer(self) -> HeldKey:
        return self._db.sealer

    def get(self, key: bytes) -> bytes | None:
        return self._db.get(key)

    def scan(
        self, start: bytes, end: bytes, *, limit: int | None = None, reverse: bool = False
    ) -> list[KeyValue]:
        return self._db.scan(start, end, limit=limit, reverse=reverse)


class TableReadAccess:
    """:class:`~feedkv.kv.access.ReadAccess` by the SQL catalog's grants, read through
    ``db`` (the node's own client of its cluster). Thread-safe: it keeps no state."""

    def __init__(self, db: KV) -> None:
        self._reader = _Latest(db)

    def require(self, user: str, table_id: int, privilege: str) -> None:
        """Returns when ``user`` holds ``privilege`` on table ``table_id`` (or is an
        admin); else :class:`PermissionDeniedError` naming the table."""
        if privilege in catalog.get_privileges(self._reader, table_id, user):
            return
        if not catalog.is_admin(self._reader, user):
            raise PermissionDeniedError(self._refusal(user, table_id, privilege))

    def password_verifier(self, user: str) -> str | None:
        """``user``'s stored SCRAM verifier (``None``: no such user, no password, or a
        role that cannot log in)."""
        found = catalog.get_user(self._reader, user)
        return found.password_verifier if found is not None and found.can_login else None

    def check(self, user: str, reads: Sequence[Read]) -> None:
        try:
            targets = [read_target(read) for read in reads]  # refuses before reading grants
        except PermissionDeniedError as exc:
            raise PermissionDeniedError(f"user {user}: {exc}") from None
        allowed: dict[int, bool] = {}
        admin: list[bool] = []  # read once, when some grant is missing

        def may_select(descriptor_id: int) -> bool:
            if descriptor_id not in allowed:
                granted = SELECT in catalog.get_privileges(self._reader, descriptor_id, user)
                if not granted and not admin:
                    admin.append(catalog.is_admin(self._reader, user))
                allowed[descriptor_id] = granted or admin[0]
            return allowed[descriptor_id]

        for target in targets:
            if isinstance(target, TableRead) and not may_select(target.table_id):
                raise PermissionDeniedError(self._refusal(user, target.table_id))
            if isinstance(target, DescriptorRead) and not may_select(target.descriptor_id):
                found = catalog.get_descriptor(self._reader, target.descriptor_id)
                if not isinstance(found, DatabaseDescriptor):
                    raise PermissionDeniedError(self._refusal(user, target.descriptor_id))

    def _refusal(self, user: str, descriptor_id: int, privilege: str = SELECT) -> str:
        found = catalog.get_descriptor(self._reader, descriptor_id)
        if found is None:
            return f"user {user} may not use table {descriptor_id}: there is no such table"
        return (
            f"user {user} does not have {privilege} privilege on relation {found.name} "
            f"(table {descriptor_id}): GRANT {privilege} ON {found.name} TO {user}"
        )
