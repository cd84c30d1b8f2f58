"""``IMPORT INTO t [(columns)] CSV DATA ('file:///...', ...) [WITH ...]``: load CSV files
into an existing table as committed values at one timestamp, as CockroachDB's IMPORT
does, instead of as transactions.

The import runs in four steps, none inside a transaction of the caller's (inside
``BEGIN`` it is refused, 25001, as in CockroachDB):

1. **Read**: every file is read and every row made into its KV pairs before anything is
   written: parsed by pyarrow, each column converted whole and the rows encoded in bulk
   (or, for what that does not handle, and to find a bad row, row by row). A value
   that does not convert, a missing NOT NULL value, a row with the wrong number of
   fields or a key twice in the files is refused with its file and line, and nothing
   changes. Files are ``file://`` URIs, or ``nodelocal://`` ones of the node that
   runs the statement; a node reads them only below its external I/O directory
   (``--external-io-dir``, as its ``file://`` sinks write).
2. **Offline**: the table's next descriptor version is written with ``offline`` set (a
   schema change, which waits for the leases on the current version like any other).
   Statements then refuse the table (55000), and a changefeed watching it ends at that
   version's timestamp with an error: CockroachDB documents that IMPORT INTO "will cause
   any changefeeds running on the targeted table to fail". A changefeed created after
   the import finds the rows in its initial scan.
3. **Write**: the pairs go to their ranges as plain committed values at the import's
   timestamp, taken after step 2 (:meth:`KVClient.ingest_columns`): no intents, no transaction
   record, nothing to resolve, 10,000 rows an :class:`~feedkv.kv.api.Ingest` command
   (each all or none). NB: the closed timestamp wins
   over "one timestamp": a command that reaches its range after the range closed that
   timestamp (an import that runs longer than the closed-timestamp target) is written
   just above the closed timestamp instead, so a large import's rows carry a few
   timestamps between the offline and the online versions; nothing can read them in
   between. Every key must be new, as CockroachDB's IMPORT INTO cannot overwrite rows
   either: a row that is there already fails the import (23505) and the rows written
   so far are deleted.
4. **Online**: the next descriptor version, without ``offline``, above every imported
   value. Files read column by column into a table that held no row, or whose
   columnar copy the gateway holds (read once the table is offline,
   :func:`~feedkv.sql.columnar.rows_before`): the gateway's columnar cache is handed
   the table's copy, made from the parsed columns (merged with that copy), for the
   first analytic query (:func:`~feedkv.sql.columnar.rows_imported`); otherwise the
   cache copies the table in the background.

A table with secondary indexes, CHECKs or foreign keys is refused (0A000): the import
writes rows only, as CockroachDB's IMPORT INTO into a table with indexes is not done
here yet (drop them, import, add them again).

NB: a process that dies during steps 2-4 leaves the table offline (CockroachDB's import
job would be resumed or reverted by another node; feedkv's is not a job yet).

Options (``WITH``): ``delimiter`` (one character, default ``,``), ``nullif`` (the field
text read as NULL; by default none is), ``skip`` (lines skipped at the top of each file,
default 0).
"""

from __future__ import annotations

import csv
import itertools
import operator
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from feedkv.errors import ConditionFailedError, InvalidArgumentError, SQLError
from feedkv.security.external_io import NODELOCAL, confine, nodelocal_parts, nodelocal_to_file
from feedkv.sql import statements as st
from feedkv.sql.columnar import rows_before, rows_committed, rows_imported
from feedkv.sql.computed import fill_computed, refuse_writes
from feedkv.sql.descriptor import Column, TableDescriptor
from feedkv.sql.dml import duplicate_key, duplicate_key_at
from feedkv.sql.execution import Execution, Result
from feedkv.sql.plan import column_default
from feedkv.sql.row_codec import row_kvs, rows_pairs
from feedkv.sql.types import Kind, coerce, coerce_column
from feedkv.util.hlc import Timestamp

if TYPE_CHECKING:
    from feedkv.kv.db import KVClient
    from feedkv.kv.txn import Txn

