"""A table named ``excluded`` cannot take ON CONFLICT DO UPDATE: ``excluded.b`` could be
its row or the proposed one, and CockroachDB refuses the ambiguity (42P09) rather than
picking one. DO NOTHING and UPSERT name no ``excluded`` and work."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError


def test_do_update_on_a_table_named_excluded_is_ambiguous(db: DB) -> None:
    db.sql("CREATE TABLE excluded (a INT PRIMARY KEY, b INT)")
    db.sql("INSERT INTO excluded VALUES (1, 1)")
    with pytest.raises(SQLError, match='ambiguous source name: "excluded"') as raised:
        db.sql("INSERT INTO excluded VALUES (1, 5) ON CONFLICT (a) DO UPDATE SET b = excluded.b")
    assert raised.value.code == "42P09"
    db.sql("INSERT INTO excluded VALUES (1, 6) ON CONFLICT (a) DO NOTHING")
    db.sql("UPSERT INTO excluded VALUES (2, 7)")
    assert db.sql("SELECT * FROM excluded ORDER BY a").rows == [(1, 1), (2, 7)]
