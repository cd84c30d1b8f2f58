"""Bad SQL gets a clear error and changes nothing.

Every statement in ``bad_statements.txt`` (its header describes the format) runs against one
store per module holding a small schema: a few tables with column families, most column
types and some rows. Each must raise :class:`~feedkv.errors.SQLError` (never another
exception) with the SQLSTATE the corpus gives, a message (with its DETAIL, where the
specifics go, as a duplicate key's ``Key (k)=(1) already exists.``) that names the offending part,
a position where the corpus asks for one, and afterwards every table, schema and database
must read exactly as before. A statement that changes something gets the store rebuilt, so
one bad entry cannot fail the ones after it.

Hostile text that is *not* an error (quotes, comment markers, NUL bytes in values) has to
be stored literally; that is tested separately below.
"""

from __future__ import annotations

import contextlib
import json
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import feedkv
from feedkv import DB
from feedkv.errors import SQLError
from feedkv.kv.store import StoreConfig

CORPUS = Path(__file__).with_name("bad_statements.txt")

SCHEMA = [
    "CREATE TABLE kv (k INT PRIMARY KEY, v STRING NOT NULL, n DECIMAL(10,2), f FLOAT,"
    " ok BOOL DEFAULT true, FAMILY main (k, v), FAMILY extra (n, f, ok))",
    "CREATE TABLE events (region STRING, seq INT, at TIMESTAMPTZ NOT NULL, day DATE,"
    " payload JSONB, raw BYTES, tag STRING(8), id UUID, PRIMARY KEY (region, seq),"
    " FAMILY hot (region, seq, at, tag), FAMILY cold (day, payload, raw, id))",
    "CREATE TABLE notes (body STRING)",
    "CREATE DATABASE shop",
    "CREATE TABLE shop.items (sku STRING PRIMARY KEY, qty INT NOT NULL)",
    "INSERT INTO kv VALUES (1, 'one', 1.50, 0.5, true), (2, 'two', NULL, NULL, false),"
    " (3, 'three', -7.25, 1e10, NULL)",
    "INSERT INTO events VALUES ('eu', 1, '2024-01-01 00:00:00+00', '2024-01-01',"
    " '{\"a\": 1}', x'0001', 'x', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'),"
    " ('us', 2, '2024-06-01 12:00:00+00', NULL, '[1, 2]', NULL, NULL, NULL)",
    "INSERT INTO notes VALUES ('hello'), ('world')",
    "INSERT INTO shop.items VALUES ('apple', 3), ('pear', 0)",
]

# Everything a bad statement might disturb: rows (in key order), schemas and names.
CONTENTS = [
    "SELECT * FROM kv ORDER BY k",
    "SELECT * FROM events ORDER BY region, seq",
    "SELECT rowid, body FROM notes ORDER BY rowid",
    "SELECT * FROM shop.items ORDER BY sku",
    "SHOW CREATE TABLE kv",
    "SHOW CREATE TABLE events",
    "SHOW CREATE TABLE notes",
    "SHOW CREATE TABLE shop.items",
    "SHOW TABLES",
    "SHOW TABLES FROM shop",
    "SHOW DATABASES",
]

# What a message must never show: Python and sqlglot internals mean nothing to a user.
LEAKS = re.compile(
    r"Traceback|<class |<Token|TokenType\.|sqlglot\.|object at 0x|Decimal\(|datetime\.|UUID\("
)
GENERIC = {"error", "syntax error", "unexpected input", "internal error"}
NEAR = re.compile(r'at or near "(.+?)"', re.S)
MACRO = re.compile(r"\$\{(?:(\d+)\*(.*?)|U\+([0-9A-Fa-f]{4,6}))\}")
CALL_SEPARATOR = "..."


