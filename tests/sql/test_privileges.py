"""Table privileges: a user without the admin role reads and writes only what was
granted (GRANT/REVOKE ... ON TABLE), checked on every statement; denials are 42501."""

from __future__ import annotations

from typing import Any

import pytest

from feedkv import DB
from feedkv.errors import SQLError
from feedkv.sql.statements import PRIVILEGES


@pytest.fixture
def shop(db: DB) -> DB:
    db.sql("CREATE TABLE items (id INT PRIMARY KEY, qty INT)")
    db.sql("CREATE TABLE secrets (id INT PRIMARY KEY, v STRING)")
    db.sql("INSERT INTO items VALUES (1, 10)")
    db.sql("INSERT INTO secrets VALUES (1, 'hidden')")
    db.sql("CREATE USER alice")
    return db


def _denied(db: DB, statement: str, privilege: str, table: str) -> None:
    alice = db.session(user="alice")
    with pytest.raises(SQLError) as raised:
        alice.execute(statement)
    assert raised.value.code == "42501"
    assert f"user alice does not have {privilege} privilege on relation {table}" in str(
        raised.value
    )


@pytest.mark.parametrize(
    ("statement", "privilege"),
    [
        ("SELECT * FROM items", "SELECT"),
        ("INSERT INTO items VALUES (2, 1)", "INSERT"),
        ("UPSERT INTO items VALUES (1, 1)", "INSERT"),
        ("UPDATE items SET qty = 0", "UPDATE"),
        ("DELETE FROM items WHERE id = 1", "DELETE"),
        ("SELECT i.id FROM items i JOIN items j ON i.id = j.id", "SELECT"),
    ],
)
def test_a_user_without_privileges_is_denied(shop: DB, statement: str, privilege: str) -> None:
    _denied(shop, statement, privilege, "items")
    assert shop.sql("SELECT id, qty FROM items").rows == [(1, 10)]


def test_granted_privileges_allow_exactly_what_they_name(shop: DB) -> None:
    shop.sql("GRANT SELECT, INSERT ON TABLE items TO alice")
    alice = shop.session(user="alice")
    alice.execute("INSERT INTO items VALUES (2, 5)")
    assert alice.execute("SELECT id, qty FROM items ORDER BY id").rows == [(1, 10), (2, 5)]
    _denied(shop, "UPDATE items SET qty = 0", "UPDATE", "items")
    _denied(shop, "DELETE FROM items", "DELETE", "items")
    _denied(shop, "SELECT * FROM secrets", "SELECT", "secrets")
    # a subquery reads another table: it needs SELECT there too
    _denied(shop, "INSERT INTO items SELECT id + 10, 0 FROM secrets", "SELECT", "secrets")


def test_revoke_takes_a_privilege_back(shop: DB) -> None:
    shop.sql("GRANT ALL ON items, secrets TO alice")
    alice = shop.session(user="alice")
    alice.execute("UPDATE items SET qty = 3 WHERE id = 1")
    assert alice.execute("SELECT v FROM secrets").rows == [("hidden",)]
    shop.sql("REVOKE SELECT ON secrets FROM alice")
    _denied(shop, "SELECT v FROM secrets", "SELECT", "secrets")
    alice.execute("INSERT INTO secrets VALUES (2, 'mine')")  # INSERT is still held
    # DELETE is still held too, but it reads the rows it deletes: it needs SELECT
    _denied(shop, "DELETE FROM secrets WHERE id = 1", "SELECT", "secrets")


@pytest.mark.parametrize(
    ("granted", "statement", "privilege"),
    [
        # each reads the table's rows, or tells what they hold: SELECT too, as CockroachDB
        ("UPDATE", "UPDATE items SET qty = 0 WHERE qty = 10", "SELECT"),
        ("UPDATE", "UPDATE items SET qty = 0", "SELECT"),
        ("DELETE", "DELETE FROM items WHERE qty = 10", "SELECT"),
        ("DELETE", "DELETE FROM items RETURNING qty", "SELECT"),
        ("INSERT", "INSERT INTO items VALUES (2, 1) RETURNING id", "SELECT"),
        ("INSERT", "INSERT INTO items VALUES (1, 1) ON CONFLICT (id) DO NOTHING", "SELECT"),
        ("INSERT, UPDATE", "UPSERT INTO items VALUES (1, 1)", "SELECT"),
        # ... and those that may change a row need UPDATE
        ("INSERT, SELECT", "UPSERT INTO items VALUES (1, 1)", "UPDATE"),
        (
            "INSERT, SELECT",
            "INSERT INTO items VALUES (1, 1) ON CONFLICT (id) DO UPDATE SET qty = 1",
            "UPDATE",
        ),
        # TRUNCATE empties the table: DROP, as CockroachDB
        ("SELECT, INSERT, UPDATE, DELETE", "TRUNCATE items", "DROP"),
    ],
)
def test_a_write_needs_every_privilege_of_what_it_does(
    shop: DB, granted: str, statement: str, privilege: str
) -> None:
    shop.sql(f"GRANT {granted} ON items TO alice")
    _denied(shop, statement, privilege, "items")
    assert shop.sql("SELECT id, qty FROM items").rows == [(1, 10)]
    shop.sql(f"GRANT {privilege} ON items TO alice")
    shop.session(user="alice").execute(statement)


