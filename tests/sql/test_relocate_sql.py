"""``ALTER TABLE t RELOCATE [LEASE] VALUES (...)`` on a node of its own: the forms
CockroachDB takes, the errors for bad targets and keys (the moves between nodes are
tested on a cluster in tests/server/test_local_cluster.py)."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import InvalidArgumentError, SQLError


@pytest.fixture
def table(db: DB) -> DB:
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    db.sql("INSERT INTO t VALUES (1, 'a'), (5, 'b')")
    db.sql("ALTER TABLE t SPLIT AT VALUES (5)")
    return db


def test_relocating_to_the_node_itself_keeps_the_range_and_names_the_key(table: DB) -> None:
    before = table.sql("SHOW RANGES FROM TABLE t").rows
    moved = table.sql("ALTER TABLE t RELOCATE VALUES (ARRAY[1], 5)")
    assert moved.tag == "RELOCATE 1" and moved.columns == ("key", "pretty")
    assert [pretty for _key, pretty in moved.rows] == ["/5"]
    lease = table.sql("ALTER TABLE t RELOCATE LEASE VALUES (1, 1), (1, 5)")
    assert lease.tag == "RELOCATE LEASE 2"
    assert table.sql("SHOW RANGES FROM TABLE t").rows == before
    assert table.sql("SELECT v FROM t ORDER BY k").rows == [("a",), ("b",)]


def test_relocating_to_another_node_of_a_lone_node_says_there_is_none(table: DB) -> None:
    with pytest.raises(InvalidArgumentError, match="no node n2: this node is in no cluster"):
        table.sql("ALTER TABLE t RELOCATE VALUES (ARRAY[2], 5)")


@pytest.mark.parametrize(
    ("statement", "code", "message"),
    [
        ("ALTER TABLE t RELOCATE VALUES (1, 5)", "42601", "takes ARRAY[node_id] first"),
        ("ALTER TABLE t RELOCATE VALUES (ARRAY[1, 2], 5)", "0A000", "moves a range to one node"),
        ("ALTER TABLE t RELOCATE VALUES (ARRAY[0], 5)", "22023", "0 is not a node id"),
        ("ALTER TABLE t RELOCATE LEASE VALUES ('x', 5)", "22023", "'x' is not a node id"),
        ("ALTER TABLE t RELOCATE VALUES (ARRAY[1])", "42601", "the target and the key's values"),
        ("ALTER TABLE t RELOCATE (ARRAY[1], 5)", "42601", "expected VALUES after RELOCATE"),
        ("ALTER TABLE t RELOCATE VALUES (ARRAY[1], NULL)", "22004", "cannot be NULL"),
        ("ALTER TABLE t RELOCATE VALUES (ARRAY[1], 5, 6)", "42601", "too many columns"),
        ("ALTER TABLE nope RELOCATE VALUES (ARRAY[1], 5)", "42P01", '"nope" does not exist'),
    ],
)
def test_a_bad_relocate_is_refused_naming_the_bad_part(
    table: DB, statement: str, code: str, message: str
) -> None:
    with pytest.raises(SQLError) as raised:
        table.sql(statement)
    assert raised.value.code == code
    assert message in str(raised.value)


def test_only_the_admin_role_relocates(table: DB) -> None:
    table.sql("CREATE USER alice")
    table.sql("GRANT ALL ON t TO alice")
    with pytest.raises(SQLError) as raised:
        table.session(user="alice").execute("ALTER TABLE t RELOCATE VALUES (ARRAY[1], 5)")
    assert raised.value.code == "42501"
