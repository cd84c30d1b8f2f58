"""The PostgreSQL JDBC driver, unchanged, from a small Java program
(testdata/JdbcProbe.java, run with Java's single-file launcher): statements, prepared
statements with typed parameters, a rolled-back transaction and DatabaseMetaData's
getTables, getColumns and getPrimaryKeys (which read pg_catalog); then batches rewritten
into one INSERT (reWriteBatchedInserts), generated keys, dates, times and arrays as the
driver sends them, a fetch size in a transaction, and getIndexInfo, getImportedKeys,
getSchemas and getTypeInfo. A second program (testdata/JdbcResultProbe.java) reads a
result's columns' tables through ResultSetMetaData and calls builtins through
CallableStatement escapes.

The driver's jar is looked for in $FEEDKV_PGJDBC_JAR, Debian's libpostgresql-jdbc-java
and the local Maven repository; without a jar or a ``java`` the test is skipped."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest

PROBE = Path(__file__).parent / "testdata" / "JdbcProbe.java"
RESULT_PROBE = Path(__file__).parent / "testdata" / "JdbcResultProbe.java"


def _jar() -> str | None:
    candidates = [
        os.environ.get("FEEDKV_PGJDBC_JAR", ""),
        "/usr/share/java/postgresql.jar",
        *sorted(
            glob.glob(os.path.expanduser("~/.m2/repository/org/postgresql/postgresql/*/*.jar"))
        ),
    ]
    return next((c for c in candidates if c and os.path.isfile(c)), None)


JAR = _jar()


def _jdbc_tls(pg_url: str) -> str:
    """``pg_url`` with root's key as pgjdbc reads one: PKCS#8 DER, not libpq's PEM
    (``feedkv cert create-client --also-generate-pkcs8-key`` writes it beside)."""
    query = dict(parse_qsl(urlsplit(pg_url).query))
    if "sslkey" not in query:
        return pg_url
    query["sslkey"] += ".pk8"
    return urlunsplit(urlsplit(pg_url)._replace(query=urlencode(query)))


def _run_probe(probe: Path, pg_url: str) -> list[str]:
    """The lines ``probe`` (a Java program run with the driver) prints, connected to
    ``pg_url`` as root."""
    assert JAR is not None
    jdbc = "jdbc:" + _jdbc_tls(pg_url).replace("postgresql://root@", "postgresql://")
    jdbc = jdbc.replace("?sslmode=", "?user=root&reWriteBatchedInserts=true&sslmode=")
    done = subprocess.run(
        ["java", "-cp", JAR, str(probe), jdbc],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.splitlines()


NO_JAVA = JAR is None or shutil.which("java") is None


@pytest.mark.skipif(NO_JAVA, reason="no JDBC jar or java")
def test_the_jdbc_driver_runs_statements_and_reads_metadata(pg_url: str) -> None:
    assert _run_probe(PROBE, pg_url) == [
        "row 2 n2 2.5",
        "row 3 n3 3.5",
        "after rollback n1",
        "product PostgreSQL 13.0.0",
        "table j",
        "column id int8",
        "column name text",
        "column score numeric",
        "pk id",
        "batch 3 keys 3",
        "types date time timestamp _int8",
        "k 2024-02-21 01:02:01 2024-01-02 03:04:05.5 [1, null]",
        "k 2024-02-22 01:02:02 2024-01-02 03:04:05.5 [2, null]",
        "k 2024-02-23 01:02:03 2024-01-02 03:04:05.5 [3, null]",
        "prepared 3 2024-02-23 2024-01-02T03:04:05.500",
        "index k_day false day A",
        "index k_pkey false id A",
        "fk jid -> j.id j_pkey delete 0",
        "schemas information_schema pg_catalog public",
        "types int8 true _int8 true",
    ]


@pytest.mark.skipif(NO_JAVA, reason="no JDBC jar or java")
def test_the_jdbc_driver_finds_a_result_columns_table_and_calls_builtins(pg_url: str) -> None:
    """RowDescription names the table and column a result column is read from, which
    the driver looks up in pg_catalog (a computed column has none). ``{call f(?)}``
    reads ``select * from f($1) as result``; ``{? = call f(?)}`` sends its return
    value's placeholder typed VOID, refused as CockroachDB does. A prepared read of a
    view is described before a value is bound (getMetaData, getParameterMetaData)."""
    assert _run_probe(RESULT_PROBE, pg_url) == [
        "column name table 'r' base 'public.r.name' nullable 0",
        "column more table '' base '..' nullable 2",
        "column score table 'r' base 'public.r.score' nullable 1",
        "column id table 'r' base 'public.r.id' nullable 0",
        "call result ABC",
        "call refused 42883 ERROR: unknown signature: upper(void, string)",
        "view label text k int8 param int8",
        "view row a 1",
    ]
