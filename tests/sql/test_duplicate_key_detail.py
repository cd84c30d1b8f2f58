"""A duplicate key (23505) as CockroachDB reports it: the message names the constraint,
the DETAIL field names the key (``Key (k)=(1) already exists.``), a string value quoted
as a SQL literal (``Key (k)=('a')``, where PostgreSQL shows it bare)."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError


@pytest.fixture
def users(db: DB) -> DB:
    db.sql("CREATE TABLE users (id INT PRIMARY KEY, email STRING UNIQUE, a INT, b INT)")
    db.sql("CREATE UNIQUE INDEX ab ON users (a, b)")
    db.sql("INSERT INTO users VALUES (1, 'a@x', 1, 2), (3, 'c@x', 3, 3)")
    return db


@pytest.mark.parametrize(
    ("statement", "constraint", "detail"),
    [
        ("INSERT INTO users VALUES (1, 'b@x', 0, 0)", "users_pkey", "Key (id)=(1) already exists."),
        (
            "INSERT INTO users VALUES (2, 'a@x', 0, 0)",
            "users_email_key",
            "Key (email)=('a@x') already exists.",
        ),
        ("INSERT INTO users VALUES (2, 'b@x', 1, 2)", "ab", "Key (a, b)=(1, 2) already exists."),
        ("UPDATE users SET id = 1 WHERE id = 3", "users_pkey", "Key (id)=(1) already exists."),
    ],
)
def test_the_key_is_in_the_detail_not_the_message(
    users: DB, statement: str, constraint: str, detail: str
) -> None:
    with pytest.raises(SQLError) as caught:
        users.sql(statement)
    error = caught.value
    assert error.code == "23505"
    assert error.message == f'duplicate key value violates unique constraint "{constraint}"'
    assert error.detail == detail
    assert str(error) == f"{error.message}\nDETAIL: {detail}"


def test_an_error_without_detail_reads_as_its_message() -> None:
    error = SQLError("42P01", 'relation "nowhere" does not exist')
    assert (error.detail, str(error)) == (None, 'relation "nowhere" does not exist')