@dataclass(frozen=True)
class Entry:
    """One corpus entry: the calls to make on a fresh session (the last must fail)."""

    line: int
    calls: tuple[str, ...]
    code: str
    args: tuple[Any, ...] = ()
    names: tuple[str, ...] = ()
    positioned: bool = False
    known_bug: bool = False

    @property
    def id(self) -> str:
        shown = " ".join(self.calls[-1].split())
        shown = "".join(c if c.isprintable() and c.isascii() else "?" for c in shown)
        if len(shown) > 50:
            shown = shown[:47] + "..."
        return f"L{self.line}:{shown}"


def expand(text: str) -> str:
    """``${N*text}`` repeated, ``${U+XXXX}`` as the code point (see the corpus header)."""

    def replace(match: re.Match[str]) -> str:
        count, repeated, code_point = match.groups()
        if code_point is not None:
            return chr(int(code_point, 16))
        return str(repeated) * int(count)

    return MACRO.sub(replace, text)


def load_corpus(path: Path) -> list[Entry]:
    entries: list[Entry] = []
    lines: list[str] = []
    start = 0
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("#") or not line.strip():
            continue
        if not line.startswith("----"):
            start = start or number
            lines.append(line)
            continue
        if not lines:
            raise ValueError(f"{path.name}:{number}: expectation without a statement")
        entries.append(_entry(path, start, lines, shlex.split(line[4:])))
        lines, start = [], 0
    if lines:
        raise ValueError(f"{path.name}:{start}: statement without a '----' expectation")
    return entries


def _entry(path: Path, line: int, lines: list[str], words: list[str]) -> Entry:
    if not words or not re.fullmatch(r"[0-9A-Z]{5}", words[0]):
        raise ValueError(f"{path.name}:{line}: expected a SQLSTATE after '----', got {words}")
    calls: list[list[str]] = [[]]
    for text in lines:
        if text == CALL_SEPARATOR:
            calls.append([])
        else:
            calls[-1].append(text)
    args: tuple[Any, ...] = ()
    names: list[str] = []
    positioned = False
    known_bug = False
    for word in words[1:]:
        key, _, value = word.partition("=")
        if word == "pos":
            positioned = True
        elif word == "known-bug":
            known_bug = True
        elif key == "names" and value:
            names.append(value)
        elif key == "args":
            args = tuple(json.loads(value))
        else:
            raise ValueError(f"{path.name}:{line}: unknown option {word!r}")
    return Entry(
        line,
        tuple(expand("\n".join(call)) for call in calls),
        words[0],
        args,
        tuple(names),
        positioned,
        known_bug,
    )


ENTRIES = load_corpus(CORPUS)


class Store:
    """A store holding :data:`SCHEMA`, rebuilt from scratch by :meth:`reset`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.generation = 0
        self.db: DB | None = None
        self.baseline: list[Any] = []
        self.reset()

    def reset(self) -> None:
        self.close()
        self.generation += 1
        config = StoreConfig(closed_ts_interval_s=0.01, push_poll_s=0.01, sync=False)
        self.db = feedkv.connect(self.root / f"store-{self.generation}", config=config)
        for statement in SCHEMA:
            self.db.sql(statement)
        self.baseline = self.contents()

    def contents(self) -> list[Any]:
        """Every row, schema and name, read with a session of its own."""
        session = self.connection.session()
        out: list[Any] = []
        try:
            for query in CONTENTS:
                try:
                    out.append((query, session.execute(query).rows))
                except SQLError as exc:
                    out.append((query, f"SQLSTATE {exc.code}: {exc.message}"))
        finally:
            session.close()
        return out

    @property
    def connection(self) -> DB:
        assert self.db is not None
        return self.db

    def close(self) -> None:
        if self.db is not None:
            self.db.close()
            self.db = None


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    built = Store(tmp_path_factory.mktemp("bad-input"))
    yield built
    built.close()


def run_entry(store: Store, entry: Entry) -> Exception | None:
    """Make the entry's calls on one fresh session; what the last call raised."""
    session = store.connection.session()
    try:
        for setup in entry.calls[:-1]:
            # The setup of a transaction-misuse entry may fail on purpose.
            with contextlib.suppress(SQLError):
                session.execute(setup)
        try:
            session.execute(entry.calls[-1], *entry.args)
        except Exception as exc:
            return exc
        return None
    finally:
        session.close()  # rolls back an open transaction