__all__ = ["import_into"]

_OPTIONS = ("delimiter", "nullif", "skip")


def import_into(
    s: st.ImportInto,
    db: KVClient,
    in_transaction: Callable[[Callable[[Execution], Any]], Any],
    plain: Execution,
    external_io_dir: Path | None,
) -> Result:
    """Run ``s`` (see the module docstring). ``in_transaction(fn)`` runs ``fn`` with an
    execution in a transaction of its own, retried on conflicts, and returns its result;
    ``plain`` is an execution outside any transaction (for DEFAULT expressions);
    ``external_io_dir``: files only below it (``None``: anywhere)."""
    delimiter, nullif, skip = _options(s.options)
    paths = [_path(uri, external_io_dir, db.gateway_node) for uri in s.uris]
    desc: TableDescriptor = in_transaction(lambda ex: _check_table(ex, s))
    if desc.constrained:
        raise SQLError(
            "0A000",
            f"IMPORT INTO {desc.name!r}: the table has secondary indexes or constraints, "
            "which an import does not write or check; import into a table without them "
            "and add them afterwards",
        )
    read = _read_columns(desc, s.columns, paths, delimiter, nullif, skip, plain)
    if read is None:  # NB: the row by row reading finds the bad row and names its line
        read = _read(desc, s.columns, paths, delimiter, nullif, skip, plain)
    keys, values, count = read.keys, read.values, read.count

    def take_offline(ex: Execution) -> TableDescriptor:
        current = _check_table(ex, s)
        if current != desc:
            raise SQLError("40001", f"table {desc.name!r} changed while its files were read")
        offline = current.bumped(offline=True)
        ex.changing(current)
        ex.publish(offline)
        return offline

    offline = in_transaction(take_offline)
    # NB: nothing but the import writes the table while it is offline: up to the highest
    # timestamp the rows are written at, it holds what it held before ts, and them
    before = rows_before(db, desc) if read.columns is not None else None
    ts = db.now()
    if before is not None and before.as_of >= ts:
        before = None
    done = [0]
    try:
        highest = db.ingest_columns(keys, values, ts, written=lambda n: done.__setitem__(0, n))
    except BaseException as exc:
        _delete(db, keys[: done[0]])
        in_transaction(lambda ex: _bring_online(ex, s.table, offline, None))
        if isinstance(exc, ConditionFailedError):
            raise duplicate_key_at(desc, exc.key) from None
        raise
    online = in_transaction(lambda ex: _bring_online(ex, s.table, offline, highest))
    handed = (
        before is not None
        and read.columns is not None
        and rows_imported(db, online, highest, before, keys, read.columns, read.order)
    )
    if not handed:
        rows_committed(db, desc.id, count)
    return Result(tag=f"IMPORT {count}")


def _check_table(ex: Execution, s: st.ImportInto) -> TableDescriptor:
    ex.require_admin("IMPORT INTO (it reads files on the node)")
    return ex.table(s.table, "INSERT")


def _bring_online(
    ex: Execution, name: st.TableName, offline: TableDescriptor, above: Timestamp | None
) -> TableDescriptor:
    """Write the version after ``offline`` without it, above ``above`` (the highest
    imported value's timestamp) when given; returns that version."""
    if above is not None:
        ex.write_txn.advance_to(above.next())
    current = ex.session.resolve_table(ex.read_source, name.database, name.name)
    if current.id != offline.id or current.version != offline.version:
        raise SQLError(
            "XX000",
            f"table {offline.name!r} is at version {current.version}, not the offline "
            f"version {offline.version} its import wrote",
        )
    ex.changing(current)
    online = current.bumped(offline=False)
    ex.publish(online)
    return online


def _delete(db: KVClient, keys: list[bytes]) -> None:
    """Delete ``keys``, the rows a failed import wrote, a page a transaction (the table
    is offline: nobody else writes it)."""
    page = 5000
    for start in range(0, len(keys), page):
        chunk = keys[start : start + page]

        def delete(txn: Txn, chunk: list[bytes] = chunk) -> None:
            for key in chunk:
                txn.delete(key)

        db.run_transaction(delete)


