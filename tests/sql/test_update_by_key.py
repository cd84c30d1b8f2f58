"""An UPDATE whose WHERE names the whole primary key writes the one row by its key
(plan._point): the constant is read as the key column's type, and a constant that
does not keep its value there (1.5 for an INT) names no row."""

from __future__ import annotations

import pytest

from feedkv import DB


@pytest.mark.parametrize(
    ("where", "tag"),
    [
        ("k = 1", "UPDATE 1"),
        ("k = 2", "UPDATE 0"),
        ("k = 1.0", "UPDATE 1"),
        ("k = 1.5", "UPDATE 0"),
        ("k = '1'", "UPDATE 1"),
        ("k = 9223372036854775807", "UPDATE 0"),
        ("k = -9223372036854775808", "UPDATE 1"),
    ],
)
def test_an_update_by_key_finds_the_row_its_key_names(db: DB, where: str, tag: str) -> None:
    session = db.session()
    session.execute("CREATE TABLE kv (k INT PRIMARY KEY, v STRING)")
    session.execute("INSERT INTO kv VALUES (1, 'a'), (-9223372036854775808, 'low')")
    assert session.execute(f"UPDATE kv SET v = 'b' WHERE {where}").tag == tag
