"""Ranges of SQL tables: size-driven splits never cut a row's column families apart."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import feedkv
from feedkv.kv.store import StoreConfig
from feedkv.sql.row_codec import family_key, row_split_key, table_span


def wait_until(predicate: Callable[[], bool], timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while not predicate():
        if time.monotonic() >= deadline:
            return predicate()
        pause.wait(0.02)
    return True


def test_automatic_splits_of_a_table_fall_on_row_boundaries(tmp_path: Path) -> None:
    config = StoreConfig(
        closed_ts_interval_s=0.01,
        sync=False,
        range_max_bytes=32 << 10,
        range_min_bytes=1,
        range_check_interval_s=0.05,
    )
    with feedkv.connect(tmp_path / "s", config=config) as db:
        db.sql(
            "CREATE TABLE wide (k INT PRIMARY KEY, a STRING, b STRING, c STRING, "
            "FAMILY fa (k, a), FAMILY fb (b), FAMILY fc (c))"
        )
        filler = "x" * 300
        for start in range(0, 300, 50):
            values = ", ".join(
                f"({k}, '{filler}', '{filler}', '{filler}')" for k in range(start, start + 50)
            )
            db.sql(f"INSERT INTO wide VALUES {values}")
        table_id = db.sql("SHOW RANGES FROM TABLE wide").rows[0][0].split("/")[2]
        span = table_span(int(table_id))
        inside = lambda: [r for r in db.ranges() if span.start < r.span.start < span.end]  # noqa: E731
        assert wait_until(lambda: len(inside()) >= 3)
        for info in inside():  # each range starts where a row starts, not inside one
            assert row_split_key(family_key(info.span.start, 0)) == info.span.start
        rows = db.sql("SELECT k, length(a), length(b), length(c) FROM wide").rows
        assert rows == [(k, 300, 300, 300) for k in range(300)]