def _options(options: tuple[tuple[str, str | None], ...]) -> tuple[str, str | None, int]:
    delimiter, nullif, skip = ",", None, 0
    for name, value in options:
        if name not in _OPTIONS:
            raise SQLError(
                "22023",
                f"unknown IMPORT option {name!r}; the options are {', '.join(_OPTIONS)}",
            )
        if value is None:
            raise SQLError("22023", f"IMPORT option {name} needs a value ({name} = '...')")
        if name == "delimiter":
            if len(value) != 1 or value in ('"', "\n", "\r"):
                raise SQLError(
                    "22023", f"IMPORT option delimiter must be one character, not {value!r}"
                )
            delimiter = value
        elif name == "nullif":
            nullif = value
        else:
            if not value.isdigit():
                raise SQLError(
                    "22023", f"IMPORT option skip must be a number of lines, not {value!r}"
                )
            skip = int(value)
    return delimiter, nullif, skip


def _path(uri: str, root: Path | None, gateway: Callable[[], int]) -> Path:
    """The file ``uri`` names: ``file:///absolute/path`` (or a path relative to
    ``root``, ``file://relative``... as the sinks take them), below ``root`` if given;
    or ``nodelocal://<node>/path``, as CockroachDB's examples name an import's files,
    below ``root`` of the gateway node, the one that reads them."""
    parts = urlsplit(uri)
    if parts.scheme == NODELOCAL:
        uri = _nodelocal_file(uri, root, gateway)
        parts = urlsplit(uri)
    if parts.scheme != "file":
        raise SQLError(
            "0A000",
            "IMPORT INTO reads file:// and nodelocal:// URIs only, not "
            f"{parts.scheme or 'a bare path'} ({uri!r})",
        )
    text = unquote(parts.netloc + parts.path)
    if not text:
        raise SQLError("22023", f"the import URI {uri!r} names no file")
    if root is not None:
        try:
            return confine(text, root)
        except InvalidArgumentError as exc:
            raise SQLError("42501", f"IMPORT INTO {uri!r}: {exc}") from None
    return Path(text)


def _nodelocal_file(uri: str, root: Path | None, gateway: Callable[[], int]) -> str:
    """The ``file://`` URI of ``nodelocal://<node>/path`` on the gateway node. NB: the
    gateway reads the files itself (an import has no blob service to read another
    node's, as a changefeed's sink has to write them), so the node named must be it."""
    if root is None:
        raise SQLError(
            "0A000",
            f"IMPORT INTO {uri!r}: nodelocal:// names a file below a node's external I/O "
            "directory, which a session outside `feedkv start` has none of: use file://",
        )
    try:
        node, _relative = nodelocal_parts(uri)
    except InvalidArgumentError as exc:
        raise SQLError("22023", str(exc)) from None
    here = gateway()
    if node is not None and node != here:
        raise SQLError(
            "0A000",
            f"IMPORT INTO {uri!r}: node n{here} runs this import and reads its files "
            f"from its own external I/O directory only: copy the file there and name "
            f"it nodelocal://{here}/... or nodelocal://self/..., or connect to n{node}",
        )
    try:
        return nodelocal_to_file(uri, root)
    except InvalidArgumentError as exc:
        raise SQLError("42501", f"IMPORT INTO {uri!r}: {exc}") from None


