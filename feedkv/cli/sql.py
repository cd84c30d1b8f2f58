r"""``feedkv sql``: run statements and print their results, or an interactive shell.

With ``-e`` each statement runs in order and the first error stops the run (exit 1); the
statements of one ``-e`` run as one implicit transaction, as do those entered on one line
of the shell. Without ``-e``, a terminal gets an interactive shell (history, statements
spanning lines until a ``;``); anything else on stdin is run as a script, statement by
statement, up to the first error, which names its line.

Lines that start with a backslash, where a statement would start, are the shell's own
commands in the shell and in scripts, as ``cockroach sql``'s: ``\q`` quits, ``\l``,
``\dt``, ``\du`` and ``\d [TABLE]`` run the SHOW statement they stand for, ``\?``
lists them. As in psql, such a command takes the rest of its line, semicolons and all:
``\d u; DROP TABLE u`` shows ``u`` and warns that ``DROP``, ``TABLE`` and ``u`` are
extra arguments, ignored; it drops nothing.

When stderr is a terminal (or ``progress=True``), ``CREATE CHANGEFEED ... INTO`` is
followed by a progress bar of the new job's initial scan (rows, rate, ETA:
:mod:`feedkv.cli.scan_progress`) until the scan is done; Ctrl-C stops watching, not the job.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import re
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO, cast

import feedkv
from feedkv.changefeed.sinkless import FeedResult
from feedkv.cli.pg_session import PG_SCHEMES, open_pg_session
from feedkv.cli.scan_progress import JobScan, watch_scan
from feedkv.errors import FeedKVError, SQLError
from feedkv.sql.jsonb import JSON_NULL
from feedkv.sql.script import split_script
from feedkv.sql.session import Result, Session
from feedkv.sql.types import format_value

__all__ = ["client_command", "format_result", "run_sql"]

HISTORY = Path.home() / ".feedkv_sql_history"


def run_sql(
    target: str,
    statements: Sequence[str],
    *,
    output: str = "table",
    user: str = "root",
    database: str = "defaultdb",
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    certs_dir: str | None = None,
    password: str | None = None,
    progress: bool | None = None,
) -> int:
    """``certs_dir``: reach a secure node with TLS as ``user``, proven by its client
    certificate from there or by ``password`` (over the raw KV API a user other than
    root reads only the tables it may SELECT and writes nothing; such users write
    through the SQL port: ``--url postgresql://...``). A ``postgresql://`` URL's
    password, when it has none, is ``$FEEDKV_PASSWORD`` (or libpq's ``PGPASSWORD``),
    else asked for on a terminal if the server wants one; its TLS parameters, when it
    has none, come from ``certs_dir``.
    ``progress``: show a new changefeed job's initial scan (``None``: when stderr is a
    terminal)."""
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    watch = stderr.isatty() if progress is None else progress
    if target.startswith(PG_SCHEMES):
        # NB: the URL's user and database stand unless others are asked for
        pg = open_pg_session(
            target,
            user=None if user == "root" else user,
            database=None if database == "defaultdb" else database,
            password=password,
            certs_dir=certs_dir,
            stdin=stdin,
        )
        try:
            return _run(cast(Session, pg), statements, output, stdin, stdout, stderr, watch)
        finally:
            pg.close()
    remote = "://" in target
    with feedkv.connect(
        target,
        certs_dir=certs_dir if remote else None,
        user=user if remote else None,
        password=password if remote else None,
    ) as db:
        session = db.session(user=user, database=database)
        try:
            return _run(session, statements, output, stdin, stdout, stderr, watch)
        finally:
            session.close()


def _run(
    session: Session,
    statements: Sequence[str],
    output: str,
    stdin: TextIO,
    stdout: TextIO,
    stderr: TextIO,
    watch: bool = False,
) -> int:
    """``watch``: a new changefeed job's initial scan is shown (module docstring)."""
    if statements:
        return _run_each(session, statements, output, stdout, stderr, watch=watch)
    if stdin.isatty():
        return _shell(session, output, stdin, stdout, stderr, watch)
    return _run_script(session, stdin.read(), output, stdout, stderr, watch)


def _run_each(
    session: Session,
    statements: Sequence[str],
    output: str,
    stdout: TextIO,
    stderr: TextIO,
    *,
    batch: bool = True,
    watch: bool = False,
) -> int:
    for text in statements:
        if not text.strip():
            continue
        if not _execute(session, text, output, stdout, stderr, batch=batch, watch=watch):
            return 1
    return 0


def _run_script(
    session: Session, script: str, output: str, stdout: TextIO, stderr: TextIO, watch: bool = False
) -> int:
    """A script's statements one after the other, as ``psql`` and ``cockroach sql`` run
    them: each takes effect on its own, and the first error stops the script (exit 1),
    named with its line (``<stdin>:2: ERROR: ...``)."""
    line, counted = 1, 0
    for offset, text in split_script(script):
        line += script.count("\n", counted, offset)  # NB: counted once, not per statement
        counted = offset
        where = f"<stdin>:{line}: "
        if text.startswith("\\"):  # the shell's own command: the rest of its line
            try:
                command, ignored = parse_client_command(text)
            except SQLError as exc:
                _print_error(exc, text, stderr, where)
                return 1
            for warning in ignored:
                stderr.write(f"{where}{warning}\n")
            if command is QUIT:
                return 0
            if command is HELP:
                stdout.write(HELP_TEXT)
            elif not _execute(session, str(command), output, stdout, stderr, where=where):
                return 1
            continue
        if not text.strip():
            continue
        if not _execute(
            session, text.rstrip(), output, stdout, stderr, batch=False, where=where, watch=watch
        ):
            return 1
    return 0


QUIT = object()  # \q
HELP = object()  # \?
HELP_TEXT = """End each statement with ';'. Ctrl-C clears the input.
  \\q          quit (also quit, exit)
  \\l          SHOW DATABASES
  \\dt         SHOW TABLES
  \\du         SHOW USERS
  \\d [TABLE]  SHOW TABLES, or SHOW COLUMNS FROM TABLE
  \\?          this help
"""
_SHOWS = {
    "\\l": "SHOW DATABASES",
    "\\dt": "SHOW TABLES",
    "\\du": "SHOW USERS",
    "\\d": "SHOW TABLES",
}


# a table's name, as \\d takes it: names or quoted names, joined by dots
_NAME = r'(?:[A-Za-z_][\w$]*|"(?:[^"]|"")+")'
_TABLE_NAME = re.compile(rf"{_NAME}(?:\.{_NAME}){{0,2}}")


# psql's arguments of a backslash command: runs of anything but blanks, quoted parts whole
_ARGUMENT = re.compile(r"""(?:"(?:[^"]|"")*"|'(?:[^']|'')*'|[^\s"']+)+""")


def parse_client_command(line: str) -> tuple[object, list[str]]:
    """What the shell's own command ``line`` (``\\dt``, ``\\d t``, ...) does: the SQL it
    stands for, :data:`QUIT` or :data:`HELP`, with psql's warning for each argument past
    those it takes (``\\d: extra argument "DROP" ignored``: as in psql, the whole line is
    the command's, so ``\\d u; DROP TABLE u`` drops nothing). As psql, semicolons that
    end an argument are dropped. 42601 for a command feedkv does not have, or a pattern
    it cannot filter by (``\\dt t*``)."""
    name, *arguments = _ARGUMENT.findall(line.strip())
    name = name.rstrip(";")
    first = arguments[0].rstrip(";") if arguments else ""
    ignored = [f'{name}: extra argument "{extra}" ignored' for extra in arguments[1:]]
    if name == "\\q" and not first:
        return QUIT, ignored
    if name == "\\?" and not first:
        return HELP, ignored
    if name == "\\d" and first:
        if not _TABLE_NAME.fullmatch(first):
            raise SQLError("42601", f"\\d takes a table's name, not {first!r}")
        return f"SHOW COLUMNS FROM {first}", ignored
    if name in _SHOWS and not first:
        return _SHOWS[name], ignored
    if name in _SHOWS:
        raise SQLError("42601", f"{name} takes no pattern here; \\d TABLE shows one table")
    raise SQLError("42601", f"invalid command {line.strip()}: \\? lists the shell's own commands")


def client_command(line: str) -> object:
    """:func:`parse_client_command`'s command alone."""
    return parse_client_command(line)[0]


def _shell(
    session: Session,
    output: str,
    stdin: TextIO,
    stdout: TextIO,
    stderr: TextIO,
    watch: bool = False,
) -> int:
    readline = _readline()
    stdout.write("# Welcome to the feedkv SQL shell. End statements with ';'; \\q quits.\n")
    buffer: list[str] = []
    while True:
        transaction = "*" if session.in_transaction else ""
        prompt = f"{session.user}@{session.database}{transaction}> "
        if buffer:
            prompt = " " * (len(prompt) - 3) + "-> "
        try:
            line = input(prompt)
        except EOFError:
            stdout.write("\n")
            return 0
        except KeyboardInterrupt:
            stdout.write("^C\n")
            buffer = []
            continue
        if not buffer and line.strip() in ("quit", "exit"):
            return 0
        if not buffer and line.strip() == "help":
            line = "\\?"
        if not buffer and line.lstrip().startswith("\\"):
            try:
                command, ignored = parse_client_command(line)
            except SQLError as exc:
                _print_error(exc, line, stderr)
                continue
            for warning in ignored:
                stderr.write(f"{warning}\n")
            if command is QUIT:
                return 0
            if command is HELP:
                stdout.write(HELP_TEXT)
                continue
            _execute(session, str(command), output, stdout, stderr, watch=watch)
            continue
        buffer.append(line)
        text = "\n".join(buffer).strip()
        if not text.endswith(";"):
            continue
        buffer = []
        if readline is not None:
            readline.add_history(text.replace("\n", " "))
            with contextlib.suppress(OSError):
                readline.write_history_file(HISTORY)
        try:
            _execute(session, text, output, stdout, stderr, watch=watch)
        except KeyboardInterrupt:
            stderr.write("query interrupted\n")


def _execute(
    session: Session,
    text: str,
    output: str,
    stdout: TextIO,
    stderr: TextIO,
    *,
    batch: bool = True,
    where: str = "",
    watch: bool = False,
) -> bool:
    """Run ``text`` and print each result; print the error (after ``where``, what names
    the statement's place) and return ``False`` if a statement fails."""
    try:
        for result in session.execute_each(text, batch=batch):
            write_result(result, output, stdout)
            write_notices(result, stdout, stderr)
            if watch and result.tag == "CREATE CHANGEFEED" and result.columns == ("job_id",):
                stdout.flush()
                watch_scan(_job_scan(session, int(result.rows[0][0])), stderr)
    except SQLError as exc:
        stdout.flush()
        _print_error(exc, text, stderr, where)
        return False
    except FeedKVError as exc:
        stdout.flush()
        stderr.write(f"{where}ERROR: {exc}\n")
        return False
    return True


def _job_scan(session: Session, job_id: int) -> Callable[[], JobScan | None]:
    """How the bar reads job ``job_id``: its record where the session's client can read
    it (with the rows its scan emitted), else ``crdb_internal.jobs`` (a ``postgresql://``
    shell)."""
    record_of = getattr(getattr(session, "changefeeds", None), "record", None)
    if callable(record_of):

        def from_record() -> JobScan | None:
            record = record_of(job_id)
            if record is None:
                return None
            return JobScan(
                record.status,
                record.high_water is not None or record.scanned,
                record.fraction_completed,
                record.scan_rows,
            )

        return from_record

    def from_sql() -> JobScan | None:
        rows = session.execute(
            "SELECT status, fraction_completed, high_water_timestamp FROM crdb_internal.jobs "
            f"WHERE job_id = {job_id}"
        ).rows
        if not rows:
            return None
        status, fraction, high_water = rows[0]
        return JobScan(str(status), high_water is not None, fraction, None)

    return from_sql


def take_ctrl_c() -> None:
    """Let Ctrl-C reach ``feedkv sql`` as KeyboardInterrupt whatever its parent left it:
    an ignored SIGINT or one blocked in the signal mask, both inherited across exec
    (psql likewise installs its own handler, interactive or not: Ctrl-C ends a sinkless
    changefeed). Only the process's main thread may change them; elsewhere (the command
    run inside another program's thread) they stay as they are."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _readline() -> Any:
    try:
        import readline
    except ImportError:  # not every platform has it; the shell works without history
        return None
    with contextlib.suppress(OSError):
        readline.read_history_file(HISTORY)
    readline.set_auto_history(False)  # the shell adds whole statements, not their lines
    return readline


def _print_error(exc: SQLError, text: str, stderr: TextIO, where: str = "") -> None:
    stderr.write(f"{where}ERROR: {exc.message}\nSQLSTATE: {exc.code}\n")
    if exc.detail is not None:
        stderr.write(f"DETAIL: {exc.detail}\n")
    if exc.position is not None and 0 < exc.position <= len(text) + 1:
        line_start = text.rfind("\n", 0, exc.position - 1) + 1
        line_end = text.find("\n", exc.position - 1)
        line = text[line_start : line_end if line_end != -1 else len(text)]
        stderr.write(f"{line}\n{' ' * (exc.position - 1 - line_start)}^\n")


def write_result(result: Result, output: str, stdout: TextIO) -> None:
    """Print ``result``; a changefeed's rows are printed one line each as they arrive,
    until it ends or Ctrl-C stops it."""
    if not isinstance(result, FeedResult):
        stdout.write(format_result(result, output))
        return
    if output == "csv":
        stdout.write(",".join(result.columns) + "\n")
    try:
        for row in result:
            if output == "json":
                record = dict(zip(result.columns, (_json_value(v) for v in row), strict=True))
                line = json.dumps(record, ensure_ascii=False)
            elif output == "csv":
                buffer = io.StringIO()
                csv.writer(buffer, lineterminator="").writerow(
                    ["" if v is None else v for v in row]
                )
                line = buffer.getvalue()
            else:
                line = " | ".join("NULL" if v is None else format_value(v) for v in row)
            stdout.write(line + "\n")
            stdout.flush()
    except KeyboardInterrupt:
        result.close()
        stdout.write("changefeed stopped\n")


def write_notices(result: Result, stdout: TextIO, stderr: TextIO) -> None:
    """The notices a statement raised, after its result, as ``cockroach sql`` (and
    psql) print them: ``NOTICE: changefeed will emit to topic orders`` on stderr."""
    if result.notices:
        stdout.flush()  # NB: after the result, where they belong, when both are a terminal
        stderr.write("".join(f"NOTICE: {notice}\n" for notice in result.notices))


def format_result(result: Result, output: str) -> str:
    """``result`` as ``feedkv sql`` prints it in the ``table``, ``csv`` or ``json``
    format. A statement without columns prints its tag."""
    if not result.columns:
        return f"{result.tag}\n" if output == "table" else ""
    return _FORMATS[output](result)


def _table(result: Result) -> str:
    cells = [[format_value(v) for v in row] for row in result.rows]
    widths = [len(c) for c in result.columns]
    for row in cells:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], max(len(part) for part in cell.split("\n")))
    out = io.StringIO()
    header = " | ".join(c.center(w) for c, w in zip(result.columns, widths, strict=True))
    out.write(f" {header.rstrip()}\n")
    out.write("+".join("-" * (w + 2) for w in widths) + "\n")
    for row in cells:
        parts = [cell.split("\n") for cell in row]
        for n in range(max((len(p) for p in parts), default=1)):
            line = " | ".join(
                (p[n] if n < len(p) else "").ljust(w) for p, w in zip(parts, widths, strict=True)
            )
            out.write(f" {line.rstrip()}\n")
    count = len(cells)
    out.write(f"({count} row{'s' if count != 1 else ''})\n")
    return out.getvalue()


def _csv(result: Result) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(result.columns)
    for row in result.rows:
        writer.writerow(["" if v is None else format_value(v) for v in row])
    return out.getvalue()


def _json(result: Result) -> str:
    lines = []
    for row in result.rows:
        record = {name: _json_value(value) for name, value in zip(result.columns, row, strict=True)}
        lines.append(json.dumps(record, ensure_ascii=False) + "\n")
    return "".join(lines)


def _json_value(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return format_value(value)  # JSON has no NaN or Infinity
    if value is JSON_NULL:
        return None  # NB: a JSONB value prints as itself, here JSON's null
    if value is None or isinstance(value, bool | int | float | str | dict | list):
        return value
    return format_value(value)


_FORMATS: dict[str, Callable[[Result], str]] = {"table": _table, "csv": _csv, "json": _json}
