"""`feedkv bench logictest`: CockroachDB's SQL logic tests (``pkg/sql/logictest/testdata/
logic_test/<name>``) run against an embedded feedkv, as a pass rate.

Each file runs on a fresh store, in a child process (a statement that hangs costs that
file its remaining records, not the run), in database ``test`` as user ``root``, with a
user ``testuser`` for ``user testuser`` blocks, as CockroachDB's runner sets up. Every
record (a ``statement`` or a ``query``) ends as one of:

- ``pass``: what CockroachDB's file expects.
- ``wrong``: feedkv answered, and differently: other rows, or success where CockroachDB
  refuses the statement. Issue 46's metric: these are silent wrong answers.
- ``unsupported``: feedkv refused with a "not supported" shape of error (SQLSTATE
  0A000, 42601 syntax, 42883 unknown function, or a message saying so).
- ``error``: feedkv refused with another error where CockroachDB succeeds, or refused
  with another message than the expected error's (``error_mismatch``), or crashed with a
  non-SQL exception (``crash``, counted here and listed).
- ``skip``: a ``skipif``/``onlyif`` for another configuration, or a directive this
  runner does not run (``statement async``, ``repeat``...).
- ``outdated``: the file's expectation is an older CockroachDB's, and feedkv gives what
  today's CockroachDB does (``bench/_logictest_modern.py`` lists each such record, with
  today's expectation and what changed; a record there that differs from today's
  expectation too keeps its outcome). Counted as ran, not as passed.

Results are formatted as CockroachDB's runner does: ``NULL``, ``true``/``false``, the
empty string as ``·``, FLOATs as CockroachDB's text of them, values compared as
whitespace-separated tokens, ``rowsort``/``valuesort`` sorting both sides, and ``N values
hashing to MD5`` hashing each value and a newline.

The files are not shipped: fetch them into a directory and pass ``--dir``. Prints one
JSON object: per file and in total the counts and pass rate, and the first wrong
answers (file, line, SQL, expected, got).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import hashlib
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CONFIG = "local"  # the CockroachDB logictest configuration we stand for
# ``# LogicTest:`` names that include it (older files say ``default``).
RUNS_HERE = frozenset({CONFIG, "default", "default-configs"})
ENGINE = "cockroachdb"  # sqllogictest's engine name, for plain ``skipif``/``onlyif``
OUTCOMES = ("pass", "wrong", "unsupported", "error", "skip", "outdated")
UNSUPPORTED_CODES = frozenset({"0A000", "42601", "42883"})
UNSUPPORTED_WORDS = re.compile(
    r"unsupported|not supported|not implemented|unimplemented|unrecognized configuration", re.I
)
EXPLAIN = re.compile(r"\bEXPLAIN\b|SHOW KV TRACE", re.I)
HASHED = re.compile(r"^(\d+) values? hashing to ([0-9a-f]{32})$")
SKIPPED_DIRECTIVES = frozenset(
    {
        "repeat",
        "sleep",
        "awaitstatement",
        "awaitquery",
        "upgrade",
        "retry",
        "kvtrace",
        "traceoff",
        "traceon",
        "cluster-opt",
        "copy",
        "copy-error",
        "skip_on_retry",
        "reset",
        "partialsort",
        "replace",
    }
)


@dataclass
class Record:
    """One record of a logic-test file: a ``statement``, ``query`` or ``let``, or a
    directive (``user``...) that changes how the next records run."""

    kind: str  # statement | query | let | user | halt | unknown
    line: int
    header: str
    sql: str = ""
    expect_error: bool = False
    error_code: str = ""  # pgcode XXXXX
    error_regex: str = ""
    count: int | None = None  # statement count N
    types: str = ""
    sort: str = "nosort"  # nosort | rowsort | valuesort | partialsort
    partial: list[int] = field(default_factory=list)  # partialsort's key columns
    colnames: bool = False
    expected: list[str] = field(default_factory=list)
    skip_reason: str = ""  # set: this record does not run here, and why


def _conditions_skip(words: list[str]) -> str:
    """The reason a ``skipif``/``onlyif`` line keeps the next record from running here,
    or ``""``."""
    verb, rest = words[0], words[1:]
    if rest and rest[0] == "config":
        configs = [c for c in rest[1:] if not c.startswith("#") and not c.isdigit()]
        mentioned = CONFIG in configs
        if verb == "skipif":
            return f"skipif config {' '.join(configs)}" if mentioned else ""
        return "" if mentioned else f"onlyif config {' '.join(configs)}"
    engine = rest[0] if rest else ""
    if verb == "skipif":
        return f"skipif {engine}" if engine == ENGINE else ""
    return "" if engine == ENGINE else f"onlyif {engine}"


def _file_skip(first_lines: list[str]) -> str:
    """The reason a ``# LogicTest: ...`` header keeps the whole file from running in the
    ``local`` configuration, or ``""``."""
    for line in first_lines:
        if line.startswith("# LogicTest:"):
            configs = line.split(":", 1)[1].split()
            plain = [c for c in configs if not c.startswith("!")]
            if f"!{CONFIG}" in configs:
                return line
            if plain and not RUNS_HERE.intersection(plain):
                return line
    return ""


def parse(text: str) -> tuple[list[Record], str]:
    """The records of a logic-test file, and a reason when the whole file is for other
    configurations (``""`` when it runs here)."""
    lines = text.split("\n")
    records: list[Record] = []
    pending_skip = ""
    i = 0
    while i < len(lines):
        raw = lines[i]
        stripped = raw.strip()
        number = i + 1
        i += 1
        if not stripped or stripped.startswith("#"):
            continue
        words = stripped.split()
        verb = words[0]
        if verb in ("skipif", "onlyif"):
            reason = _conditions_skip(words)
            pending_skip = pending_skip or reason
            continue
        if verb == "subtest":
            continue
        if verb == "halt":
            records.append(Record("halt", number, stripped))
            break
        if verb in ("user", "let"):
            record = Record(verb, number, stripped)
            if verb == "let":
                body, i = _read_sql(lines, i)
                record.sql = body
            record.skip_reason, pending_skip = pending_skip, ""
            records.append(record)
            continue
        if verb == "statement" or verb == "query":
            record = _header(verb, words, number, stripped)
            body, i = _read_sql(lines, i)
            record.sql = body
            if i < len(lines) and lines[i].strip() == "----":
                i += 1
                while i < len(lines) and lines[i].strip():
                    record.expected.append(lines[i].rstrip())
                    i += 1
            if not pending_skip and EXPLAIN.search(body):
                pending_skip = "EXPLAIN: CockroachDB's plans"
            record.skip_reason, pending_skip = pending_skip or record.skip_reason, ""
            records.append(record)
            continue
        # Any other directive: keep its block out of the run, and say so.
        record = Record("unknown", number, stripped, skip_reason=f"directive {verb!r}")
        while i < len(lines) and lines[i].strip():
            i += 1
        pending_skip = ""
        records.append(record)
    return records, _file_skip(lines[:5])


def _read_sql(lines: list[str], i: int) -> tuple[str, int]:
    body: list[str] = []
    while i < len(lines) and lines[i].strip() and lines[i].strip() != "----":
        body.append(lines[i])
        i += 1
    return "\n".join(body), i


def _header(verb: str, words: list[str], number: int, header: str) -> Record:
    record = Record(verb, number, header)
    rest = words[1:]
    if verb == "statement":
        mode = rest[0].lower() if rest else "ok"  # files say ``statement OK`` too
        if mode == "error":
            record.expect_error = True
            _error_spec(record, header.split(None, 2)[2] if len(rest) > 1 else "")
        elif mode == "count" and len(rest) > 1:
            record.count = int(rest[1])
        elif mode not in ("ok", "count"):
            record.skip_reason = f"statement {mode}"
        return record
    if rest and rest[0] == "error":
        record.expect_error = True
        _error_spec(record, header.split(None, 2)[2] if len(rest) > 1 else "")
        return record
    if rest:
        record.types = rest[0]
        for option in _options(" ".join(rest[1:])):
            name, _, argument = option.partition("(")
            if name in ("nosort", "rowsort", "valuesort"):
                record.sort = name
            elif name == "partialsort":
                record.sort = "partialsort"
                record.partial = [int(n) - 1 for n in argument.rstrip(")").split(",") if n]
            elif name == "colnames":
                record.colnames = True
            elif name in ("async", "kvtrace", "noticetrace"):
                record.skip_reason = f"query option {name}"
    return record


def _options(text: str) -> list[str]:
    """A query header's options, separated by spaces or by commas outside
    parentheses (``colnames,rowsort``, ``partialsort(1,2)``)."""
    options: list[str] = []
    depth, current = 0, ""
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if (char == "," or char.isspace()) and depth == 0:
            if current:
                options.append(current)
            current = ""
            continue
        current += char
    if current:
        options.append(current)
    # NB: anything after the options is a label (for ``query ... label``), not an option.
    return options


def _error_spec(record: Record, spec: str) -> None:
    spec = spec.strip()
    if spec.startswith("pgcode "):
        parts = spec.split(None, 2)
        record.error_code = parts[1] if len(parts) > 1 else ""
        spec = parts[2] if len(parts) > 2 else ""
    record.error_regex = spec


# -- formatting, as CockroachDB's runner prints values --------------------------------


def format_cell(value: Any, extra_float_digits: int = 0) -> str:
    """``value`` as CockroachDB's runner prints it: through lib/pq, so FLOATs in the
    session's ``extra_float_digits``, dates and timestamps as Go's ``time.Time``
    prints them, BYTES as the text they hold when it is UTF-8."""
    from feedkv.sql.types import float_text, format_value

    if isinstance(value, float) and math.isinf(value):
        text = "+Inf" if value > 0 else "-Inf"  # Go's strconv, through lib/pq
    elif isinstance(value, float):
        # NB: the runner reads the server's text back into a float64 and prints that
        # in Go's shortest form: extra_float_digits rounds, the print does not.
        text = format_value(float(float_text(value, extra_float_digits)))
    elif isinstance(value, datetime.datetime):
        text = _go_time(value)
    elif isinstance(value, datetime.date):
        text = value.isoformat() + " 00:00:00 +0000 +0000"
    elif isinstance(value, bytes | bytearray):
        # NB: lib/pq hands BYTES over as a byte slice, which the runner prints as the
        # string it holds when that is valid UTF-8, else as Go prints a byte slice
        try:
            text = bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            text = "[" + " ".join(str(b) for b in value) + "]"
    else:
        text = format_value(value)
    return text if text != "" else "·"


def _go_time(value: datetime.datetime) -> str:
    """Go's ``time.Time.String()`` of what lib/pq makes of ``value``: a TIMESTAMPTZ in
    UTC as ``... +0000 UTC``, a TIMESTAMP in a nameless zero zone as ``... +0000 +0000``."""
    text = value.strftime("%Y-%m-%d %H:%M:%S")
    if value.microsecond:
        text += f".{value.microsecond:06d}".rstrip("0")
    offset = value.utcoffset()
    if offset is None:
        return text + " +0000 +0000"
    minutes = int(offset.total_seconds()) // 60
    sign = "-" if minutes < 0 else "+"
    zone = f"{sign}{abs(minutes) // 60:02d}{abs(minutes) % 60:02d}"
    return f"{text} {zone} {'UTC' if minutes == 0 else zone}"


def compare(record: Record, columns: tuple[str, ...], rows: list[list[str]]) -> str:
    """``""`` when ``rows`` (formatted cells) are what ``record`` expects; else why not.

    As CockroachDB's runner: values compare as whitespace-separated tokens (so a
    multi-line value and the file's column alignment do not matter); ``rowsort`` sorts
    the rows of both sides, ``valuesort`` their values, ``partialsort(i,...)`` the rows
    within each run of equal key columns; a lone ``N values hashing to MD5`` line
    compares the count and the MD5 of each value and a newline; with an ``F`` column,
    numbers equal to 15 significant digits compare equal."""
    expected = list(record.expected)
    if record.colnames:
        if not expected:
            return "expected column names"
        names = expected.pop(0).split()
        if names != [token for name in columns for token in (name.split() or ["·"])]:
            return f"columns {list(columns)}, expected {names}"
    if record.types and rows and len(rows[0]) != len(record.types):
        return f"{len(rows[0])} columns, expected {len(record.types)}"
    width = len(rows[0]) if rows else max(len(record.types), 1)
    if record.sort == "rowsort":
        rows = sorted(rows)
    elif record.sort == "partialsort":
        rows = _partial_sort(rows, record.partial)
    values = [cell for row in rows for cell in row]
    if record.sort == "valuesort":
        values.sort()
    if len(expected) == 1 and (match := HASHED.match(expected[0].strip())):
        count, digest = int(match.group(1)), match.group(2)
        if count != len(values):
            return f"{len(values)} values, expected {count}"
        md5 = hashlib.md5()
        for value in values:
            md5.update(value.encode())
            md5.update(b"\n")
        return "" if md5.hexdigest() == digest else "values hash differently"
    got = [token for value in values for token in value.split()]
    want = [token for line in expected for token in line.split()]
    if got != want and record.sort in ("rowsort", "partialsort"):
        expected_rows = _rows_of(expected, want, width)
        if record.sort == "rowsort":
            expected_rows = sorted(expected_rows)
        else:
            expected_rows = _partial_sort(expected_rows, record.partial)
        want = [token for row in expected_rows for token in row]
    if got != want and record.sort == "valuesort":
        got, want = sorted(got), sorted(want)
    if got == want:
        return ""
    if "F" in record.types and len(got) == len(want) and all(map(_close, got, want)):
        return ""
    return "rows differ"


def _rows_of(lines: list[str], tokens: list[str], width: int) -> list[list[str]]:
    """The expected rows: a line each when every line has the row's width, else the
    tokens in chunks of it."""
    if all(len(line.split()) == width for line in lines):
        return [line.split() for line in lines]
    return [tokens[n : n + width] for n in range(0, len(tokens), width)]


def _partial_sort(rows: list[list[str]], keys: list[int]) -> list[list[str]]:
    """``rows`` sorted within each run of rows equal in the ``keys`` columns."""
    out: list[list[str]] = []
    run: list[list[str]] = []
    for row in rows:
        if run and [run[0][k] for k in keys if k < len(row)] != [
            row[k] for k in keys if k < len(row)
        ]:
            out.extend(sorted(run))
            run = []
        run.append(row)
    out.extend(sorted(run))
    return out


def _close(got: str, want: str) -> bool:
    if got == want:
        return True
    try:
        a, b = float(got), float(want)
    except ValueError:
        return False
    return abs(a - b) <= 1e-14 * max(abs(a), abs(b)) or a == b


# -- today's expectations of records an older CockroachDB wrote --------------------------


def modernize(file: str, record: Record) -> tuple[Record, str] | None:
    """``record`` with today's CockroachDB's expectation, and what changed, when the
    file's expectation is an older CockroachDB's (``bench/_logictest_modern.py``); else
    None."""
    from feedkv.testing.benches import bench_module

    modern = bench_module("_logictest_modern")
    same_sql = " ".join(record.sql.split())
    for entry in modern.RECORDS:
        if (entry.file, entry.line) == (file, record.line) and entry.sql == same_sql:
            header, _, result = entry.block.partition("\n")
            text = f"{header}\n{record.sql}\n{result}\n"
            (today,), _ = parse(text)
            today.line = record.line
            return today, entry.why
    if record.kind == "query" and not record.expect_error:
        rows = modern.modern_create_statement(record.sql, record.expected)
        if rows is not None:
            today = dataclasses.replace(record, expected=rows)
            return today, modern.CREATE_STATEMENT_WHY
    return None


# -- running one file ------------------------------------------------------------------


def _classify_error(exc: BaseException) -> str:
    from feedkv.errors import SQLError

    if not isinstance(exc, SQLError):
        return "crash"
    if exc.code in UNSUPPORTED_CODES or UNSUPPORTED_WORDS.search(exc.message):
        return "unsupported"
    return "error"


def _error_text(exc: BaseException) -> str:
    from feedkv.errors import SQLError

    if isinstance(exc, SQLError):
        return f"pq: {exc}"  # NB: its DETAIL on a line of its own, as CockroachDB's tests match
    return f"{type(exc).__name__}: {exc}"


def _error_matches(record: Record, exc: BaseException) -> bool:
    from feedkv.errors import SQLError

    if record.error_code and (not isinstance(exc, SQLError) or exc.code != record.error_code):
        return False
    if not isinstance(exc, SQLError):
        return False
    if not record.error_regex:
        return True
    text = _error_text(exc)
    try:
        return (
            re.search(record.error_regex, text) is not None
            or re.search(record.error_regex, exc.message) is not None
        )
    except re.error:
        return record.error_regex in text


def run_file(path: Path, store: Path, emit: Any) -> None:
    """Run ``path``'s records on a new store at ``store``, calling ``emit(dict)`` for each
    record as it ends."""
    import feedkv
    from feedkv.kv.store import StoreConfig

    records, file_skip = parse(path.read_text())
    if file_skip:
        for record in records:
            if record.kind in ("statement", "query"):
                emit({"line": record.line, "outcome": "skip", "why": file_skip})
        return
    config = StoreConfig(closed_ts_interval_s=0.01, push_poll_s=0.01, sync=False)
    with feedkv.connect(store, config=config) as db:
        setup = db.session()
        setup.execute("CREATE DATABASE IF NOT EXISTS test")
        # NB: a store without users still runs the file, as root throughout.
        with contextlib.suppress(Exception):
            setup.execute("CREATE USER IF NOT EXISTS testuser")
        sessions = {"root": db.session(database="test")}
        session = sessions["root"]
        variables: dict[str, str] = {}
        failed_tables: set[str] = set()  # written by a statement that failed here
        for record in records:
            if record.kind == "halt":
                break
            if record.kind == "user":
                if record.skip_reason:
                    continue
                name = record.header.split()[1]
                if name not in sessions:
                    try:
                        sessions[name] = db.session(user=name, database="test")
                    except Exception:
                        # NB: a user this store cannot make: its records run as
                        # the previous user and are counted as they come out.
                        continue
                session = sessions[name]
                continue
            sql = record.sql
            for name in sorted(variables, key=len, reverse=True):
                sql = sql.replace(name, variables[name])
            if record.kind == "let":
                if record.skip_reason:
                    continue
                try:
                    rows = session.execute(sql).rows
                    variables[record.header.split()[1]] = format_cell(rows[0][0])
                except Exception:
                    pass
                continue
            if record.kind == "unknown" or record.skip_reason:
                if record.kind != "unknown" or record.header.split()[0] in SKIPPED_DIRECTIVES:
                    emit({"line": record.line, "outcome": "skip", "why": record.skip_reason})
                continue
            today = modernize(path.name, record)
            entry = _run_record(today[0] if today else record, sql, session)
            if today and entry["outcome"] == "pass":
                entry.update(outcome="outdated", why=today[1])
            elif today:
                entry["today"] = today[1]  # checked against today's CockroachDB
            if entry["outcome"] == "wrong" and (suspect := _touches(sql, failed_tables)):
                entry["after_failed_write_to"] = suspect
            elif entry["outcome"] in ("error", "unsupported") and not record.expect_error:
                failed_tables.update(_written_tables(sql))
            emit(entry)


_WRITES = re.compile(r"\b(?:INTO|TABLE|UPDATE|FROM)\s+(?:ONLY\s+)?([\w.]+)", re.I)


def _written_tables(sql: str) -> set[str]:
    """The tables a statement may have created or written, by name (lowercase)."""
    names = {name.rsplit(".", 1)[-1].lower() for name in _WRITES.findall(sql)}
    return names - {"set"}  # ON CONFLICT ... DO UPDATE SET


def _touches(sql: str, tables: set[str]) -> str:
    """A table of ``tables`` that ``sql`` names: a wrong answer there may follow from
    the earlier failure rather than be one of its own."""
    words = set(re.findall(r"\w+", sql.lower()))
    return ",".join(sorted(tables & words))


def _run_record(record: Record, sql: str, session: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"line": record.line}
    try:
        results = session.execute_all(sql)
        # NB: a query of several statements shows the first that returns rows, as
        # lib/pq's simple query does (``SELECT ...; COMMIT``).
        rows_of = [r for r in results if r.columns] if record.kind == "query" else []
        result = rows_of[0] if rows_of else results[-1]
    except Exception as exc:
        if record.expect_error:
            if _error_matches(record, exc):
                out["outcome"] = "pass"
            else:
                out.update(outcome="error", why="error_mismatch")
                out["got"] = _error_text(exc)[:300]
                out["expected_error"] = record.error_regex[:200]
            return out
        kind = _classify_error(exc)
        out.update(outcome="unsupported" if kind == "unsupported" else "error", why=kind)
        out["got"] = _error_text(exc)[:300]
        return out
    if record.expect_error:
        out.update(outcome="wrong", why="succeeded where an error is expected")
        out["expected_error"] = record.error_regex[:200]
        return out
    if record.kind == "statement":
        if record.count is not None:
            got = _affected(result)
            if got != record.count:
                out.update(outcome="wrong", why=f"count {got}, expected {record.count}")
                return out
        out["outcome"] = "pass"
        return out
    try:
        digits = int(session.variable("extra_float_digits"))
    except Exception:
        digits = 0
    try:
        rows = [[format_cell(v, digits) for v in row] for row in result.rows]
    except Exception as exc:
        out.update(outcome="error", why="crash", got=_error_text(exc)[:300])
        return out
    why = compare(record, tuple(result.columns), rows)
    if not why:
        out["outcome"] = "pass"
        return out
    out.update(outcome="wrong", why=why)
    out["got"] = [" ".join(row) for row in rows[:12]]
    out["expected"] = record.expected[:12]
    return out


def _affected(result: Any) -> int | None:
    parts = str(getattr(result, "tag", "")).split()
    if parts and parts[-1].isdigit():
        return int(parts[-1])
    return len(result.rows)


# -- the whole run ---------------------------------------------------------------------


def _run_child(path: Path, timeout_s: float) -> tuple[list[dict[str, Any]], str]:
    """Run one file in a child process; its records, and ``"timeout"`` or a crash's
    last lines when it did not finish."""
    with tempfile.TemporaryDirectory(prefix="feedkv-logictest-") as tmp:
        command = [sys.executable, __file__, "--one", str(path), "--store", tmp + "/store"]
        env = dict(os.environ)
        env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1]) + (
            os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""
        )
        with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
            child = subprocess.Popen(command, stdout=out, stderr=err, env=env)
            ended = ""
            try:
                child.wait(timeout=timeout_s)
                if child.returncode != 0:
                    err.seek(0)
                    ended = "exit: " + err.read()[-500:]
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
                ended = "timeout"
            out.seek(0)
            records = [json.loads(line) for line in out if line.startswith("{")]
    return records, ended


def summarize(name: str, records: list[dict[str, Any]], total_records: int) -> dict[str, Any]:
    counts = {outcome: 0 for outcome in OUTCOMES}
    for record in records:
        counts[record["outcome"]] += 1
    counts["not_run"] = max(total_records - len(records), 0)
    ran = total_records - counts["skip"]
    summary: dict[str, Any] = {"file": name, "records": total_records, **counts}
    summary["pass_rate"] = round(counts["pass"] / ran, 4) if ran else None
    summary["crash"] = sum(1 for r in records if r.get("why") == "crash")
    return summary


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="feedkv bench logictest", description=__doc__)
    parser.add_argument("--dir", type=Path, help="directory of CockroachDB logic-test files")
    parser.add_argument("--files", default="", help="comma-separated names (default: all)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds a file")
    parser.add_argument("--wrong", type=int, default=200, help="wrong answers to list")
    parser.add_argument("--one", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--store", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        store = args.store or Path(tempfile.mkdtemp(prefix="feedkv-logictest-")) / "store"

        def emit(entry: dict[str, Any]) -> None:
            print(json.dumps(entry), flush=True)

        run_file(args.one, store, emit)
        return 0
    if args.dir is None:
        parser.error("--dir is required")
    names = [n for n in args.files.split(",") if n] or sorted(
        p.name for p in args.dir.iterdir() if p.is_file() and not p.name.startswith(".")
    )
    started = time.monotonic()
    files: list[dict[str, Any]] = []
    wrong: list[dict[str, Any]] = []
    crashes: list[dict[str, Any]] = []
    outdated: list[dict[str, Any]] = []
    for name in names:
        path = args.dir / name
        records, _ = parse(path.read_text())
        total = sum(1 for r in records if r.kind in ("statement", "query"))
        total += sum(
            1 for r in records if r.kind == "unknown" and r.header.split()[0] in SKIPPED_DIRECTIVES
        )
        ran, ended = _run_child(path, args.timeout)
        summary = summarize(name, ran, total)
        if ended:
            summary["ended"] = ended
        files.append(summary)
        sql_at = {r.line: r.sql for r in records}
        for entry in ran:
            where = {"at": f"{name}:{entry['line']}", "sql": sql_at.get(entry["line"], "")[:300]}
            if entry["outcome"] == "wrong":
                wrong.append({**where, **{k: v for k, v in entry.items() if k != "line"}})
            elif entry.get("why") == "crash":
                crashes.append({**where, "got": entry.get("got", "")})
            elif entry["outcome"] == "outdated":
                outdated.append({"at": where["at"], "why": entry["why"]})
    totals = {key: sum(f[key] for f in files) for key in ("records", *OUTCOMES, "not_run", "crash")}
    ran_total = totals["records"] - totals["skip"]
    result = {
        "benchmark": "logictest",
        "config": CONFIG,
        "seconds": round(time.monotonic() - started, 1),
        "total": {
            **totals,
            "pass_rate": round(totals["pass"] / ran_total, 4) if ran_total else None,
        },
        "files": files,
        "wrong_count": len(wrong),
        # Of those, on a table an earlier failed statement of the file wrote: likely a
        # consequence of that failure rather than a wrong answer of their own.
        "wrong_after_failed_write": sum(1 for w in wrong if "after_failed_write_to" in w),
        "wrong": wrong[: args.wrong],
        "crashes": crashes[: args.wrong],
        # Records whose file expects an older CockroachDB's answer, where feedkv gives
        # today's (bench/_logictest_modern.py says what changed).
        "outdated": outdated,
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