def _lines(path: Path, skip: int, at: list[int]) -> Iterator[str]:
    """The lines of ``path`` after the first ``skip``, noting in ``at[0]`` the number of
    the last one taken (csv joins a quoted field's lines: a row's number is its last)."""
    try:
        with path.open(newline="", encoding="utf-8") as f:
            for number, line in enumerate(f, start=1):
                if number > skip:
                    at[0] = number
                    yield line
    except FileNotFoundError:
        raise SQLError(
            "58P01", f"could not open file {str(path)!r} for IMPORT: no such file"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SQLError("58030", f"could not read file {str(path)!r} for IMPORT: {exc}") from exc


def _targets(desc: TableDescriptor, columns: tuple[str, ...] | None) -> list[Column]:
    """The columns the files give, in order: those named, or every visible column but
    the computed ones (a computed column named is refused)."""
    targets = (
        [desc.column(name) for name in columns]
        if columns is not None
        else [c for c in desc.visible_columns if c.computed is None]
    )
    if len({c.id for c in targets}) != len(targets):
        raise SQLError("42701", "a column is listed more than once in IMPORT INTO")
    refuse_writes(targets)
    return targets


def _read_columns(
    desc: TableDescriptor,
    columns: tuple[str, ...] | None,
    paths: list[Path],
    delimiter: str,
    nullif: str | None,
    skip: int,
    plain: Execution,
) -> _Read | None:
    """What :func:`_read` returns, read column by column: pyarrow parses the files, each
    column is converted as a whole (:func:`coerce_column`) and the rows are encoded in
    bulk (:func:`rows_pairs`). ``None`` when something is wrong with the data (a bad
    value or row, a NULL where none may be, a key twice) or the table's layout is not
    one :func:`rows_pairs` encodes, or has computed columns: :func:`_read` then reads
    the files row by row, and finds and names the bad line."""
    import pyarrow as pa  # NB: here, not at the top: it takes a while to import
    from pyarrow import csv as pa_csv

    targets = _targets(desc, columns)
    if len(targets) < 2:
        return None  # NB: csv reads an empty line as no field, pyarrow as one empty field
    if any(c.computed is not None for c in desc.columns):
        return None  # computed row by row (fill_computed)
    names = [f"c{i}" for i in range(len(targets))]
    texts: list[list[Any]] = [[] for _ in targets]
    parsed: list[list[Any]] = [[] for _ in targets]  # each column's Arrow arrays
    # NB: INT columns parsed by pyarrow too, as ints (no str per field, no int() of it);
    # a file with a field that is no int is read again as text, which coerce_column
    # converts or refuses
    ints = [column.type.kind is Kind.INT for column in targets]

    def read_csv(path: Path, ints: list[bool]) -> Any:
        return pa_csv.read_csv(
            path,
            read_options=pa_csv.ReadOptions(column_names=names, skip_rows=skip),
            parse_options=pa_csv.ParseOptions(
                delimiter=delimiter, newlines_in_values=True, ignore_empty_lines=False
            ),
            convert_options=pa_csv.ConvertOptions(
                column_types={
                    name: pa.int64() if parse else pa.string()
                    for name, parse in zip(names, ints, strict=True)
                },
                null_values=[nullif] if nullif is not None else [],
                strings_can_be_null=nullif is not None,
                quoted_strings_can_be_null=nullif is not None,
            ),
        )

    try:
        for path in paths:
            try:
                table = read_csv(path, ints)
            except pa.ArrowInvalid:
                if not any(ints):
                    raise
                table = read_csv(path, [False] * len(targets))
            for into, arrays, read in zip(texts, parsed, table.columns, strict=True):
                into.extend(read.to_pylist())
                arrays.extend(read.chunks)
    except (pa.ArrowException, OSError):
        return None
    count = len(texts[0])
    context = plain.context
    values: dict[int, list[Any]] = {}
    # NB: a column pyarrow parsed as it is stored (ints, plain strings) goes into the
    # columnar copy as parsed, not converted to Arrow again from its Python values
    as_parsed: dict[int, Any] = {}
    try:
        for column, text, arrays in zip(targets, texts, parsed, strict=True):
            values[column.id] = coerce_column(text, column.type, column.name)
            if values[column.id] is text and arrays:
                as_parsed[column.id] = pa.chunked_array(arrays)
        for column in desc.columns:
            if column.id in values:
                continue
            make = column_default(column)
            values[column.id] = (
                coerce_column([make((), context) for _ in range(count)], column.type, column.name)
                if make
                else [None] * count
            )
    except SQLError:
        return None
    if any(None in values[c.id] for c in desc.columns if not c.nullable):
        return None
    try:
        encoded = rows_pairs(desc, values)
    except InvalidArgumentError:
        return None
    if encoded is None:
        if len(desc.families) > 1:
            return None
        rows = [dict(zip(values, row, strict=True)) for row in zip(*values.values(), strict=True)]
        # NB: one family: a pair per row, and its value is never None (an empty row's is b"")
        pairs = [next(iter(row_kvs(desc, row).items())) for row in rows]
        keys, kv_values = [key for key, _ in pairs], [value or b"" for _, value in pairs]
    else:
        keys, kv_values = encoded
    by_column = {**values, **as_parsed}
    if _ascending(keys):  # NB: strictly: no key twice
        return _Read(keys, kv_values, count, by_column)
    # NB: columns, not pairs: no tuple per row to sort
    order = sorted(range(len(keys)), key=keys.__getitem__)
    keys, kv_values = (
        list(map(keys.__getitem__, order)),
        list(map(kv_values.__getitem__, order)),
    )
    if not _ascending(keys):
        return None  # a key twice
    return _Read(keys, kv_values, count, by_column, order)


@dataclass(frozen=True, slots=True)
class _Read:
    """What the files hold: the rows' KV pairs sorted by key (``keys``, ``values``) and
    the number of rows; when read column by column, also the rows' coerced values by
    column id (every column of the table), in the files' order, and, when that is not
    key order, ``order``: the row of ``keys[n]`` is ``order[n]``."""

    keys: list[bytes]
    values: list[bytes]
    count: int
    columns: dict[int, Any] | None = None  # a list, or the Arrow column pyarrow parsed
    order: list[int] | None = None


def _ascending(keys: list[bytes]) -> bool:
    """Whether ``keys`` ascend strictly (in C: no Python code per key)."""
    return all(map(operator.lt, keys, itertools.islice(keys, 1, None)))


def _read(
    desc: TableDescriptor,
    columns: tuple[str, ...] | None,
    paths: list[Path],
    delimiter: str,
    nullif: str | None,
    skip: int,
    plain: Execution,
) -> _Read:
    """Every row of the files as KV pairs, sorted by key (their keys and their values),
    and the number of rows."""
    targets = _targets(desc, columns)
    filled = [
        (c, column_default(c)) for c in desc.columns if c not in targets and c.computed is None
    ]
    required = [c for c in desc.columns if not c.nullable]
    width = len(targets)
    context = plain.context
    pairs: dict[bytes, bytes] = {}
    count = 0
    for path in paths:
        at = [0]
        for fields in csv.reader(_lines(path, skip, at), delimiter=delimiter):
            if len(fields) != width:
                raise SQLError(
                    "22P04",
                    f"IMPORT {path.name}, line {at[0]}: expected {width} fields, got {len(fields)}",
                )
            row: dict[int, Any] = {}
            try:
                for column, text in zip(targets, fields, strict=True):
                    row[column.id] = (
                        None if text == nullif else coerce(text, column.type, column.name)
                    )
                for column, make in filled:
                    row[column.id] = (
                        coerce(make((), context), column.type, column.name) if make else None
                    )
                fill_computed(desc, row, context)
            except SQLError as exc:
                raise SQLError(
                    exc.code, f"IMPORT {path.name}, line {at[0]}: {exc.message}"
                ) from None
            for column in required:
                if row.get(column.id) is None:
                    raise SQLError(
                        "23502",
                        f'IMPORT {path.name}, line {at[0]}: null value in column "{column.name}" '
                        "violates not-null constraint",
                    )
            kvs = row_kvs(desc, row)
            first = next(iter(kvs))
            if first in pairs:
                raise SQLError(
                    "23505", f"IMPORT {path.name}, line {at[0]}: {duplicate_key(desc, row).message}"
                )
            count += 1
            for key, value in kvs.items():
                if value is not None:
                    pairs[key] = value
    ordered = sorted(pairs.items())
    return _Read([key for key, _ in ordered], [value for _, value in ordered], count)
