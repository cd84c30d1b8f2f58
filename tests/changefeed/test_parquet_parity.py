"""Parquet files as CockroachDB 26.1 writes them, read back with pyarrow: its column
types (the Parquet types table of the EXPORT docs, which changefeeds share) and its
metadata columns: ``__crdb__event_type`` always, ``__crdb__updated`` only with
``updated``, ``__crdb__mvcc_timestamp`` only with ``mvcc_timestamp`` and
``__crdb__before`` (the previous row as JSON) only with ``diff``, after the table's
columns (pkg/ccl/changefeedccl/parquet.go names them ``metaSentinel`` + option)."""

from __future__ import annotations

import decimal
import json
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from feedkv import DB
from feedkv.changefeed import cockroach_parquet
from feedkv.changefeed.cockroach_parquet import interval_iso8601
from feedkv.sql.interval import Interval
from feedkv.sql.types import ColumnType, Kind
from feedkv.testing.waiting import wait_until

FAST = "resolved='0s', min_checkpoint_frequency='0s'"

ROW = (
    "(1, 4, 1.5, 12.5, 3.14159, 'é', '\\x00ff', true, '2025-04-01', "
    "'2025-04-01 17:55:46.812942', '2025-04-01 17:55:46.8+02:00', "
    '\'58390d92-2472-43e1-86bc-1642395e8dad\', \'{"b": [1, null], "a": "x"}\', '
    "'13:14:15.5', '1 day 02:03:04.5', '192.168.0.1/24', 'sad', ARRAY[1, NULL, 3], B'101')"
)


@pytest.fixture
def typed(db: DB) -> DB:
    db.sql("CREATE TYPE mood AS ENUM ('ok', 'sad')")
    db.sql(
        "CREATE TABLE x (id INT PRIMARY KEY, i4 INT4, f FLOAT, d DECIMAL(10,2), dn DECIMAL, "
        "s STRING, b BYTES, ok BOOL, dt DATE, ts TIMESTAMP, tz TIMESTAMPTZ, u UUID, j JSONB, "
        "t TIME, iv INTERVAL, ip INET, m mood, a INT[], bits BIT(3))"
    )
    db.sql(f"INSERT INTO x VALUES {ROW}")
    return db


def parquet_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.parquet"))


def rows_until(root: Path, count: int) -> list[dict[str, Any]]:
    """The rows of the files under ``root`` (in file order), once there are ``count``."""
    found: list[dict[str, Any]] = []

    def enough() -> bool:
        found[:] = [r for p in parquet_files(root) for r in pq.read_table(p).to_pylist()]
        return len(found) >= count

    wait_until(enough)
    return found


def test_columns_have_cockroachdbs_parquet_types(typed: DB, tmp_path: Path) -> None:
    """Each SQL type is written as the EXPORT docs' Parquet types table says: INT4 an
    INT32, DECIMAL(p,s) a DECIMAL(p,s), UUID a 16-byte fixed array, JSONB the JSON
    logical type, TIME an INT64 TIME(micros), DATE/TIMESTAMP/TIMESTAMPTZ/INTERVAL/
    INET/ENUM strings (INTERVAL as ISO 8601), ARRAY a repeated field; without options
    the only metadata column is ``__crdb__event_type``."""
    out = tmp_path / "files"
    typed.sql(f"CREATE CHANGEFEED FOR x INTO 'file://{out}' WITH format=parquet, {FAST}")
    [row] = rows_until(out, 1)
    [path] = parquet_files(out)[:1]
    schema = pq.read_schema(path)
    physical = pq.ParquetFile(path).schema

    assert schema.names[-1] == "__crdb__event_type"
    assert not {"__crdb__updated", "__crdb__mvcc_timestamp", "__crdb__before"} & set(schema.names)
    types = {f.name: f.type for f in schema}
    assert types["id"] == pa.int64() and types["i4"] == pa.int32()
    assert types["f"] == pa.float64() and types["ok"] == pa.bool_()
    assert types["d"] == pa.decimal128(10, 2) and types["dn"] == pa.string()
    assert types["u"] == pa.binary(16) and types["b"] == pa.binary()
    assert types["t"] == pa.time64("us")
    assert types["a"] == pa.list_(pa.int64())
    for name in ("s", "dt", "ts", "tz", "iv", "ip", "m"):
        assert types[name] == pa.string(), name
    assert str(physical.column(schema.get_field_index("j")).logical_type) == "JSON"

    assert row["d"] == decimal.Decimal("12.50") and row["dn"] == "3.14159"
    assert (row["dt"], row["ts"], row["tz"]) == (
        "2025-04-01",
        "2025-04-01 17:55:46.812942",
        "2025-04-01 15:55:46.8+00",
    )
    assert uuid.UUID(bytes=row["u"]) == uuid.UUID("58390d92-2472-43e1-86bc-1642395e8dad")
    assert json.loads(row["j"]) == {"a": "x", "b": [1, None]}
    assert (row["iv"], row["ip"], row["m"]) == ("P1DT2H3M4.5S", "192.168.0.1/24", "sad")
    assert row["a"] == [1, None, 3] and row["bits"] == b"101"
    assert (row["s"], row["b"], row["__crdb__event_type"]) == ("é", b"\x00\xff", "c")


