"""Grants as PostgreSQL's aclitem text (feedkv/pgwire/acl.py)."""

from __future__ import annotations

import pytest

from feedkv.pgwire.acl import acl_items, aclitem


@pytest.mark.parametrize(
    ("privileges", "shown"),
    [
        ({"SELECT"}, "alice=r/root"),
        ({"DELETE", "UPDATE", "SELECT", "INSERT"}, "alice=arwd/root"),
        ({"SELECT", "CHANGEFEED", "DROP"}, "alice=r/root"),
        ({"CREATE", "CONNECT", "USAGE"}, "alice=UCc/root"),
    ],
)
def test_aclitem_writes_postgresql_letters_in_postgresql_order(
    privileges: set[str], shown: str
) -> None:
    assert aclitem("alice", privileges, "root") == shown


def test_privileges_without_a_postgresql_letter_make_no_aclitem() -> None:
    assert aclitem("bob", {"CHANGEFEED", "DROP"}, "root") is None
    assert acl_items([("bob", {"CHANGEFEED"}), ("alice", {"SELECT"})], "root") == ["alice=r/root"]


def test_acl_items_are_ordered_by_grantee_with_the_owner_as_grantor() -> None:
    grants = [("carol", frozenset({"CREATE"})), ("alice", frozenset({"CREATE", "DROP"}))]
    assert acl_items(grants, "dba") == ["alice=C/dba", "carol=C/dba"]