def problems_with(entry: Entry, error: Exception | None) -> list[str]:
    """Everything wrong with what the entry raised (nothing: the error is right)."""
    if error is None:
        return [f"succeeded; expected SQLSTATE {entry.code}"]
    if not isinstance(error, SQLError):
        return [f"raised {type(error).__name__} (not SQLError): {str(error)[:300]}"]
    text = entry.calls[-1]
    message = error.message
    # NB: what a user reads: psql and str() show the DETAIL after the message
    shown = message if error.detail is None else f"{message}\nDETAIL: {error.detail}"
    found: list[str] = []
    if error.code != entry.code:
        found.append(f"SQLSTATE {error.code}, expected {entry.code}")
    if not message.strip() or message.strip().lower() in GENERIC:
        found.append("the message says nothing")
    if str(error) != shown:
        found.append("str(error) differs from its message and detail")
    if LEAKS.search(shown):
        found.append("the message shows internals")
    found.extend(f"the message does not name {name!r}" for name in _missing(entry, shown))
    if entry.positioned and error.position is None:
        found.append("no position")
    if error.position is not None:
        found.extend(_position_problems(text, message, error.position))
    if found:
        found.append(f"message: {shown[:300]!r}")
    return found


def _missing(entry: Entry, message: str) -> list[str]:
    return [name for name in entry.names if name.lower() not in message.lower()]


def _position_problems(text: str, message: str, position: int) -> list[str]:
    if not 1 <= position <= len(text) + 1:
        return [f"position {position} is outside the statement (1..{len(text) + 1})"]
    near = NEAR.search(message)
    if near and not text[position - 1 :].lower().startswith(near.group(1).lower()):
        shown = text[position - 1 : position + 19]
        return [f"position {position} points at {shown!r}, the message at {near.group(1)!r}"]
    return []


def _param(entry: Entry) -> Any:
    # NB: strict: when a known bug is fixed, the entry fails until its marker goes.
    marks = [pytest.mark.xfail(strict=True, reason="known bug")] if entry.known_bug else []
    return pytest.param(entry, id=entry.id, marks=marks)


@pytest.mark.parametrize("entry", [_param(e) for e in ENTRIES])
def test_bad_statement_fails_clearly_and_changes_nothing(store: Store, entry: Entry) -> None:
    error = run_entry(store, entry)
    found = problems_with(entry, error)
    after = store.contents()
    if after != store.baseline:
        pairs = zip(after, store.baseline, strict=True)
        changed = [query for (query, now), (_, was) in pairs if now != was]
        found.append(f"changed what {changed} read")
        store.reset()
    if found:
        pytest.fail(f"{CORPUS.name}:{entry.line}: " + "; ".join(found), pytrace=False)


def test_corpus_covers_every_kind_of_bad_input() -> None:
    assert len(ENTRIES) >= 220
    codes = {entry.code for entry in ENTRIES}
    required = {
        "42601",  # syntax error
        "42P01",  # unknown table
        "42703",  # unknown column
        "3D000",  # unknown database
        "42883",  # unknown function or operator
        "42704",  # unknown type
        "42804",  # type mismatch
        "22P02",  # bad text for a type
        "23502",  # NOT NULL
        "23505",  # duplicate key
        "08P01",  # wrong number of placeholder values
        "0A000",  # unsupported feature
        "54000",  # key too long
        "42P07",  # duplicate table
        "42701",  # duplicate column
        "42P16",  # two primary keys
        "2BP01",  # DROP DATABASE of a non-empty database
        "25P01",  # COMMIT without BEGIN
        "25P02",  # a statement after an error in a transaction
    }
    assert required <= codes, f"no entries for {sorted(required - codes)}"
    assert any(entry.positioned for entry in ENTRIES)


