"""The catalog: databases, tables and users, stored as KV pairs under ``F1``.

    F1 "desc" id            -> descriptor JSON (a database or a table)
    F1 "ns" parent id name  -> id (databases have parent 0)
    F1 "seq"                -> the last descriptor id handed out
    F1 "user" name          -> {"admin": bool}
    F1 "cdc" table id job   -> {} while changefeed job ``job`` watches the table
    F1 "job" id             -> a changefeed job's record (:mod:`feedkv.changefeed.jobs`)
    F1 "cfname" db id name  -> the job id of the changefeed named so in that database
    F1 "zone" table id      -> the table's zone configuration (JSON)

Everything is read and written through a :class:`Reader` (a transaction, or a snapshot
at a fixed timestamp), so a schema change is atomic with its data changes and any past
version of a descriptor is a read ``as_of`` that time.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from feedkv.errors import InvalidArgumentError, SQLError
from feedkv.kv.txn import Txn
from feedkv.rangefeed.feed_client import KV
from feedkv.sql.descriptor import (
    DatabaseDescriptor,
    Descriptor,
    NamedRelation,
    SequenceDescriptor,
    TableDescriptor,
    TypeDescriptor,
    ViewDescriptor,
    decode_descriptor,
)
from feedkv.sql.row_codec import CATALOG_PREFIX, table_span
from feedkv.storage.mvcc import KeyValue
from feedkv.util.encoding import decode_value, encode_value, encode_values
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span, prefix_end
from feedkv.util.units import parse_duration_ns

if TYPE_CHECKING:
    from feedkv.security.secrets import HeldKey

__all__ = [
    "ADMIN_ROLE",
    "SETTINGS_COLUMNS",
    "access_spans",
    "DEFAULT_DATABASE",
    "FIRST_ID",
    "NODE_USER",
    "POSTGRES_DATABASE",
    "POSTGRES_DATABASE_ID",
    "ROOT",
    "SYSTEM_DATABASE",
    "SYSTEM_DATABASE_ID",
    "Reader",
    "Snapshot",
    "User",
    "allocate_id",
    "bootstrap",
    "changefeed_name_key",
    "changefeed_watchers",
    "database_by_name",
    "database_owner",
    "descriptor_id_of_key",
    "descriptor_key",
    "is_name_key",
    "descriptor_span",
    "zone_key",
    "zone_gc_ttls",
    "gc_ttl_of",
    "default_zone_key",
    "get_zone",
    "zone_replicas",
    "zone_spans",
    "get_descriptor",
    "get_user",
    "is_admin",
    "job_key",
    "job_span",
    "comment_key",
    "comment_of_key",
    "comment_span",
    "schema_job_key",
    "schema_job_span",
    "list_databases",
    "list_tables",
    "list_types",
    "list_users",
    "list_sequences",
    "list_views",
    "relation_by_name",
    "sequence_by_name",
    "sequence_value_key",
    "name_taken",
    "of_kind",
    "put_database",
    "put_table",
    "put_name",
    "put_type",
    "put_user",
    "put_view",
    "set_changefeed_watch",
    "setting_duration_ns",
    "remove_name",
    "table_by_id",
    "table_by_name",
    "type_by_name",
    "view_by_name",
]

DEFAULT_DATABASE = "defaultdb"
ROOT = "root"
ADMIN_ROLE = "admin"  # the role whose members are admins (User.admin), as CockroachDB's
FIRST_ID = 100
# The databases every cluster has beside defaultdb, as CockroachDB's: ``postgres``, an
# empty one for tools that connect to it by default (it may be dropped), and
# ``system``, owned by the ``node`` user, where nobody creates or drops anything.
# Their ids lie below FIRST_ID, so that they take none from the tables'.
SYSTEM_DATABASE = "system"
SYSTEM_DATABASE_ID = 1
POSTGRES_DATABASE = "postgres"
POSTGRES_DATABASE_ID = 2
NODE_USER = "node"

_DESC = CATALOG_PREFIX + encode_value("desc")
_NS = CATALOG_PREFIX + encode_value("ns")
_SEQ = CATALOG_PREFIX + encode_value("seq")
_USER = CATALOG_PREFIX + encode_value("user")
_CDC = CATALOG_PREFIX + encode_value("cdc")
_JOB = CATALOG_PREFIX + encode_value("job")
_SCHEMA_JOB = CATALOG_PREFIX + encode_value("schemajob")  # feedkv.sql.schema_jobs
_COMMENT = CATALOG_PREFIX + encode_value("comment")  # + object id + kind + sub id
_HOLD = CATALOG_PREFIX + encode_value("hold")
_CHANGEFEED_NAME = CATALOG_PREFIX + encode_value("cfname")
_ZONE = CATALOG_PREFIX + encode_value("zone")
_SETTING = CATALOG_PREFIX + encode_value("setting")
_GRANT = CATALOG_PREFIX + encode_value("grant")
_MEMBER = CATALOG_PREFIX + encode_value("member")  # + role + member: a role membership
_SEQVAL = CATALOG_PREFIX + encode_value("seqval")
# an insecure cluster's key that seals secrets in job records (a secure one's is in
# its certs directory; feedkv.security.secrets)
SEALING_KEY = CATALOG_PREFIX + encode_value("sealkey")


class Reader(Protocol):
    """Reads at one consistent point: a :class:`~feedkv.kv.txn.Txn` or a
    :class:`Snapshot`."""

    # what seals and opens job secrets here (feedkv.security.secrets)
    @property
    def sealer(self) -> HeldKey: ...

    def get(self, key: bytes) -> bytes | None: ...

    def scan(
        self, start: bytes, end: bytes, *, limit: int | None = None, reverse: bool = False
    ) -> list[KeyValue]: ...


class Snapshot:
    """Reads as of a fixed timestamp, outside any transaction (AS OF SYSTEM TIME)."""

    def __init__(self, db: KV, ts: Timestamp) -> None:
        self.db = db
        self.ts = ts

    @property
    def sealer(self) -> HeldKey:
        return self.db.sealer

    def get(self, key: bytes) -> bytes | None:
        return self.db.get(key, as_of=self.ts)

    def scan(
        self, start: bytes, end: bytes, *, limit: int | None = None, reverse: bool = False
    ) -> list[KeyValue]:
        if reverse:
            rows = self.db.scan(start, end, as_of=self.ts)
            rows.reverse()
            return rows[:limit] if limit is not None else rows
        return self.db.scan(start, end, as_of=self.ts, limit=limit)


@dataclass(frozen=True, slots=True)
class User:
    name: str
    admin: bool
    # the SCRAM-SHA-256 verifier of the user's password (feedkv.security.scram), never
    # the password; None: no password (client certificates only)
    password_verifier: str | None = None
    # False: a role, which holds privileges for its members but cannot log in (CREATE
    # ROLE without LOGIN, as CockroachDB's)
    can_login: bool = True


def descriptor_key(descriptor_id: int) -> bytes:
    return _DESC + encode_value(descriptor_id)


def descriptor_id_of_key(key: bytes) -> int | None:
    """The id whose :func:`descriptor_key` is ``key`` (``None``: it is none's)."""
    if not key.startswith(_DESC):
        return None
    try:
        found, _ = decode_value(key, len(_DESC))
    except InvalidArgumentError:
        return None
    if not isinstance(found, int) or isinstance(found, bool):
        return None
    return found if descriptor_key(found) == key else None


def is_name_key(key: bytes) -> bool:
    """Whether ``key`` is a name's entry (``ns``: a name and the id it stands for)."""
    return key.startswith(_NS)


MAX_NAME_BYTES = 128  # a database or table name, in UTF-8


def _name_key(parent_id: int, name: str) -> bytes:
    return _NS + encode_values([parent_id, name])


def _named(name: str) -> bool:
    """Whether ``name`` could name anything (no longer name was ever created)."""
    return len(name.encode("utf-8", "surrogatepass")) <= MAX_NAME_BYTES


def _check_new_name(name: str) -> None:
    if not _named(name):
        raise SQLError(
            "54000",
            f"the name {name[:20]!r}... is too long: a name has at most {MAX_NAME_BYTES} bytes",
        )


def job_key(job_id: int) -> bytes:
    return _JOB + encode_value(job_id)


def job_span() -> tuple[bytes, bytes]:
    """The keys of every job record."""
    return _JOB, prefix_end(_JOB)


def schema_job_key(job_id: int) -> bytes:
    """The key of a schema-change job's record (:mod:`feedkv.sql.schema_jobs`)."""
    return _SCHEMA_JOB + encode_value(job_id)


def schema_job_span() -> tuple[bytes, bytes]:
    """The keys of every schema-change job record."""
    return _SCHEMA_JOB, prefix_end(_SCHEMA_JOB)


def comment_key(object_id: int, kind: str, sub_id: int) -> bytes:
    """The key of a comment (:mod:`feedkv.sql.comments`) on an object (a database or a
    table: ``object_id``), or on its column or index ``sub_id`` (``kind``)."""
    return _COMMENT + encode_values([object_id, kind, sub_id])


def comment_span(object_id: int | None = None) -> Span:
    """The keys of every comment on ``object_id`` and on its columns and indexes
    (``None``: of every comment)."""
    prefix = _COMMENT + (encode_value(object_id) if object_id is not None else b"")
    return Span(prefix, prefix_end(prefix))


def comment_of_key(key: bytes) -> tuple[int, str, int]:
    """The object id, kind and sub id of a :func:`comment_key`."""
    object_id, at = decode_value(key, len(_COMMENT))
    kind, at = decode_value(key, at)
    sub_id, _ = decode_value(key, at)
    return int(object_id), str(kind), int(sub_id)  # type: ignore[arg-type]


def descriptor_span() -> Span:
    """The keys of every descriptor (databases and tables)."""
    return Span(_DESC, prefix_end(_DESC))


def access_spans() -> list[Span]:
    """The keys that decide who may read what: the users, their grants and role
    memberships (a change there may end a user's running rangefeeds:
    :mod:`feedkv.sql.grant_watch`)."""
    return [
        Span(_USER, prefix_end(_USER)),
        Span(_GRANT, prefix_end(_GRANT)),
        Span(_MEMBER, prefix_end(_MEMBER)),
    ]


def zone_key(table_id: int) -> bytes:
    """The key of a table's zone configuration (JSON: ``closed_timestamp_target_ns``)."""
    return _ZONE + encode_value(table_id)


def default_zone_key() -> bytes:
    """The key of the default zone's configuration (``ALTER RANGE default``; JSON)."""
    return _ZONE + encode_value("default")


def get_zone(reader: Reader, table_id: int | None) -> dict[str, Any]:
    """A table's own zone configuration (``None``: the default zone's); ``{}``: none set."""
    key = default_zone_key() if table_id is None else zone_key(table_id)
    raw = reader.get(key)
    zone: dict[str, Any] = json.loads(raw) if raw is not None else {}
    return zone


def zone_replicas(reader: Reader) -> tuple[int | None, list[tuple[Span, int]]]:
    """The default zone's ``num_replicas`` (``None``: not set) and every existing table's
    span with the ``num_replicas`` its own zone sets."""
    default = get_zone(reader, None).get("num_replicas")
    tables = []
    for kv in reader.scan(_ZONE, prefix_end(_ZONE)):
        table_id, _end = decode_value(kv.key, len(_ZONE))
        if not isinstance(table_id, int):
            continue
        desc = table_by_id(reader, table_id)
        replicas = json.loads(kv.value).get("num_replicas")
        if desc is not None and not desc.dropped and isinstance(replicas, int):
            tables.append((table_span(desc.id), replicas))
    return (default if isinstance(default, int) else None), tables


def zone_spans(reader: Reader) -> list[tuple[Span, int]]:
    """Every table's span with the closed timestamp target its zone configuration sets
    (ns), for tables that exist."""
    out = []
    for kv in reader.scan(_ZONE, prefix_end(_ZONE)):
        table_id, _end = decode_value(kv.key, len(_ZONE))
        desc = table_by_id(reader, table_id) if isinstance(table_id, int) else None
        target = json.loads(kv.value).get("closed_timestamp_target_ns")
        if desc is not None and not desc.dropped and isinstance(target, int):
            out.append((table_span(desc.id), target))
    return out


def _gc_ttl_ns(zone: dict[str, Any]) -> int | None:
    seconds = zone.get("gc_ttl_seconds")
    return seconds * 1_000_000_000 if isinstance(seconds, int) else None


def gc_ttl_of(reader: Reader, table_id: int) -> int | None:
    """The GC TTL (ns) of a table's data: its own zone's ``gc.ttlseconds``, else the
    default zone's; ``None``: neither sets one (the store's default applies)."""
    own = _gc_ttl_ns(get_zone(reader, table_id))
    return own if own is not None else _gc_ttl_ns(get_zone(reader, None))


def zone_gc_ttls(reader: Reader) -> tuple[int | None, list[tuple[Span, int]]]:
    """The default zone's GC TTL (ns; ``None``: not set) and the span of every table
    whose own zone sets one, with it. Dropped tables count: their old rows are
    collected after their own TTL, as CockroachDB's GC job waits for it."""
    default = _gc_ttl_ns(get_zone(reader, None))
    tables = []
    for kv in reader.scan(_ZONE, prefix_end(_ZONE)):
        table_id, _end = decode_value(kv.key, len(_ZONE))
        ttl = _gc_ttl_ns(json.loads(kv.value)) if isinstance(table_id, int) else None
        if ttl is not None and isinstance(table_id, int):
            tables.append((table_span(table_id), ttl))
    return default, tables


def changefeed_name_key(database_id: int, name: str) -> bytes:
    """The key of a named changefeed's name in its database (its value: the job id)."""
    return _CHANGEFEED_NAME + encode_values([database_id, name])


def hold_key(hold_id: str) -> bytes:
    return _HOLD + encode_value(hold_id)


def hold_span() -> tuple[bytes, bytes]:
    """The keys of every history hold (:mod:`feedkv.changefeed.jobs`)."""
    return _HOLD, prefix_end(_HOLD)


def setting_key(name: str) -> bytes:
    return _SETTING + encode_value(name)


# SHOW CLUSTER SETTINGS' columns, as CockroachDB's (feedkv.changefeed.cluster_settings)
SETTINGS_COLUMNS = ("variable", "value", "setting_type", "description")


def get_setting(reader: Reader, name: str) -> str | None:
    """Cluster setting ``name`` as set (``None``: its default)."""
    raw = reader.get(setting_key(name))
    return raw.decode() if raw is not None else None


def setting_duration_ns(name: str, value: str) -> int:
    """The value of duration setting ``name`` (``336h``, ``10m``); SQLSTATE 22023,
    naming the setting, when it is not a positive duration."""
    try:
        ns = parse_duration_ns(value)
    except InvalidArgumentError as exc:
        raise SQLError("22023", f"{name}: {exc}") from None
    if ns <= 0:
        raise SQLError("22023", f"{name} {value!r} must be above 0")
    return ns


def _user_key(name: str) -> bytes:
    return _USER + encode_value(name)


# Reads.


def get_descriptor(reader: Reader, descriptor_id: int) -> Descriptor | None:
    raw = reader.get(descriptor_key(descriptor_id))
    return decode_descriptor(raw) if raw is not None else None


def database_by_name(reader: Reader, name: str) -> DatabaseDescriptor:
    """The database called ``name``; SQLSTATE 3D000 if there is none."""
    raw = reader.get(_name_key(0, name)) if _named(name) else None
    if raw is not None:
        found = get_descriptor(reader, int(decode_value(raw)[0]))  # type: ignore[arg-type]
        if isinstance(found, DatabaseDescriptor):
            return found
    raise SQLError("3D000", f'database "{name}" does not exist')


def table_by_name(reader: Reader, database: DatabaseDescriptor, name: str) -> TableDescriptor:
    """The live table ``name`` in ``database``; SQLSTATE 42P01 if there is none, 42809
    if ``name`` is a view or a sequence."""
    return _of_kind(reader, database, name, TableDescriptor)


def view_by_name(reader: Reader, database: DatabaseDescriptor, name: str) -> ViewDescriptor:
    """The view ``name`` in ``database``; SQLSTATE 42P01 if there is none, 42809 if
    ``name`` is something else."""
    return _of_kind(reader, database, name, ViewDescriptor)


def sequence_by_name(reader: Reader, database: DatabaseDescriptor, name: str) -> SequenceDescriptor:
    """The sequence ``name`` in ``database``; SQLSTATE 42P01 if there is none, 42809 if
    ``name`` is something else."""
    return _of_kind(reader, database, name, SequenceDescriptor)


_KIND_NAMES = {TableDescriptor: "table", ViewDescriptor: "view", SequenceDescriptor: "sequence"}
_R = TypeVar("_R", TableDescriptor, ViewDescriptor, SequenceDescriptor)
_D = TypeVar("_D", ViewDescriptor, SequenceDescriptor, TypeDescriptor)


def _of_kind(reader: Reader, database: DatabaseDescriptor, name: str, kind: type[_R]) -> _R:
    return of_kind(relation_by_name(reader, database, name), name, kind)


def of_kind(found: NamedRelation | None, name: str, kind: type[_R]) -> _R:
    """``found`` (what ``name`` names), if it is a ``kind``; SQLSTATE 42P01 if there is
    none, 42809 if it is something else."""
    if found is None:
        raise SQLError("42P01", f'relation "{name}" does not exist')
    if not isinstance(found, kind):
        raise SQLError(
            "42809", f'"{name}" is not a {_KIND_NAMES[kind]} (it is a {_KIND_NAMES[type(found)]})'
        )
    return found


def name_taken(reader: Reader, database: DatabaseDescriptor, name: str) -> bool:
    """Whether a live table, a view, a sequence or a type is called ``name`` in
    ``database``."""
    return (
        relation_by_name(reader, database, name) is not None
        or type_by_name(reader, database, name) is not None
    )


def type_by_name(reader: Reader, database: DatabaseDescriptor, name: str) -> TypeDescriptor | None:
    """The user-defined type called ``name`` in ``database``, if any."""
    raw = reader.get(_name_key(database.id, name)) if _named(name) else None
    if raw is None:
        return None
    found = get_descriptor(reader, int(decode_value(raw)[0]))  # type: ignore[arg-type]
    return found if isinstance(found, TypeDescriptor) else None


def put_type(txn: Txn, found: TypeDescriptor) -> None:
    _check_new_name(found.name)
    txn.put(descriptor_key(found.id), found.to_json())
    txn.put(_name_key(found.database_id, found.name), encode_value(found.id))


def relation_by_name(
    reader: Reader, database: DatabaseDescriptor, name: str
) -> NamedRelation | None:
    """The table, view or sequence called ``name`` in ``database``, if any."""
    raw = reader.get(_name_key(database.id, name)) if _named(name) else None
    if raw is None:
        return None
    found = get_descriptor(reader, int(decode_value(raw)[0]))  # type: ignore[arg-type]
    if isinstance(found, TableDescriptor):
        return None if found.dropped else found
    return found if isinstance(found, ViewDescriptor | SequenceDescriptor) else None


def table_by_id(reader: Reader, table_id: int) -> TableDescriptor | None:
    found = get_descriptor(reader, table_id)
    return found if isinstance(found, TableDescriptor) else None


def _names(reader: Reader, parent_id: int) -> Iterator[tuple[str, int]]:
    prefix = _NS + encode_value(parent_id)
    for kv in reader.scan(prefix, prefix_end(prefix)):
        name, _ = decode_value(kv.key, len(prefix))
        descriptor_id, _ = decode_value(kv.value)
        yield str(name), int(descriptor_id)  # type: ignore[arg-type]


def list_databases(reader: Reader) -> list[DatabaseDescriptor]:
    out = []
    for _name, descriptor_id in _names(reader, 0):
        found = get_descriptor(reader, descriptor_id)
        if isinstance(found, DatabaseDescriptor):
            out.append(found)
    return out


def list_tables(reader: Reader, database: DatabaseDescriptor) -> list[TableDescriptor]:
    out = []
    for _name, descriptor_id in _names(reader, database.id):
        found = table_by_id(reader, descriptor_id)
        if found is not None and not found.dropped:
            out.append(found)
    return out


def list_views(reader: Reader, database: DatabaseDescriptor) -> list[ViewDescriptor]:
    return _named_of(reader, database, ViewDescriptor)


def list_sequences(reader: Reader, database: DatabaseDescriptor) -> list[SequenceDescriptor]:
    return _named_of(reader, database, SequenceDescriptor)


def list_types(reader: Reader, database: DatabaseDescriptor) -> list[TypeDescriptor]:
    """The user-defined types (enums) of ``database``."""
    return _named_of(reader, database, TypeDescriptor)


def _named_of(reader: Reader, database: DatabaseDescriptor, kind: type[_D]) -> list[_D]:
    """The descriptors of ``kind`` that ``database``'s names name."""
    found = (get_descriptor(reader, d) for _name, d in _names(reader, database.id))
    return [descriptor for descriptor in found if isinstance(descriptor, kind)]


def get_user(reader: Reader, name: str) -> User | None:
    raw = reader.get(_user_key(name))
    return None if raw is None else _user(name, raw)


def is_admin(reader: Reader, name: str) -> bool:
    """Whether user ``name`` exists and is an admin: a member of ``admin``, directly or
    through a role that is one."""
    user = get_user(reader, name)
    if user is None:
        return False
    if user.admin:
        return True
    roles = (get_user(reader, role) for role in roles_of(reader, name))
    return any(role is not None and role.admin for role in roles)


def database_owner(database: DatabaseDescriptor) -> str:
    """The user who owns ``database``: ``node`` the system database, root any other."""
    return NODE_USER if database.id == SYSTEM_DATABASE_ID else ROOT


def list_users(reader: Reader) -> list[User]:
    """Every user, by name."""
    return [
        _user(str(decode_value(kv.key, len(_USER))[0]), kv.value)
        for kv in reader.scan(_USER, prefix_end(_USER))
    ]


def _user(name: str, raw: bytes) -> User:
    record = json.loads(raw)
    return User(name, bool(record.get("admin")), record.get("scram"), not record.get("nologin"))


# Writes.


def allocate_id(txn: Txn) -> int:
    raw = txn.get(_SEQ)
    last = int(decode_value(raw)[0]) if raw is not None else FIRST_ID - 1  # type: ignore[arg-type]
    txn.put(_SEQ, encode_value(last + 1))
    return last + 1


def put_database(txn: Txn, database: DatabaseDescriptor) -> None:
    _check_new_name(database.name)
    txn.put(descriptor_key(database.id), database.to_json())
    txn.put(_name_key(0, database.name), encode_value(database.id))


def put_table(
    txn: Txn, table: TableDescriptor, *, name_entry: bool = True, anchor: bytes | None = None
) -> None:
    """Write ``table`` (a new version); with ``name_entry`` also its name. With
    ``anchor``, the descriptor goes out as an intent at once (:meth:`Txn.put_now`), not
    at commit, and the transaction's record lives at key ``anchor``."""
    _check_new_name(table.name)
    if anchor is None:
        txn.put(descriptor_key(table.id), table.to_json())
    else:
        txn.put_now(descriptor_key(table.id), table.to_json(), anchor=anchor)
    if name_entry:
        txn.put(_name_key(table.database_id, table.name), encode_value(table.id))


def put_view(
    txn: Txn, view: ViewDescriptor | SequenceDescriptor, *, name_entry: bool = True
) -> None:
    """Write ``view`` (or a sequence); with ``name_entry`` also its name."""
    _check_new_name(view.name)
    txn.put(descriptor_key(view.id), view.to_json())
    if name_entry:
        txn.put(_name_key(view.database_id, view.name), encode_value(view.id))


def sequence_value_key(sequence: SequenceDescriptor) -> bytes:
    """Where a sequence's last value is kept (absent: none handed out yet): under its
    id and its instance, which no other sequence of that id (one whose creation rolled
    back, say) shares."""
    return _SEQVAL + encode_values([sequence.id, sequence.instance])


def put_name(txn: Txn, parent_id: int, name: str, descriptor_id: int) -> None:
    _check_new_name(name)
    txn.put(_name_key(parent_id, name), encode_value(descriptor_id))


def remove_name(txn: Txn, parent_id: int, name: str) -> None:
    txn.delete(_name_key(parent_id, name))


def remove_descriptor(txn: Txn, descriptor_id: int) -> None:
    txn.delete(descriptor_key(descriptor_id))


def set_changefeed_watch(txn: Txn, table_id: int, job_id: int, *, watching: bool) -> None:
    """Record (or forget) that changefeed job ``job_id`` watches table ``table_id``."""
    key = _CDC + encode_values([table_id, job_id])
    if watching:
        txn.put(key, b"{}")
    else:
        txn.delete(key)


def changefeed_watchers(reader: Reader, table_id: int) -> list[int]:
    """The changefeed jobs watching table ``table_id``."""
    prefix = _CDC + encode_value(table_id)
    return [
        int(decode_value(kv.key, len(prefix))[0])  # type: ignore[arg-type]
        for kv in reader.scan(prefix, prefix_end(prefix))
    ]


def get_privileges(reader: Reader, table_id: int, user: str) -> frozenset[str]:
    """The privileges ``user`` holds on table ``table_id``: granted to it or to a role
    it is a member of, directly or through other roles (admins need none)."""
    held: set[str] = set()
    for grantee in (user, *roles_of(reader, user)):
        held.update(granted_to(reader, table_id, grantee))
    return frozenset(held)


def granted_to(reader: Reader, table_id: int, grantee: str) -> frozenset[str]:
    """The privileges granted to ``grantee`` itself on table ``table_id`` (not those it
    holds through its roles: see :func:`get_privileges`)."""
    raw = reader.get(_GRANT + encode_value(table_id) + encode_value(grantee))
    return frozenset(json.loads(raw)) if raw is not None else frozenset()


def list_memberships(reader: Reader) -> list[tuple[str, str]]:
    """Every ``(role, member)`` membership (but ``admin``'s, kept as
    :attr:`User.admin`), in key order."""
    found = []
    for kv in reader.scan(_MEMBER, prefix_end(_MEMBER)):
        role, pos = decode_value(kv.key, len(_MEMBER))
        member, _ = decode_value(kv.key, pos)
        found.append((str(role), str(member)))
    return found


def roles_of(reader: Reader, user: str) -> set[str]:
    """The roles ``user`` is a member of, directly or through other roles (but
    ``admin``). Costs a scan of every membership, which are few."""
    parents: dict[str, list[str]] = {}
    for role, member in list_memberships(reader):
        parents.setdefault(member, []).append(role)
    found: set[str] = set()
    pending = [user]
    while pending:
        for role in parents.get(pending.pop(), []):
            if role not in found:
                found.add(role)
                pending.append(role)
    return found


def put_membership(txn: Txn, role: str, member: str, *, member_of: bool) -> None:
    """Make ``member`` a member of ``role`` (``member_of``) or no longer one."""
    key = _MEMBER + encode_value(role) + encode_value(member)
    if member_of:
        txn.put(key, b"{}")
    else:
        txn.delete(key)


def list_privileges(
    reader: Reader, table_id: int | None = None
) -> Iterator[tuple[int, str, frozenset[str]]]:
    """``(table id, user, privileges)`` of every grant (on ``table_id`` only, if given),
    in key order."""
    prefix = _GRANT if table_id is None else _GRANT + encode_value(table_id)
    for kv in reader.scan(prefix, prefix_end(prefix)):
        granted_table, pos = decode_value(kv.key, len(_GRANT))
        user, _ = decode_value(kv.key, pos)
        yield int(granted_table), str(user), frozenset(json.loads(kv.value))  # type: ignore[arg-type]


def put_privileges(txn: Txn, table_id: int, user: str, privileges: frozenset[str]) -> None:
    key = _GRANT + encode_value(table_id) + encode_value(user)
    if privileges:
        txn.put(key, json.dumps(sorted(privileges)).encode())
    else:
        txn.delete(key)


def put_user(txn: Txn, user: User) -> None:
    record: dict[str, object] = {"admin": user.admin}
    if user.password_verifier is not None:
        record["scram"] = user.password_verifier
    if not user.can_login:
        record["nologin"] = True
    txn.put(_user_key(user.name), json.dumps(record).encode())


def remove_user(txn: Txn, name: str) -> None:
    """Delete user ``name``, every privilege granted to it and its memberships (as a
    member and as a role)."""
    txn.delete(_user_key(name))
    for table_id, user, _ in list_privileges(txn):
        if user == name:
            put_privileges(txn, table_id, name, frozenset())
    for role, member in list_memberships(txn):
        if name in (role, member):
            put_membership(txn, role, member, member_of=False)


def bootstrap(db: KV) -> None:
    """Create ``defaultdb``, ``postgres``, ``system`` and the ``root`` user if this
    store has no catalog yet; give a catalog made before ``system`` and ``postgres``
    existed those two (``postgres`` unless a database has its name). Safe to run from
    many clients at once: the first commit wins, the rest see it."""
    if db.get(_SEQ) is not None and db.get(descriptor_key(SYSTEM_DATABASE_ID)) is not None:
        return

    def create(txn: Txn) -> None:
        if txn.get(descriptor_key(SYSTEM_DATABASE_ID)) is not None:
            return
        if txn.get(_SEQ) is None:
            put_database(txn, DatabaseDescriptor(allocate_id(txn), DEFAULT_DATABASE))
            put_user(txn, User(ROOT, admin=True))
        put_database(txn, DatabaseDescriptor(SYSTEM_DATABASE_ID, SYSTEM_DATABASE))
        if txn.get(_name_key(0, POSTGRES_DATABASE)) is None:
            put_database(txn, DatabaseDescriptor(POSTGRES_DATABASE_ID, POSTGRES_DATABASE))

    db.run_transaction(create)
