"""ARRAY columns over the SQL port with psycopg: PostgreSQL's array OIDs (int8[] is
1016, text[] 1009), lists in and out, in the text and the binary format."""

from __future__ import annotations

import psycopg
import pytest


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_lists_go_in_and_come_back(pg_url: str, binary: bool) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (k INT PRIMARY KEY, nums INT[], tags STRING[])")
        conn.execute("INSERT INTO t VALUES (1, %s, %s)", ([3, None, 1], ["a", 'b "c"', ""]))
        conn.execute("INSERT INTO t VALUES (2, '{}', ARRAY['x'])")
        cursor = conn.cursor(binary=binary)
        cursor.execute("SELECT nums, tags FROM t ORDER BY k")
        assert [d.type_code for d in cursor.description] == [1016, 1009]
        assert cursor.fetchall() == [([3, None, 1], ["a", 'b "c"', ""]), ([], ["x"])]
        cursor.execute("SELECT k FROM t WHERE nums = %s", ([3, None, 1],))
        # NB: as PostgreSQL's array comparison, NULL elements are equal to each other
        assert cursor.fetchall() == [(1,)]
        cursor.execute("SELECT nums[1] FROM t WHERE k = 1")
        assert cursor.fetchall() == [(3,)]


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_a_list_parameter_comes_back_as_the_array_it_was_sent_as(pg_url: str, binary: bool) -> None:
    """A parameter the client typed int2[] (psycopg's list of small ints, in text or in
    binary) is an array: ``SELECT %s`` of it is an array, not its text."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        cursor = conn.cursor(binary=binary)
        cursor.execute("SELECT %s, %b", ([1, None], [2.5]))
        assert [d.type_code for d in cursor.description] == [1016, 1022]
        assert cursor.fetchone() == ([1, None], [2.5])
