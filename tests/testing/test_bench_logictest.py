"""``feedkv bench logictest``: the reading of CockroachDB's logic-test format, the
comparison of results as its runner does, and the counting of outcomes against a real
embedded store, on small files written here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from feedkv.testing.benches import bench_module

logictest = bench_module("logictest")

SCRIPT = """\
# LogicTest: local

subtest basics

statement ok
CREATE TABLE t (k INT PRIMARY KEY, v STRING)

statement count 3
INSERT INTO t VALUES (1, 'one'), (2, NULL), (3, '')

statement error pgcode 23505 duplicate key
INSERT INTO t VALUES (1, 'again')

statement error (table|relation) "nosuch" does not exist
SELECT * FROM nosuch

query IT colnames,rowsort my_label
SELECT k, v FROM t
----
k  v
3  ·
1  one
2  NULL

query I valuesort
SELECT k FROM t ORDER BY k DESC
----
3 values hashing to c0710d6b4f15dfa88f600b0e6b624077

skipif config local
query I
SELECT 'not for this configuration'
----
1

onlyif config fakedist
statement ok
SELECT 'elsewhere only'

let $top
SELECT max(k) FROM t

query I
SELECT $top + 1
----
4

user testuser

user root

query I
SELECT k FROM t WHERE v = 'one'
----
2

statement error duplicate key
INSERT INTO t VALUES (4, 'new')

statement ok
SELECT * FROM t AS x(a, b, c, d, e, f, g)

query B
EXPLAIN SELECT 1
----
plan

repeat 2
statement ok
SELECT 1

halt

statement ok
SELECT 'after halt'
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / "files" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


def test_parse_reads_each_record_kind() -> None:
    records, file_skip = logictest.parse(SCRIPT)
    assert file_skip == ""
    kinds = [(r.kind, r.line) for r in records]
    assert kinds[:4] == [("statement", 5), ("statement", 8), ("statement", 11), ("statement", 14)]
    count, pgcode, regex = records[1], records[2], records[3]
    assert count.count == 3 and not count.expect_error
    assert pgcode.expect_error and pgcode.error_code == "23505"
    assert pgcode.error_regex == "duplicate key"
    assert (
        regex.error_code == "" and regex.error_regex == '(table|relation) "nosuch" does not exist'
    )
    query = records[4]
    assert (query.types, query.sort, query.colnames) == ("IT", "rowsort", True)
    assert query.expected == ["k  v", "3  ·", "1  one", "2  NULL"]
    assert records[5].sort == "valuesort"
    skipped = [r for r in records if r.skip_reason]
    assert [r.line for r in skipped] == [31, 37, 63, 68]
    assert "skipif config local" in skipped[0].skip_reason
    assert "onlyif config fakedist" in skipped[1].skip_reason
    assert "EXPLAIN" in skipped[2].skip_reason
    assert skipped[3].kind == "unknown"  # repeat: not run here
    let = next(r for r in records if r.kind == "let")
    assert let.header == "let $top" and let.sql == "SELECT max(k) FROM t"
    assert [r.header for r in records if r.kind == "user"] == ["user testuser", "user root"]
    assert records[-1].kind == "halt"  # nothing after halt is read


def test_parse_skips_a_file_for_other_configurations() -> None:
    _, reason = logictest.parse("# LogicTest: 3node-tenant\n\nstatement ok\nSELECT 1\n")
    assert "3node-tenant" in reason
    _, reason = logictest.parse("# LogicTest: !local\n\nstatement ok\nSELECT 1\n")
    assert reason
    (upper,), _ = logictest.parse("statement OK\nSELECT 1\n")
    assert upper.kind == "statement" and not upper.skip_reason and not upper.expect_error
    for runs in ("# LogicTest: default distsql", "# LogicTest: !3node-tenant", "# no header"):
        assert logictest.parse(runs + "\n\nstatement ok\nSELECT 1\n")[1] == ""


def _query(header: str, expected: list[str]) -> object:
    records, _ = logictest.parse(header + "\nSELECT 1\n----\n" + "\n".join(expected) + "\n")
    return records[0]


