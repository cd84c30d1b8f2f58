"""``default_transaction_quality_of_service``, CockroachDB's admission priority of a
session's work: background, regular (its default) or critical, set for the session or
(SET LOCAL) for one transaction; any other value is refused (22023)."""

from __future__ import annotations

import pytest

from feedkv import DB
from feedkv.errors import SQLError

SHOW = "SHOW default_transaction_quality_of_service"


def test_the_level_is_regular_until_set_and_set_local_lasts_one_transaction(db: DB) -> None:
    s = db.session()
    assert s.execute(SHOW).rows == [("regular",)]
    for level in ("critical", "background", "regular"):
        s.execute(f"SET default_transaction_quality_of_service = {level}")
        assert s.execute(SHOW).rows == [(level,)]
    s.execute("BEGIN")
    s.execute("SET LOCAL default_transaction_quality_of_service = background")
    assert s.execute(SHOW).rows == [("background",)]
    s.execute("COMMIT")
    assert s.execute(SHOW).rows == [("regular",)]


@pytest.mark.parametrize("value", ["ttl_low", "'urgent'", "1"])
def test_another_level_is_refused(db: DB, value: str) -> None:
    s = db.session()
    with pytest.raises(SQLError, match="invalid value for parameter") as raised:
        s.execute(f"SET default_transaction_quality_of_service = {value}")
    assert raised.value.code == "22023"
    assert s.execute(SHOW).rows == [("regular",)]
