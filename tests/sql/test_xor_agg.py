"""CockroachDB's ``xor_agg`` (INT or BYTES: every value XORed; byte strings of one
length, else 22023; NULL over no values) and ``to_hex`` (an INT's 64 bits, a negative
one's two's complement, or the bytes of a BYTES or STRING, in lowercase hex)."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError


@pytest.fixture
def x(db: DB) -> DB:
    db.sql("CREATE TABLE x (k INT PRIMARY KEY, a BYTES, b INT, c INT)")
    db.sql(
        "INSERT INTO x VALUES (1, b'\\x01\\x01', 1, 3), (2, b'\\x02\\x01', 1, 1), "
        "(3, b'\\x04\\x01', 2, -5), (4, b'\\x08\\x01', 2, -1), (5, b'\\x10\\x01', 2, 0)"
    )
    return db


def test_xor_agg_xors_ints_and_byte_strings(x: DB) -> None:
    assert x.sql("SELECT to_hex(xor_agg(a)), xor_agg(c) FROM x").rows == [("1f01", 6)]
    assert x.sql("SELECT to_hex(xor_agg(a)), b, xor_agg(c) FROM x GROUP BY b ORDER BY b").rows == [
        ("0300", 1, 2),
        ("1c01", 2, 4),
    ]
    assert x.sql("SELECT xor_agg(c) FROM x WHERE false").rows == [(None,)]
    running = x.sql("SELECT xor_agg(c) OVER (ORDER BY c) FROM x ORDER BY c").rows
    assert running == [(-5,), (4,), (4,), (5,), (6,)]


def test_xor_agg_refuses_byte_strings_of_other_lengths_and_other_types(x: DB) -> None:
    with pytest.raises(SQLError, match="arguments to xor must all be the same length") as raised:
        x.sql("SELECT xor_agg(i) FROM (VALUES (b'\\x01'), (b'\\x01\\x01')) AS v(i)")
    assert raised.value.code == "22023"
    with pytest.raises(SQLError) as raised:
        x.sql("SELECT xor_agg(1.5)")
    assert raised.value.code == "42883"


def test_to_hex_of_ints_bytes_and_strings(db: DB) -> None:
    assert db.sql("SELECT to_hex(-1), to_hex(255), to_hex('ab'), to_hex(b'\\x00\\xff')").rows == [
        ("ffffffffffffffff", "ff", "6162", "00ff")
    ]
    assert db.sql("SELECT to_hex(NULL::INT)").rows == [(None,)]