def test_compare_sorts_hashes_and_tolerates_float_digits() -> None:
    rows = [["2", "b"], ["1", "a"]]
    assert logictest.compare(_query("query IT rowsort", ["1 a", "2  b"]), (), rows) == ""
    assert logictest.compare(_query("query IT", ["1 a", "2 b"]), (), rows) == "rows differ"
    assert logictest.compare(_query("query IT valuesort", ["1 2 a b"]), (), rows) == ""
    assert logictest.compare(_query("query IT partialsort(1)", ["1 a", "2 b"]), (), rows) != ""
    hashed = _query("query I", ["3 values hashing to c0710d6b4f15dfa88f600b0e6b624077"])
    assert logictest.compare(hashed, (), [["1"], ["2"], ["3"]]) == ""
    assert logictest.compare(hashed, (), [["1"], ["2"], ["4"]]) == "values hash differently"
    assert logictest.compare(hashed, (), [["1"]]) == "1 values, expected 3"
    floats = _query("query F", ["-0.1234567890123457"])
    assert logictest.compare(floats, (), [["-0.123456789012346"]]) == ""
    assert logictest.compare(floats, (), [["-0.1234"]]) == "rows differ"
    named = _query("query I colnames", ["one", "1"])
    assert logictest.compare(named, ("one",), [["1"]]) == ""
    assert "columns" in logictest.compare(named, ("two",), [["1"]])


def test_format_cell_prints_as_the_go_runner_does() -> None:
    import datetime

    assert logictest.format_cell(None) == "NULL"
    assert logictest.format_cell(True) == "true"
    assert logictest.format_cell("") == "·"
    assert logictest.format_cell(float("inf")) == "+Inf"
    assert logictest.format_cell(100.0) == "100"
    assert logictest.format_cell(123.4567890123456789) == "123.456789012346"
    assert logictest.format_cell(123.4567890123456789, 3) == "123.45678901234568"
    utc = datetime.datetime(2018, 1, 1, tzinfo=datetime.UTC)
    assert logictest.format_cell(utc) == "2018-01-01 00:00:00 +0000 UTC"
    assert logictest.format_cell(datetime.date(2018, 1, 1)) == "2018-01-01 00:00:00 +0000 +0000"
    # BYTES: the text they hold when it is UTF-8, else Go's print of a byte slice
    assert logictest.format_cell(b"B,B") == "B,B"
    assert logictest.format_cell(b"\xff\x01") == "[255 1]"
    assert logictest.format_cell(b"") == "·"


def test_run_file_counts_each_outcome_on_a_real_store(tmp_path: Path) -> None:
    path = _write(tmp_path, "basics", SCRIPT)
    entries: list[dict[str, object]] = []
    logictest.run_file(path, tmp_path / "store", entries.append)
    outcome = {entry["line"]: entry["outcome"] for entry in entries}
    assert all(outcome[line] == "pass" for line in (5, 8, 11, 14, 17, 25, 43)), entries
    # Rows other than expected, and success where an error is expected: wrong answers.
    assert outcome[52] == "wrong" and outcome[57] == "wrong"
    assert outcome[60] in ("unsupported", "error")
    assert outcome[31] == outcome[37] == outcome[63] == outcome[68] == "skip"
    assert max(outcome) < 72  # nothing after halt runs
    summary = logictest.summarize("basics", entries, 14)
    assert (summary["pass"], summary["wrong"], summary["skip"]) == (7, 2, 4)
    assert summary["pass_rate"] == pytest.approx(7 / 10)


def test_main_prints_per_file_rates_and_lists_wrong_answers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(
        tmp_path, "right", "statement ok\nCREATE TABLE a (x INT)\n\nquery I\nSELECT 1\n----\n1\n"
    )
    _write(tmp_path, "wrong", "query T\nSELECT 'got'\n----\nwant\n")
    assert logictest.main(["--dir", str(tmp_path / "files"), "--timeout", "120"]) == 0
    report = json.loads(capsys.readouterr().out)
    files = {entry["file"]: entry for entry in report["files"]}
    assert files["right"]["pass_rate"] == 1.0 and files["wrong"]["pass_rate"] == 0.0
    assert report["total"]["records"] == 3 and report["total"]["pass"] == 2
    assert report["wrong_count"] == 1
    (wrong,) = report["wrong"]
    assert wrong["at"] == "wrong:1" and wrong["sql"] == "SELECT 'got'"
    assert wrong["expected"] == ["want"] and wrong["got"] == ["got"]


