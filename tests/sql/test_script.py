"""A script cut into statements without parsing them."""

from __future__ import annotations

import pytest

from feedkv.sql.script import split_script, split_statements


@pytest.mark.parametrize(
    ("script", "statements"),
    [
        ("SELECT 1;\nSELEC 2;\n", [(0, "SELECT 1"), (10, "SELEC 2")]),
        ("SELECT 'a;b'; SELECT \"c;d\"", [(0, "SELECT 'a;b'"), (14, 'SELECT "c;d"')]),
        ("-- one; two\nSELECT 1", [(12, "SELECT 1")]),
        ("/* a; /* nested; */ b; */ SELECT 1;", [(26, "SELECT 1")]),
        ("SELECT $x$;$x$; SELECT e'\\';'", [(0, "SELECT $x$;$x$"), (16, "SELECT e'\\';'")]),
        ("SELECT 'never closed; SELECT 2", [(0, "SELECT 'never closed; SELECT 2")]),
        (" ;; -- nothing\n ; /* at all */", []),
    ],
)
def test_a_script_splits_at_semicolons_outside_quotes_and_comments(
    script: str, statements: list[tuple[int, str]]
) -> None:
    assert split_statements(script) == statements
    for offset, text in statements:
        assert script[offset:].startswith(text)


def test_a_backslash_command_takes_the_rest_of_its_line() -> None:
    script = "CREATE TABLE u (k INT);\n\\d u; DROP TABLE u\nSELECT ';'; \\dt\n\\q"
    assert split_script(script) == [
        (0, "CREATE TABLE u (k INT)"),
        (24, "\\d u; DROP TABLE u"),
        (43, "SELECT ';'"),
        (55, "\\dt"),
        (59, "\\q"),
    ]