def test_only_admins_grant(shop: DB) -> None:
    alice = shop.session(user="alice")
    with pytest.raises(SQLError, match="admin role needed to GRANT") as raised:
        alice.execute("GRANT SELECT ON items TO alice")
    assert raised.value.code == "42501"


def test_changefeeds_need_the_changefeed_privilege(shop: DB) -> None:
    alice = shop.session(user="alice")
    with pytest.raises(SQLError, match="requires the CHANGEFEED privilege on table items") as e:
        alice.execute("CREATE CHANGEFEED FOR items INTO 'null://'")
    assert e.value.code == "42501"
    shop.sql("GRANT CHANGEFEED ON items TO alice")
    job = alice.execute("CREATE CHANGEFEED FOR items INTO 'null://'").rows[0][0]
    assert isinstance(job, int)
    with pytest.raises(SQLError, match="requires the SELECT privilege") as e:
        alice.execute("EXPERIMENTAL CHANGEFEED FOR items")
    assert e.value.code == "42501"


def _granted(rows: list[tuple[Any, ...]], grantee: int) -> list[tuple[Any, ...]]:
    """SHOW GRANTS' rows but those of admin and root, which hold ALL on every object."""
    return [row for row in rows if row[grantee] not in ("admin", "root")]


def test_show_grants_lists_admin_and_root_holding_all_on_every_object(shop: DB) -> None:
    """As CockroachDB's: ALL, with the grant option, on the database and each table."""
    on_items = shop.sql("SHOW GRANTS ON TABLE items").rows
    assert [r[2:] for r in on_items] == [
        ("items", "admin", "ALL", True),
        ("items", "root", "ALL", True),
    ]
    owned = {(r[2], r[3], r[4]) for r in shop.sql("SHOW GRANTS").rows if r[5] == "ALL"}
    assert owned >= {
        (None, "database", "admin"),
        (None, "database", "root"),
        ("items", "table", "admin"),
        ("secrets", "table", "root"),
    }
    assert shop.session(user="alice").execute("SHOW GRANTS ON TABLE items").rows == []


def test_show_grants_lists_grants_and_a_user_sees_only_their_own(shop: DB) -> None:
    shop.sql("CREATE USER bob")
    shop.sql("GRANT SELECT, INSERT ON items TO alice")
    shop.sql("GRANT DELETE ON secrets TO bob")
    shown = shop.sql("SHOW GRANTS")
    assert shown.columns[-3:] == ("grantee", "privilege_type", "is_grantable")
    assert shown.columns[:4] == ("database_name", "schema_name", "object_name", "object_type")
    assert [r[2:6] for r in _granted(shown.rows, 4)] == [
        ("items", "table", "alice", "INSERT"),
        ("items", "table", "alice", "SELECT"),
        ("secrets", "table", "bob", "DELETE"),
    ]
    assert [r[2:5] for r in _granted(shop.sql("SHOW GRANTS ON TABLE secrets").rows, 3)] == [
        ("secrets", "bob", "DELETE")
    ]
    assert [r[4] for r in shop.sql("SHOW GRANTS ON items FOR alice").rows] == [
        "INSERT",
        "SELECT",
    ]
    alice = shop.session(user="alice")
    assert [r[4] for r in alice.execute("SHOW GRANTS").rows] == ["alice", "alice"]
    with pytest.raises(SQLError, match="only see their own grants"):
        alice.execute("SHOW GRANTS FOR bob")
    shop.sql("REVOKE ALL ON items FROM alice")
    assert alice.execute("SHOW GRANTS").rows == []


def test_database_privileges_let_a_user_create_and_drop(shop: DB) -> None:
    shop.sql("CREATE DATABASE lab")
    alice = shop.session(user="alice", database="lab")
    with pytest.raises(SQLError, match="does not have CREATE privilege on database lab"):
        alice.execute("CREATE TABLE mine (k INT PRIMARY KEY)")
    shop.sql("GRANT CREATE ON DATABASE lab TO alice")
    alice.execute("CREATE TABLE mine (k INT PRIMARY KEY)")
    alice.execute("DROP TABLE mine")
    with pytest.raises(SQLError, match="does not have DROP privilege on database lab"):
        alice.execute("DROP DATABASE lab")
    shop.sql("GRANT ALL ON DATABASE lab TO alice")
    assert [r[1:6] for r in alice.execute("SHOW GRANTS").rows] == [
        (None, None, "database", "alice", "CREATE"),
        (None, None, "database", "alice", "DROP"),
    ]
    alice.execute("DROP DATABASE lab")
    with pytest.raises(SQLError, match="does not have CREATE privilege on database defaultdb"):
        shop.session(user="alice").execute("CREATE TABLE elsewhere (k INT PRIMARY KEY)")