def test_a_record_an_older_cockroachdb_wrote_is_checked_against_todays_answer() -> None:
    # Lines 2 and 5 are listed in bench/_logictest_modern.py for a file named "update":
    # the file expects the refusal an older CockroachDB gave, and RETURNING's old names.
    text = (
        "\n"
        'statement error value type decimal doesn\'t match type INT of column "v"\n'
        "UPDATE kv SET v = 3.2\n"
        "\n"
        "query III colnames\n"
        "UPDATE abc SET (b, c) = (8, 9) RETURNING abc.b, c, 4\n"
        "----\n"
        "b c 4\n"
        "8 9 4\n"
    )
    (assign, returning), _ = logictest.parse(text)
    assign.line, returning.line = 12, 234
    today, why = logictest.modernize("update", assign)
    assert today.kind == "statement" and not today.expect_error and "assignment cast" in why
    today, why = logictest.modernize("update", returning)
    assert today.expected == ["b c ?column?", "8 9 4"] and "?column?" in why
    # Another file, another line or other SQL: the file's expectation stands.
    assert logictest.modernize("insert", assign) is None
    returning.line = 235
    assert logictest.modernize("update", returning) is None
    # SHOW CREATE's statement ends with the semicolon CockroachDB writes today.
    (create,), _ = logictest.parse("query T\nSHOW CREATE TABLE t\n----\nCREATE TABLE t (\n)\n")
    today, why = logictest.modernize("any", create)
    assert today.expected == ["CREATE TABLE t (", ");"] and "semicolon" in why


def _at_lines(blocks: dict[int, str]) -> str:
    """A logic-test file with each block starting at its line."""
    lines: list[str] = []
    for line, block in sorted(blocks.items()):
        lines.extend([""] * (line - 1 - len(lines)))
        lines.extend(block.split("\n"))
        lines.append("")
    return "\n".join(lines)


def test_run_file_counts_todays_answer_as_outdated_and_a_difference_from_it_as_wrong(
    tmp_path: Path,
) -> None:
    # Records at the lines bench/_logictest_modern.py lists for CockroachDB's "update".
    setup = (
        "statement ok\nCREATE TABLE kv (k INT PRIMARY KEY, v INT)\n\n"
        "statement ok\nCREATE TABLE abc (a INT PRIMARY KEY, b INT, c INT)"
    )
    refused = 'statement error value type decimal doesn\'t match type INT of column "v"'
    text = _at_lines(
        {
            1: setup,
            12: refused + "\nUPDATE kv SET v = 3.2",
            100: "statement ok\nINSERT INTO abc VALUES (1, 2, 3), (2, 2, 3)",
            234: "query III colnames\nUPDATE abc SET (b, c) = (8, 9) RETURNING abc.b, c, 4\n"
            "----\nb c 4\n8 9 4",
            300: "query I\nSELECT 1\n----\n1",
        }
    )
    path = _write(tmp_path, "update", text)
    entries: list[dict[str, object]] = []
    logictest.run_file(path, tmp_path / "store", entries.append)
    outcome = {entry["line"]: entry for entry in entries}
    assert outcome[12]["outcome"] == "outdated" and "assignment cast" in str(outcome[12]["why"])
    # Two rows updated where today's CockroachDB's answer has one: checked, and wrong.
    assert outcome[234]["outcome"] == "wrong" and "?column?" in str(outcome[234]["today"])
    assert outcome[300]["outcome"] == "pass"
    summary = logictest.summarize("update", entries, 6)
    assert (summary["outdated"], summary["wrong"], summary["pass"]) == (1, 1, 4)
    assert summary["pass_rate"] == round(4 / 6, 4)  # outdated: ran, not passed