def test_metadata_columns_follow_the_options(db: DB, tmp_path: Path) -> None:
    """``updated``, ``mvcc_timestamp`` and ``diff`` add ``__crdb__updated``,
    ``__crdb__mvcc_timestamp`` and ``__crdb__before`` in that order after the event
    type; an update is ``u`` with the previous row in ``__crdb__before``, a deletion
    ``d`` with only the key set; an insert's ``__crdb__before`` is null."""
    db.sql("CREATE TABLE p (k INT PRIMARY KEY, s STRING)")
    db.sql("INSERT INTO p VALUES (1, 'a')")
    out = tmp_path / "files"
    db.sql(
        f"CREATE CHANGEFEED FOR p INTO 'file://{out}' "
        f"WITH format=parquet, updated, mvcc_timestamp, diff, {FAST}"
    )
    rows_until(out, 1)
    db.sql("UPDATE p SET s = 'b' WHERE k = 1")
    db.sql("DELETE FROM p WHERE k = 1")
    rows = rows_until(out, 3)
    names = pq.read_schema(parquet_files(out)[0]).names

    assert names == [
        "k",
        "s",
        "__crdb__event_type",
        "__crdb__updated",
        "__crdb__mvcc_timestamp",
        "__crdb__before",
    ]
    assert [(r["k"], r["s"], r["__crdb__event_type"]) for r in rows] == [
        (1, "a", "c"),
        (1, "b", "u"),
        (1, None, "d"),
    ]
    assert [r["__crdb__before"] and json.loads(r["__crdb__before"]) for r in rows] == [
        None,
        {"k": 1, "s": "a"},
        {"k": 1, "s": "b"},
    ]
    for r in rows:
        wall, logical = r["__crdb__mvcc_timestamp"].split(".")
        assert int(wall) > 0 and len(logical) == 10
    assert rows[1]["__crdb__updated"] == rows[1]["__crdb__mvcc_timestamp"]


def test_without_diff_an_update_is_still_u(db: DB, tmp_path: Path) -> None:
    """The event type tells an update from an insert without ``diff`` (CockroachDB
    reads the previous row for it), and there is no ``__crdb__before`` column."""
    db.sql("CREATE TABLE p (k INT PRIMARY KEY, s STRING)")
    db.sql("INSERT INTO p VALUES (1, 'a')")
    out = tmp_path / "files"
    db.sql(f"CREATE CHANGEFEED FOR p INTO 'file://{out}' WITH format=parquet, {FAST}")
    rows_until(out, 1)
    db.sql("UPDATE p SET s = 'b' WHERE k = 1")
    db.sql("INSERT INTO p VALUES (2, 'c')")
    rows = rows_until(out, 3)
    assert sorted((r["k"], r["s"], r["__crdb__event_type"]) for r in rows) == [
        (1, "a", "c"),
        (1, "b", "u"),
        (2, "c", "c"),
    ]
    assert "__crdb__before" not in rows[0]


@pytest.mark.parametrize(
    ("interval", "iso"),
    [
        (Interval(), "PT0S"),
        (Interval(14, 3, 0), "P1Y2M3D"),
        (Interval(0, 0, 7_384_500_000), "PT2H3M4.5S"),
        (Interval(-1, -2, -61_000_000), "P-1M-2DT-1M-1S"),
        (Interval(0, 0, 1), "PT0.000001S"),
    ],
)
def test_intervals_are_iso8601(interval: Interval, iso: str) -> None:
    assert interval_iso8601(interval) == iso


def test_a_decimal_wider_than_arrows_is_written_as_text() -> None:
    """Arrow's decimal128 holds 38 digits: a DECIMAL(50,2) column is text, its values
    with it (the type and the values once disagreed, and the batch failed)."""
    wide = ColumnType(Kind.DECIMAL, precision=50, scale=2)
    array = cockroach_parquet.arrow_array(wide, [decimal.Decimal("1.50"), None])
    assert array.type == pa.string() and array.to_pylist() == ["1.50", None]
    typed = ColumnType(Kind.DECIMAL, precision=38, scale=2)
    array = cockroach_parquet.arrow_array(typed, [decimal.Decimal("1.50")])
    assert array.type == pa.decimal128(38, 2) and array.to_pylist() == [decimal.Decimal("1.50")]