def test_what_a_user_creates_they_hold_every_privilege_on(shop: DB) -> None:
    # as CockroachDB's owner of an object: a migration user works on its own tables
    shop.sql("CREATE DATABASE app")
    shop.sql("GRANT CREATE ON DATABASE app TO alice")
    alice = shop.session(user="alice", database="app")
    alice.execute("CREATE TABLE mine (k SERIAL PRIMARY KEY, v STRING)")
    alice.execute("INSERT INTO mine (v) VALUES ('a')")
    alice.execute("UPDATE mine SET v = 'b'")
    alice.execute("CREATE VIEW mine_v AS SELECT v FROM mine")
    alice.execute("CREATE SEQUENCE mine_s")
    assert alice.execute("SELECT v FROM mine_v").rows == [("b",)]
    assert alice.execute("SELECT nextval('mine_s')").rows == [(1,)]
    alice.execute("CREATE TABLE copied AS SELECT v FROM mine")
    held = {(r[2], r[5]) for r in alice.execute("SHOW GRANTS").rows}
    assert {(o, p) for o in ("mine", "copied") for p in PRIVILEGES} <= held
    # CREATE on its table lets it change the table's schema (a migration: indexes,
    # columns, constraints), as CockroachDB's CREATE privilege on a table does
    alice.execute("CREATE INDEX mine_v_idx ON mine (v)")
    alice.execute("ALTER TABLE mine ADD COLUMN n INT DEFAULT 0")
    alice.execute("ALTER TABLE mine ADD CONSTRAINT n_positive CHECK (n >= 0)")
    alice.execute("DROP INDEX mine@mine_v_idx")
    # and nothing more: another user's table stays out of reach
    shop.sql("CREATE TABLE app.theirs (k INT PRIMARY KEY)")
    with pytest.raises(SQLError, match="does not have SELECT privilege on relation theirs"):
        alice.execute("SELECT * FROM theirs")
    for ddl in (
        "CREATE INDEX theirs_k ON theirs (k)",
        "ALTER TABLE theirs ADD COLUMN x INT",
        "ALTER TABLE theirs ADD CONSTRAINT k_positive CHECK (k > 0)",
    ):
        with pytest.raises(SQLError, match="does not have CREATE privilege on relation theirs"):
            alice.execute(ddl)
    shop.sql("CREATE INDEX theirs_k ON app.theirs (k)")
    with pytest.raises(SQLError, match="does not have CREATE privilege on relation theirs"):
        alice.execute("DROP INDEX theirs@theirs_k")
    shop.sql("GRANT CREATE ON TABLE app.theirs TO alice")
    alice.execute("ALTER TABLE theirs ADD COLUMN x INT")
    alice.execute("DROP INDEX theirs@theirs_k")
    alice.execute("DROP VIEW mine_v")
    alice.execute("DROP TABLE mine, copied")


def test_grants_on_a_sequence_and_show_grants_on_a_database(shop: DB) -> None:
    """GRANT ... ON SEQUENCE (USAGE: nextval and currval, as PostgreSQL's), and SHOW
    GRANTS ON DATABASE with CockroachDB's columns."""
    shop.sql("CREATE SEQUENCE ids")
    alice = shop.session(user="alice")
    with pytest.raises(SQLError, match="does not have UPDATE privilege on relation ids"):
        alice.execute("SELECT nextval('ids')")
    shop.sql("GRANT USAGE ON SEQUENCE ids TO alice")
    assert alice.execute("SELECT nextval('ids')").rows == [(1,)]
    shop.sql("REVOKE ALL ON SEQUENCE ids FROM alice")
    with pytest.raises(SQLError, match="does not have UPDATE privilege on relation ids"):
        alice.execute("SELECT nextval('ids')")
    shop.sql("GRANT CREATE ON DATABASE defaultdb TO alice")
    shown = shop.sql("SHOW GRANTS ON DATABASE defaultdb")
    assert shown.columns == ("database_name", "grantee", "privilege_type", "is_grantable")
    assert ("defaultdb", "alice", "CREATE", False) in shown.rows
    assert ("defaultdb", "root", "ALL", True) in shown.rows
    assert all(row[0] == "defaultdb" for row in shown.rows)
    assert alice.execute("SHOW GRANTS ON DATABASE defaultdb").rows == [
        ("defaultdb", "alice", "CREATE", False)
    ]
