"""SQL logic tests: scripts under ``testdata/``, one store per script.

A script is a sequence of blocks separated by blank lines::

    statement ok
    CREATE TABLE t (a INT PRIMARY KEY, b STRING)

    statement error 23505 duplicate key
    INSERT INTO t VALUES (1, 'x')

    query rowsort
    SELECT a, b FROM t
    ----
    1  x

    let $ts
    SELECT cluster_logical_timestamp()

    user bob

``statement error CODE [REGEX]`` expects SQLSTATE ``CODE`` and a message matching
``REGEX``. ``query`` compares rows (values as ``feedkv sql`` prints them, separated by
two spaces; runs of spaces compare equal); ``rowsort`` sorts them first. ``let $name``
keeps a query's single value for later blocks. ``user NAME`` runs what follows in a
session of that user. Set ``FEEDKV_REWRITE_TESTDATA=1`` to rewrite every expected result
from what the statements return now.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import feedkv
from feedkv.errors import SQLError
from feedkv.kv.store import StoreConfig
from feedkv.sql.session import Session
from feedkv.sql.types import format_value

TESTDATA = Path(__file__).parent / "testdata"
REWRITE = os.environ.get("FEEDKV_REWRITE_TESTDATA") == "1"


@dataclass
class Block:
    header: str
    sql: list[str]
    expected: list[str] | None = None
    line: int = 0


@dataclass
class Script:
    blocks: list[Block] = field(default_factory=list)

    @classmethod
    def read(cls, path: Path) -> Script:
        script = cls()
        current: Block | None = None
        in_expected = False
        for number, raw in enumerate(path.read_text().splitlines(), start=1):
            line = raw.rstrip()
            if not line:
                current, in_expected = None, False
                continue
            if current is None and line.startswith("#"):
                script.blocks.append(Block(line, [], line=number))  # kept when rewriting
                continue
            if current is None:
                current = Block(line, [], line=number)
                script.blocks.append(current)
            elif line == "----":
                current.expected = []
                in_expected = True
            elif in_expected:
                assert current.expected is not None
                current.expected.append(line)
            else:
                current.sql.append(line)
        return script

    def write(self, path: Path) -> None:
        out: list[str] = []
        for block in self.blocks:
            if block.header.startswith("#"):
                out.extend((block.header, ""))
                continue
            out.append(block.header)
            out.extend(block.sql)
            if block.expected is not None:
                out.append("----")
                out.extend(block.expected)
            out.append("")
        path.write_text("\n".join(out))


def _render(rows: list[tuple[object, ...]]) -> list[str]:
    return ["  ".join(format_value(v) for v in row) for row in rows]


def _normal(line: str) -> str:
    return " ".join(line.split())


def run_script(path: Path, tmp_path: Path) -> None:
    script = Script.read(path)
    variables: dict[str, str] = {}
    config = StoreConfig(closed_ts_interval_s=0.01, push_poll_s=0.01, sync=False)
    with feedkv.connect(tmp_path / "store", config=config) as db:
        sessions: dict[str, Session] = {"root": db.session()}
        session = sessions["root"]
        for block in script.blocks:
            where = f"{path.name}:{block.line}"
            words = block.header.split()
            if words[0].startswith("#"):
                continue
            if words[0] == "user":
                session = sessions.setdefault(words[1], db.session(user=words[1]))
                continue
            text = "\n".join(block.sql)
            for name, value in variables.items():
                text = text.replace(name, value)
            if words[0] == "statement" and words[1] == "ok":
                session.execute(text)
            elif words[0] == "statement" and words[1] == "error":
                with pytest.raises(SQLError) as caught:
                    session.execute(text)
                code = words[2]
                assert caught.value.code == code, f"{where}: {caught.value.code} {caught.value}"
                pattern = block.header.split(None, 3)[3] if len(words) > 3 else ""
                assert re.search(pattern, str(caught.value)), f"{where}: {caught.value}"
            elif words[0] == "let":
                rows = session.execute(text).rows
                assert len(rows) == 1 and len(rows[0]) == 1, f"{where}: {rows}"
                variables[words[1]] = format_value(rows[0][0])
            elif words[0] == "query":
                rows = _render(session.execute(text).rows)
                if "rowsort" in words:
                    rows.sort()
                rows = [line for row in rows for line in row.split("\n")]
                if REWRITE:
                    block.expected = rows
                    continue
                expected = block.expected or []
                assert [_normal(r) for r in rows] == [_normal(e) for e in expected], (
                    f"{where}: {text}\ngot:\n" + "\n".join(rows)
                )
            else:
                raise AssertionError(f"{where}: unknown directive {block.header!r}")
    if REWRITE:
        script.write(path)


@pytest.mark.parametrize("path", sorted(TESTDATA.glob("*.test")), ids=lambda p: p.stem)
def test_logic(path: Path, tmp_path: Path) -> None:
    run_script(path, tmp_path)
