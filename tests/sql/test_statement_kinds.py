"""feedkv.sql.statement_kinds: a statement kind answers as isinstance does, per class."""

from __future__ import annotations

from dataclasses import dataclass, fields

from feedkv.sql import statements as st
from feedkv.sql.parser import parse
from feedkv.sql.statement_kinds import StatementKind


def test_a_kind_answers_as_isinstance_for_every_statement() -> None:
    writes = StatementKind(st.Insert | st.Update | st.Delete | st.CreateTable)
    texts = [
        "INSERT INTO t VALUES (1)",
        "UPDATE t SET v = 1 WHERE k = 2",
        "DELETE FROM t WHERE k = 1",
        "CREATE TABLE t (k INT PRIMARY KEY)",
        "SELECT 1",
        "BEGIN",
        "SET application_name = 'x'",
    ]
    for text in texts:
        (statement,) = parse(text)
        for _ in range(2):  # the first answer is computed, the second remembered
            assert writes.holds(statement) is isinstance(statement, writes.classes), text


def test_a_subclass_of_a_kinds_class_is_of_the_kind() -> None:
    @dataclass(frozen=True, slots=True)
    class Special(st.Select):
        pass

    (select,) = parse("SELECT 1")
    assert isinstance(select, st.Select)
    kind = StatementKind(st.Select | st.Insert)
    special = Special(**{f.name: getattr(select, f.name) for f in fields(select)})
    assert kind.holds(special)
    assert not StatementKind(st.Insert).holds(special)


def test_a_kind_of_one_class() -> None:
    kind = StatementKind(st.Begin)
    (begin,) = parse("BEGIN")
    (commit,) = parse("COMMIT")
    assert kind.holds(begin)
    assert not kind.holds(commit)
