"""What today's CockroachDB answers to records whose expectation an older CockroachDB
wrote, for ``bench/logictest.py``.

The logic-test files come from several CockroachDB versions (``update`` and ``insert``
still say ``# LogicTest: default parallel-stmts``, from 2018), and CockroachDB has
since changed some answers on purpose: FLOAT to INT casts round, RETURNING names an
unaliased expression ``?column?``, arrays can be ordered. feedkv follows today's
CockroachDB, so on those records the file's answer is not CockroachDB's any more, and a
difference is not a wrong answer. Each entry here names one record (file, line and SQL,
so another version of the file is not matched), gives today's expectation as a
logic-test header and result, and says what changed, with the evidence: the current
file of CockroachDB's repository, or the change itself. The runner checks the record
against that expectation and counts it as ``outdated`` when it matches, and as it comes
out otherwise (``wrong`` included): the record is still checked, against CockroachDB as
it is.

A record that follows from an earlier one of these (a query of a table whose setup
statement today's CockroachDB refuses) gets the rows today's CockroachDB would have.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Modern", "RECORDS", "modern_create_statement"]


@dataclass(frozen=True)
class Modern:
    """Today's expectation of one record: ``block`` is a logic-test header, and for a
    query ``----`` and its rows, as the file would say them; ``why`` what changed."""

    file: str
    line: int
    sql: str
    block: str
    why: str


_CHAR = (
    "CHAR is CHAR(1) since CockroachDB v2.1 (the file's unbounded CHAR is older; the current "
    "file declares VARCHAR), so the longer values are refused: value too long for type CHAR"
)
_CHAR_ROWS = "the rows today's CockroachDB has after refusing the longer CHAR values above"
_RETURNING = (
    "RETURNING names an unaliased expression ?column?, as SELECT does, since the cost-based "
    "optimizer; the current file aliases them (RETURNING ..., 4 AS d)"
)
_ASSIGN_DECIMAL = (
    "an UPDATE assigns a DECIMAL to an INT column by an assignment cast; the current file "
    "expects statement ok"
)
_ARRAYS = (
    "arrays are ordered element by element since CockroachDB v20.2 (cockroach#48045, which "
    "lifted the can't-order-by-arrays error)"
)
_ZERO = (
    "0/0 is a division by zero (the current file inserts 'NaN' instead), so today's "
    "CockroachDB refuses the statement and the table stays empty"
)

RECORDS: tuple[Modern, ...] = (
    Modern(
        "aggregate",
        830,
        "SELECT round(variance(n), 2), round(variance(n), 2), round(variance(p)) FROM mnop",
        "query RRR\n----\n0.08 0.08 9",
        "FLOAT to INT casts round half to even since CockroachDB v24.1 (cockroach#117798); the "
        "file's 8 is the variance of truncated values (p = (n * 10)::bigint), 8.25, and the "
        "rounded values' variance is 8.5007",
    ),
    Modern(
        "drop_table",
        9,
        "SHOW TABLES FROM test",
        "query TTTTIT\n----\npublic a table root 0 NULL\npublic b table root 0 NULL",
        "SHOW TABLES has owner, estimated_row_count and locality columns since v20.2/v21.1",
    ),
    Modern(
        "drop_table",
        32,
        "SELECT job_type, status FROM [SHOW JOBS] WHERE job_type = 'SCHEMA CHANGE GC' OR "
        "(job_type = 'SCHEMA CHANGE' AND description != 'updating privileges')",
        "query TT rowsort\n----\nSCHEMA CHANGE     succeeded\nSCHEMA CHANGE GC  running",
        "no ORDER BY: SHOW JOBS lists running jobs first (ORDER BY COALESCE(finished, now()) "
        "DESC), and whether the outer SELECT keeps that order is open; the file's order is the "
        "jobs table's, which an older optimizer gave by dropping SHOW JOBS's",
    ),
    Modern(
        "drop_table",
        38,
        "SHOW TABLES FROM test",
        "query TTTTIT\n----\npublic b table root 0 NULL",
        "SHOW TABLES has owner, estimated_row_count and locality columns since v20.2/v21.1",
    ),
    *(
        Modern("insert", line, sql, "statement error value too long for type CHAR", _CHAR)
        for line, sql in (
            (25, "INSERT INTO kv (k) VALUES ('nil1')"),
            (28, "INSERT INTO kv (k) VALUES ('nil2')"),
            (31, "INSERT INTO kv VALUES ('nil3', NULL)"),
            (34, "INSERT INTO kv VALUES ('nil4', NULL)"),
        )
    ),
    Modern(
        "insert",
        265,
        "SELECT * FROM kv ORDER BY k",
        "query TT\n----\nA NULL\na b\nc d\ne f\nf g\ng ·",
        _CHAR_ROWS,
    ),
    Modern(
        "insert",
        344,
        "INSERT INTO kv4 (int, char) VALUES (4, 1)",
        "statement ok",
        "an INT is assigned to a CHAR column by the assignment cast to string types; the "
        "current file expects INSERT INTO kv4 (int, char) VALUES (4, 1) to succeed",
    ),
    Modern(
        "insert",
        347,
        "INSERT INTO kv4 (int, char) VALUES (4, 'a')",
        "statement error duplicate key value violates unique constraint",
        "the row with key 4 exists: today's CockroachDB inserted it at line 344",
    ),
    Modern(
        "insert",
        350,
        "INSERT INTO kv4 (int, float) VALUES (5, 1::INT)",
        "statement ok",
        "an INT is assigned to a FLOAT column by an assignment cast; the current file expects "
        "INSERT INTO kv4 (int, float) VALUES (6, 1::INT) to succeed",
    ),
    Modern(
        "insert",
        353,
        "INSERT INTO kv4 (int, float) VALUES (5, 2.3)",
        "statement error duplicate key value violates unique constraint",
        "the row with key 5 exists: today's CockroachDB inserted it at line 350",
    ),
    Modern(
        "insert",
        356,
        "SELECT * from kv4",
        "query IIBTR rowsort\n----\n1 NULL NULL NULL NULL\n2 1 NULL NULL NULL\n"
        "3 NULL true NULL NULL\n4 NULL NULL 1 NULL\n5 NULL NULL NULL 1",
        "the CHAR row is the 1 of line 344 and the FLOAT row the 1 of line 350, which today's "
        "CockroachDB assigns (see those lines)",
    ),
    Modern(
        "insert",
        421,
        "INSERT INTO return VALUES (default) RETURNING a, b as C, 4",
        "query III colnames\n----\na c ?column?\n3 NULL 4",
        _RETURNING,
    ),
    Modern(
        "insert",
        484,
        "INSERT INTO return VALUES (1, 2), (3, 4) RETURNING return.*, a + b",
        "query III colnames\n----\na b ?column?\n1 2 3\n3 4 7",
        _RETURNING,
    ),
    Modern(
        "order_by",
        316,
        "SELECT GENERATE_SERIES FROM GENERATE_SERIES(1, 100) ORDER BY ARRAY[GENERATE_SERIES]",
        "query I\n----\n100 values hashing to d632eba71107bf7bc3ec423eab256d78",
        _ARRAYS,
    ),
    *(
        Modern(
            "order_by",
            line,
            sql,
            "query T\n----\n100 values hashing to d38ee9da7c6a46ab0adedcfb29aace2f",
            _ARRAYS,
        )
        for line, sql in (
            (
                319,
                "SELECT ARRAY[GENERATE_SERIES] FROM GENERATE_SERIES(1, 100) "
                "ORDER BY ARRAY[GENERATE_SERIES]",
            ),
            (322, "SELECT ARRAY[GENERATE_SERIES] FROM GENERATE_SERIES(1, 100) ORDER BY 1"),
            (325, "SELECT ARRAY[GENERATE_SERIES] AS a FROM GENERATE_SERIES(1, 100) ORDER BY a"),
        )
    ),
    Modern(
        "order_by",
        419,
        "INSERT INTO abc VALUES (1, 2, 3, 'one'), (4, 5, 6, 'Two')",
        "statement error value too long for type CHAR",
        _CHAR,
    ),
    *(
        Modern("order_by", line, sql, f"query {kind}\n----", _CHAR_ROWS)
        for line, kind, sql in (
            (422, "T", "SELECT d FROM abc ORDER BY LOWER(d)"),
            (578, "I", "SELECT a FROM abc ORDER BY a DESC"),
            (584, "I", "SELECT a FROM abc ORDER BY a DESC LIMIT 1"),
            (589, "I", "SELECT a FROM abc ORDER BY a DESC OFFSET 1"),
        )
    ),
    Modern(
        "order_by",
        692,
        "INSERT INTO nan VALUES (1, 0/0), (2, -1), (3, 1), (4, 0/0)",
        "statement error division by zero",
        _ZERO,
    ),
    Modern("order_by", 695, "SELECT x FROM nan ORDER BY x", "query R\n----", _ZERO),
    Modern(
        "txn",
        256,
        "SET transaction_isolation = 'read committed'",
        "statement ok",
        "READ COMMITTED is a valid isolation level since CockroachDB v23.2 (run as SERIALIZABLE "
        "while sql.txn.read_committed_isolation.enabled is off)",
    ),
    *(
        Modern("update", line, sql, "statement ok", _ASSIGN_DECIMAL)
        for line, sql in (
            (12, "UPDATE kv SET v = 3.2"),
            (15, "UPDATE kv SET (k, v) = (3, 3.2)"),
            (18, "UPDATE kv SET (k, v) = (SELECT 3, 3.2)"),
        )
    ),
    *(
        Modern(
            "update",
            line,
            sql,
            "statement error UPDATE statement requires LIMIT when ORDER BY is used",
            "an UPDATE's ORDER BY needs a LIMIT (42601) since the cost-based optimizer; the "
            "current file writes UPDATE kv SET v = v + 1 ORDER BY v DESC LIMIT 3",
        )
        for line, sql in (
            (457, "UPDATE kv SET v = v + 1 ORDER BY v DESC RETURNING k,v"),
            (470, "UPDATE kv SET k = k * 2 ORDER BY k DESC"),
        )
    ),
    Modern(
        "update",
        234,
        "UPDATE abc SET (b, c) = (8, 9) RETURNING abc.b, c, 4",
        "query III colnames\n----\nb c ?column?\n8 9 4",
        _RETURNING,
    ),
    Modern(
        "update",
        252,
        "UPDATE abc SET (b, c) = (5, 6) RETURNING a, b, c, 4",
        "query IIII colnames\n----\na b c ?column?\n1 5 6 4",
        _RETURNING,
    ),
    Modern(
        "update",
        264,
        "UPDATE abc SET (b, c) = (7, 8) RETURNING *, 4",
        "query IIII colnames\n----\na b c ?column?\n1 7 8 4",
        _RETURNING,
    ),
)

CREATE_STATEMENT_WHY = (
    "SHOW CREATE ends the statement with a semicolon since CockroachDB v25.3 (cockroach#145451)"
)


def modern_create_statement(sql: str, expected: list[str]) -> list[str] | None:
    """Today's rows of a ``SHOW CREATE`` query whose expected statement ends without the
    semicolon CockroachDB now writes, or None when ``sql`` is no such query."""
    if "SHOW CREATE" not in sql.upper() or not expected or expected[-1].strip() != ")":
        return None
    return [*expected[:-1], expected[-1].rstrip() + ";"]