HOSTILE_VALUES = [
    "'; DROP TABLE kv; --",
    "' OR '1'='1",
    "Robert'); DROP TABLE notes;--",
    "1; DELETE FROM kv",
    "a\x00b",
    "\x00",
    "$1",
    "$$ $tag$",
    "/* not a comment",
    "*/",
    "-- not a comment",
    "\\",
    "\\'",
    "\\x41",
    "'' ''",
    '"kv"',
    "%_",
    "\r\n\t",
    "",
    " ",
    "😀 naïve 日本語",
    "\u202e\u200b\ufeff",
    "E'\\n' U&'\\0041'",
    "x" * 300,
]


def test_hostile_values_are_stored_literally(db: DB) -> None:
    """Quotes, comment markers, placeholders and NUL bytes inside values are data: they
    round-trip through placeholders and through quoted literals, match only themselves,
    and run nothing."""
    db.sql("CREATE TABLE kv (k INT PRIMARY KEY, v STRING NOT NULL)")
    db.sql("CREATE TABLE notes (body STRING)")
    db.sql("INSERT INTO notes VALUES ('keep')")
    for i, value in enumerate(HOSTILE_VALUES):
        db.sql("INSERT INTO kv (k, v) VALUES ($1, $2)", 2 * i, value)
        quoted = "'" + value.replace("'", "''") + "'"
        db.sql(f"INSERT INTO kv (k, v) VALUES ({2 * i + 1}, {quoted})")
    for i, value in enumerate(HOSTILE_VALUES):
        assert db.sql("SELECT v FROM kv WHERE k = $1", 2 * i).rows == [(value,)]
        assert db.sql(f"SELECT v FROM kv WHERE k = {2 * i + 1}").rows == [(value,)]
        matches = db.sql("SELECT k FROM kv WHERE v = $1 ORDER BY k", value).rows
        assert matches == [(2 * i,), (2 * i + 1,)], value
    assert db.sql("SELECT count(*) FROM kv").rows == [(2 * len(HOSTILE_VALUES),)]
    assert db.sql("SELECT body FROM notes").rows == [("keep",)]
    tables = [row[1] for row in db.sql("SHOW TABLES").rows]
    assert tables == ["kv", "notes"]


def test_hostile_keys_and_bytes_are_stored_literally(db: DB) -> None:
    db.sql("CREATE TABLE blobs (name STRING PRIMARY KEY, data BYTES)")
    for value in ("'; DROP TABLE blobs; --", "a\x00b", "\x00", "' OR 1=1 --"):
        db.sql("INSERT INTO blobs VALUES ($1, $2)", value, value.encode() + b"\xff'\x00")
    rows = db.sql("SELECT name, data FROM blobs ORDER BY name").rows
    assert rows == sorted(
        (value, value.encode() + b"\xff'\x00")
        for value in ("'; DROP TABLE blobs; --", "a\x00b", "\x00", "' OR 1=1 --")
    )
    assert db.sql("SELECT name FROM blobs WHERE name = $1", "' OR '1'='1").rows == []
    assert db.sql("SELECT name FROM blobs WHERE name LIKE $1", "%' OR '1'='1").rows == []


def test_like_pattern_of_many_wildcards_has_no_runaway_backtracking(db: DB) -> None:
    """A run of '%' is many empty runs between them, each found where the last ended,
    so seventy-two of them do not try every split of the value (see
    tests/sql/test_like_matching.py)."""
    db.sql("CREATE TABLE words (w STRING PRIMARY KEY)")
    db.sql("INSERT INTO words VALUES ('three'), ('xx')")
    rows = db.sql("SELECT w FROM words WHERE w LIKE $1", "%" * 72 + "x").rows
    assert rows == [("xx",)]
