"""Role membership (GRANT role TO user, REVOKE role FROM user), as CockroachDB's: a
member holds the privileges of its roles, through roles of roles too; ``admin``'s
members are admins; SHOW GRANTS ON ROLE and SHOW USERS list the memberships."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError

# what admin and root hold on every object, as CockroachDB's SHOW GRANTS lists
OWNERS = {("admin", "ALL"), ("root", "ALL")}


@pytest.fixture
def shop(db: DB) -> DB:
    db.sql("CREATE TABLE items (id INT PRIMARY KEY, qty INT)")
    db.sql("INSERT INTO items VALUES (1, 10)")
    db.sql("CREATE ROLE readers")
    db.sql("CREATE ROLE staff")
    db.sql("CREATE USER alice")
    db.sql("GRANT SELECT ON items TO readers")
    return db


def _code(db: DB, statement: str, *, user: str = "root") -> str:
    with pytest.raises(SQLError) as raised:
        db.session(user=user).execute(statement)
    return raised.value.code


def test_a_member_holds_its_roles_privileges_until_revoked(shop: DB) -> None:
    assert _code(shop, "SELECT qty FROM items", user="alice") == "42501"
    shop.sql("GRANT readers TO alice")
    alice = shop.session(user="alice")
    assert alice.execute("SELECT qty FROM items").rows == [(10,)]
    assert _code(shop, "UPDATE items SET qty = 0", user="alice") == "42501"
    shop.sql("REVOKE readers FROM alice")
    assert _code(shop, "SELECT qty FROM items", user="alice") == "42501"


def test_a_grant_to_a_member_adds_only_what_it_names(shop: DB) -> None:
    """GRANT writes the user's own grants: what it holds through a role stays the role's
    (it goes with REVOKE role), not copied to the user."""
    shop.sql("GRANT readers TO alice")
    shop.sql("GRANT INSERT ON items TO alice")
    grants = {tuple(r[3:5]) for r in shop.sql("SHOW GRANTS ON items").rows}
    assert grants == {("alice", "INSERT"), ("readers", "SELECT"), *OWNERS}
    shop.sql("REVOKE readers FROM alice")
    assert _code(shop, "SELECT qty FROM items", user="alice") == "42501"


def test_privileges_pass_through_roles_of_roles(shop: DB) -> None:
    shop.sql("GRANT readers TO staff")
    shop.sql("GRANT staff TO alice")
    assert shop.session(user="alice").execute("SELECT qty FROM items").rows == [(10,)]
    shop.sql("REVOKE SELECT ON items FROM readers")
    assert _code(shop, "SELECT qty FROM items", user="alice") == "42501"


def test_show_grants_on_role_and_show_users_list_memberships(shop: DB) -> None:
    shop.sql("GRANT readers, staff TO alice")
    shop.sql("GRANT admin TO alice")
    assert shop.sql("SHOW GRANTS ON ROLE").rows == [
        ("admin", "alice", True),
        ("admin", "root", True),
        ("readers", "alice", False),
        ("staff", "alice", False),
    ]
    assert shop.sql("SHOW GRANTS ON ROLE readers, staff FOR alice").rows == [
        ("readers", "alice", False),
        ("staff", "alice", False),
    ]
    users = {name: list(member_of.values) for name, _, member_of in shop.sql("SHOW USERS").rows}
    assert users["alice"] == ["admin", "readers", "staff"]
    shop.sql("REVOKE admin, staff FROM alice")
    assert shop.sql("SHOW GRANTS ON ROLE FOR alice").rows == [("readers", "alice", False)]
    assert _code(shop, "CREATE USER eve", user="alice") == "42501"


def test_a_member_of_a_role_that_is_an_admin_is_an_admin(shop: DB) -> None:
    shop.sql("GRANT admin TO staff")
    assert _code(shop, "UPDATE items SET qty = 0", user="alice") == "42501"
    shop.sql("GRANT staff TO alice")
    alice = shop.session(user="alice")
    alice.execute("UPDATE items SET qty = 0")
    alice.execute("CREATE USER eve")
    assert shop.sql("SELECT qty FROM items").rows == [(0,)]
    shop.sql("REVOKE staff FROM alice")
    assert _code(shop, "CREATE USER frank", user="alice") == "42501"


def test_memberships_are_refused_when_they_would_loop_or_name_nobody(shop: DB) -> None:
    shop.sql("GRANT readers TO staff")
    assert _code(shop, "GRANT staff TO readers") == "0LP01"
    assert _code(shop, "GRANT readers TO readers") == "0LP01"
    assert _code(shop, "GRANT nobody TO alice") == "42704"
    assert _code(shop, "GRANT readers TO nobody") == "42704"
    assert _code(shop, "GRANT readers TO alice", user="alice") == "42501"
    assert _code(shop, "REVOKE admin FROM root") == "42501"
    assert _code(shop, "GRANT readers TO alice WITH ADMIN OPTION") == "0A000"


def test_a_role_cannot_log_in_unless_created_with_login(shop: DB) -> None:
    for role, code in (("readers", "28000"), ("alice", None)):
        session = shop.session(user=role)
        if code is None:
            session.check_login()
        else:
            with pytest.raises(SQLError) as raised:
                session.check_login()
            assert raised.value.code == code
            assert f"{role} does not have login privilege" in str(raised.value)
    shop.sql("CREATE ROLE clerk WITH LOGIN PASSWORD 'pw'")
    shop.sql("CREATE USER robot NOLOGIN")
    shop.session(user="clerk").check_login()
    options = {name: option for name, option, _ in shop.sql("SHOW USERS").rows}
    assert options == {
        "admin": "",
        "alice": "",
        "clerk": "",
        "readers": "NOLOGIN",
        "robot": "NOLOGIN",
        "root": "",
        "staff": "NOLOGIN",
    }


def test_dropping_a_role_ends_its_memberships(shop: DB) -> None:
    shop.sql("GRANT readers TO alice")
    shop.sql("DROP ROLE readers")
    assert shop.sql("SHOW GRANTS ON ROLE").rows == [("admin", "root", True)]
    shop.sql("CREATE ROLE readers")
    assert _code(shop, "SELECT qty FROM items", user="alice") == "42501"


def test_show_grants_for_a_user_lists_what_it_holds_through_its_roles(shop: DB) -> None:
    shop.sql("GRANT SELECT ON items TO readers")
    shop.sql("GRANT readers TO staff")
    shop.sql("GRANT staff TO alice")
    shop.sql("GRANT INSERT ON items TO alice")
    held = [r[2:6] for r in shop.sql("SHOW GRANTS FOR alice").rows]
    # the grantee is the role that holds the privilege, as CockroachDB shows it
    assert held == [("items", "table", "alice", "INSERT"), ("items", "table", "readers", "SELECT")]
    on_items = shop.sql("SHOW GRANTS ON items FOR alice")
    assert on_items.columns[:3] == ("database_name", "schema_name", "table_name")
    assert [r[3:5] for r in on_items.rows] == [("alice", "INSERT"), ("readers", "SELECT")]
    # ON without FOR: only what was granted on the table itself, to whom (and what
    # admin and root hold on every object)
    assert {tuple(r[3:5]) for r in shop.sql("SHOW GRANTS ON items").rows} == {
        ("alice", "INSERT"),
        ("readers", "SELECT"),
        *OWNERS,
    }
    assert [r[4:6] for r in shop.session(user="alice").execute("SHOW GRANTS").rows] == [
        ("alice", "INSERT"),
        ("readers", "SELECT"),
    ]
    shop.sql("REVOKE staff FROM alice")
    assert [r[4:6] for r in shop.sql("SHOW GRANTS FOR alice").rows] == [("alice", "INSERT")]
