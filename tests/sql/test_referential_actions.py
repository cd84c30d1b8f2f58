"""What a foreign key's action makes of a referencing row (the pure core of
:mod:`feedkv.sql.referential_actions`), and a changefeed on the referencing table
seeing the rows the actions wrote."""

from __future__ import annotations

import json
from typing import Any

import pytest

from feedkv import DB
from feedkv.changefeed.sinkless import FeedResult
from feedkv.errors import SQLError
from feedkv.sql.descriptor import ForeignKey
from feedkv.sql.referential_actions import action_of, referencing_change

# child columns 2, 3 reference the parent's columns 1, 2
FK = ForeignKey("c_fkey", (2, 3), 7, "p", (1, 2), ("a", "b"), "CASCADE", "SET NULL")
ROW = {1: "k", 2: 10, 3: 20}


@pytest.mark.parametrize(
    ("action", "new_parent", "expected"),
    [
        ("CASCADE", None, None),
        ("CASCADE", {1: 11, 2: 21}, {1: "k", 2: 11, 3: 21}),
        ("SET NULL", None, {1: "k", 2: None, 3: None}),
        ("SET NULL", {1: 11, 2: 21}, {1: "k", 2: None, 3: None}),
        ("SET DEFAULT", None, {1: "k", 2: 0, 3: -1}),
    ],
)
def test_each_action_makes_its_row(
    action: str, new_parent: dict[int, Any] | None, expected: dict[int, Any] | None
) -> None:
    assert referencing_change(FK, action, ROW, new_parent, (0, -1)) == expected
    assert ROW == {1: "k", 2: 10, 3: 20}  # the row read is left as it was


def test_the_action_follows_the_event() -> None:
    assert action_of(FK, None) == "CASCADE"
    assert action_of(FK, {1: 11, 2: 21}) == "SET NULL"


def test_an_action_that_writes_nothing_is_no_change_to_make() -> None:
    with pytest.raises(SQLError, match="no writing action"):
        referencing_change(FK, "RESTRICT", ROW, None)


def test_a_changefeed_on_the_child_emits_the_cascaded_changes(db: DB) -> None:
    db.sql("CREATE TABLE parent (id INT PRIMARY KEY)")
    db.sql(
        "CREATE TABLE child (k INT PRIMARY KEY, pid INT REFERENCES parent "
        "ON DELETE CASCADE ON UPDATE CASCADE)"
    )
    db.sql("INSERT INTO parent VALUES (1), (2)")
    db.sql("INSERT INTO child VALUES (10, 1), (11, 1), (20, 2)")
    cursor = db.sql("SELECT cluster_logical_timestamp()").rows[0][0]
    db.sql("UPDATE parent SET id = 3 WHERE id = 2")
    db.sql("DELETE FROM parent WHERE id = 1")
    result = db.sql(
        f"EXPERIMENTAL CHANGEFEED FOR child WITH cursor='{cursor}', resolved='0s', "
        "min_checkpoint_frequency='0s'"
    )
    assert isinstance(result, FeedResult)
    emitted = []
    while len(emitted) < 3:
        row = result.poll(30)
        assert row is not None, f"the changefeed ended after {emitted}"
        topic, key, value = row
        if topic is not None:
            emitted.append((json.loads(key), json.loads(value)["after"]))
    result.close()
    assert sorted(emitted, key=lambda e: e[0]) == [
        ([10], None),
        ([11], None),
        ([20], {"k": 20, "pid": 3}),
    ]
