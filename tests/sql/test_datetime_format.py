"""feedkv.sql.datetime_format: to_char's template patterns."""

from __future__ import annotations

import datetime

import pytest

from feedkv.sql.datetime_format import to_char

MOMENT = datetime.datetime(2024, 12, 30, 0, 5, 9, 7000)  # a Monday of ISO week 2025-W01


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("HH12 HH24 AM", "12 00 AM"),
        ("IYYY-IW ID D", "2025-01 1 2"),
        ("FMMonth FMDD, YYYY", "December 30, 2024"),
        ("Month|", "December |"),
        ("MS US SSSS", "007 007000 309"),
        ('"DD" \\D DD', "DD D 30"),
        ("Q WW DDD", "4 53 365"),
    ],
)
def test_patterns(template: str, expected: str) -> None:
    assert to_char(MOMENT, template) == expected


def test_a_date_is_its_midnight_and_other_values_are_refused() -> None:
    assert to_char(datetime.date(2024, 1, 2), "YYYY-MM-DD HH24") == "2024-01-02 00"
    with pytest.raises(TypeError):
        to_char(1.5, "999")
