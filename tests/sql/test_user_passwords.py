"""``CREATE USER ... [WITH] PASSWORD`` and ``ALTER USER``: only SCRAM verifiers are
stored; a user may change their own password, an admin anyone's."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError
from feedkv.security.scram import parse_verifier
from feedkv.sql import catalog
from feedkv.util.keys import KEY_MAX


def _verifier(db: DB, user: str) -> str | None:
    found = catalog.get_user(db, user)
    assert found is not None
    return found.password_verifier


def test_only_the_verifier_is_stored(db: DB) -> None:
    db.sql("CREATE USER alice WITH PASSWORD 'correct-horse-9'")
    db.sql("CREATE USER bob PASSWORD 'battery-staple-7'")
    db.sql("CREATE USER carol")
    for user in ("alice", "bob"):
        verifier = _verifier(db, user)
        assert verifier is not None
        parse_verifier(verifier)
    assert _verifier(db, "carol") is None
    for kv in db.scan(b"\x00", KEY_MAX):
        assert b"correct-horse" not in kv.value and b"battery-staple" not in kv.value


def test_alter_user_sets_and_clears_a_password(db: DB) -> None:
    db.sql("CREATE USER alice WITH PASSWORD 'one'")
    first = _verifier(db, "alice")
    alice = db.session(user="alice")
    alice.execute("ALTER USER alice WITH PASSWORD 'two'")  # her own
    assert _verifier(db, "alice") not in (None, first)
    db.sql("ALTER ROLE alice WITH PASSWORD NULL")
    assert _verifier(db, "alice") is None
    db.sql("GRANT admin TO alice")  # granting admin keeps the password as it is
    db.sql("ALTER USER alice PASSWORD 'three'")
    db.sql("GRANT admin TO alice")
    assert _verifier(db, "alice") is not None


def test_password_statements_refuse_bad_input(db: DB) -> None:
    db.sql("CREATE USER alice")
    db.sql("CREATE USER bob")
    cases = [
        ("CREATE USER x WITH PASSWORD ''", "42601"),
        ("CREATE USER x WITH PASSWORD 42", "42601"),
        ("CREATE USER x WITH CREATEDB", "42601"),
        ("CREATE ROLE x LOGIN NOLOGIN", "42601"),
        ("ALTER USER alice", "42601"),
        ("ALTER USER nobody WITH PASSWORD 'p'", "42704"),
    ]
    for statement, code in cases:
        with pytest.raises(SQLError) as raised:
            db.sql(statement)
        assert raised.value.code == code, statement
    with pytest.raises(SQLError, match="admin role needed to ALTER USER") as raised:
        db.session(user="bob").execute("ALTER USER alice WITH PASSWORD 'mine now'")
    assert raised.value.code == "42501"
    assert _verifier(db, "alice") is None


def test_drop_user_removes_the_user_and_its_grants(db: DB) -> None:
    db.sql("CREATE USER alice WITH PASSWORD 'one'")
    db.sql("CREATE USER bob")
    db.sql("CREATE TABLE notes (id INT PRIMARY KEY)")
    db.sql("GRANT SELECT, INSERT ON notes TO alice, bob")
    db.sql("DROP USER alice")
    assert catalog.get_user(db, "alice") is None
    assert not any(user == "alice" for _, user, _ in catalog.list_privileges(db))
    assert any(user == "bob" for _, user, _ in catalog.list_privileges(db))
    db.sql("DROP USER IF EXISTS alice")  # nothing to drop
    db.sql("CREATE USER alice")  # a new alice holds none of the old one's grants
    assert not any(user == "alice" for _, user, _ in catalog.list_privileges(db))


def test_drop_user_refuses_bad_input(db: DB) -> None:
    db.sql("CREATE USER bob")
    cases = [
        ("DROP USER nobody", "42704"),
        ("DROP USER root", "42501"),
        ("DROP USER", "42601"),
        ("DROP USER bob carol", "42601"),
        ("DROP USER bob,", "42601"),
    ]
    for statement, code in cases:
        with pytest.raises(SQLError) as raised:
            db.sql(statement)
        assert raised.value.code == code, statement
    with pytest.raises(SQLError, match="admin role needed to DROP USER"):
        db.session(user="bob").execute("DROP USER bob")
    assert catalog.get_user(db, "bob") is not None


def test_alter_role_login_options_need_the_admin_role_and_root_keeps_its_login(db: DB) -> None:
    db.sql("CREATE USER u WITH PASSWORD 'pw'")
    db.sql("ALTER ROLE u NOLOGIN PASSWORD NULL")
    assert db.sql("SELECT options FROM [SHOW USERS] WHERE username = 'u'").rows == [("NOLOGIN",)]
    db.sql("ALTER USER u WITH LOGIN")
    assert db.sql("SELECT options FROM [SHOW USERS] WHERE username = 'u'").rows == [("",)]
    db.sql("CREATE USER v")
    for statement, user, code in (
        ("ALTER ROLE v NOLOGIN", "u", "42501"),  # not an admin
        ("ALTER ROLE u NOLOGIN", "u", "42501"),  # not even for itself
        ("ALTER ROLE root NOLOGIN", "root", "42501"),
        ("ALTER ROLE v LOGIN NOLOGIN", "root", "42601"),
        ("ALTER ROLE nobody LOGIN", "root", "42704"),
    ):
        with pytest.raises(SQLError) as raised:
            db.session(user=user).execute(statement)
        assert raised.value.code == code, statement
