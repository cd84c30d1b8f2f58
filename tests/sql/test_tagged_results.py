"""A write without RETURNING answers with a result shared by every statement of its tag
(feedkv.sql.execution.tagged): it reads and compares as a result made anew, and its
empty rows refuse to grow, so no caller's change reaches another statement's result."""

from __future__ import annotations

from typing import Any

import pytest

from feedkv import DB
from feedkv.sql.execution import Result, tagged


def test_a_writes_result_is_its_tag_and_no_rows(db: DB) -> None:
    session = db.session()
    session.execute("CREATE TABLE kv (k INT PRIMARY KEY, v STRING)")
    inserted = session.execute("INSERT INTO kv (k, v) VALUES ($1, $2)", 1, "a")
    assert inserted == Result(tag="INSERT 0 1")
    assert (inserted.rows, inserted.columns, list(inserted), len(inserted)) == ([], (), [], 0)
    assert session.execute("UPDATE kv SET v = $2 WHERE k = $1", 1, "b") == Result(tag="UPDATE 1")
    assert session.execute("UPDATE kv SET v = 'c' WHERE k = 2").tag == "UPDATE 0"
    assert session.execute("SELECT k, v FROM kv").rows == [(1, "b")]


@pytest.mark.parametrize(
    "change",
    [
        lambda rows: rows.append((1,)),
        lambda rows: rows.extend([(1,)]),
        lambda rows: rows.insert(0, (1,)),
        lambda rows: rows.__iadd__([(1,)]),
        lambda rows: rows.__setitem__(slice(None), [(1,)]),
    ],
)
def test_a_shared_results_rows_refuse_to_grow(change: Any) -> None:
    with pytest.raises(TypeError, match="shared"):
        change(tagged("INSERT 0 1").rows)
    assert tagged("INSERT 0 1").rows == []
