"""``feedkv sql``'s progress bar for a changefeed's initial scan
(:mod:`feedkv.cli.scan_progress`): the pure bar, the watch over scripted reads, and the
shell against a real ``feedkv start`` process running the job on its thread runner."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest

import feedkv
from feedkv.cli.scan_progress import JobScan, ScanBar, watch_scan
from feedkv.cli.sql import run_sql
from feedkv.testing.node_process import NodeProcess

ROWS = 3000


def test_the_bar_shows_the_part_done_rows_rate_and_eta() -> None:
    bar = ScanBar(started=0.0)
    first = bar.line(JobScan("running", False, 0.25, 1000), now=1.0)
    assert first.startswith("initial scan [#####---------------]  25%")
    assert "1,000 rows" in first and "rows/s" not in first and first.endswith("ETA -")
    later = bar.line(JobScan("running", False, 0.5, 3000), now=2.0)
    assert "[##########----------]  50%" in later
    assert "3,000 rows  2,000 rows/s  ETA 2 s" in later  # half left at a quarter a second
    flushing = bar.line(JobScan("running", False, None, 4000), now=3.0)
    assert "[####################] 100%" in flushing  # scanned, not yet said done
    unknown = ScanBar(0.0).line(JobScan("running", False, None, None), now=1.0)
    assert unknown.startswith("initial scan [--------------------]   0%") and "rows" not in unknown


def test_the_last_line_says_how_the_watch_ended() -> None:
    bar = ScanBar(started=10.0)
    assert bar.done(JobScan("running", True, None, 4200), 12.5) == (
        "initial scan done: 4,200 rows in 2.5 s"
    )
    assert bar.done(JobScan("running", True, None, None), 12.5) == "initial scan done: 2.5 s"
    assert "the job is failed" in bar.done(JobScan("failed", False, None, 10), 12.5)


def test_the_watch_redraws_until_the_high_water_mark_is_set() -> None:
    reads = iter(
        [
            JobScan("running", False, None, None),
            JobScan("running", False, 0.5, 50),
            JobScan("running", True, None, 100),
        ]
    )
    now = [0.0]

    def tick(seconds: float) -> None:
        now[0] += seconds

    out = io.StringIO()
    watch_scan(lambda: next(reads), out, clock=lambda: now[0], sleep=tick)
    lines = out.getvalue().split("\r")
    assert lines[1].startswith("initial scan [") and "50%" in lines[2]
    assert lines[-1].startswith("initial scan done: 100 rows in 0.5 s")
    assert out.getvalue().endswith("\n")


@pytest.fixture
def node(tmp_path: Path) -> Iterator[NodeProcess]:
    started = NodeProcess(tmp_path / "store", "--changefeed-runner", "thread")
    yield started
    if started.process.poll() is None:
        started.terminate()


def test_feedkv_sql_follows_a_new_jobs_initial_scan_to_its_end(
    node: NodeProcess, tmp_path: Path
) -> None:
    with feedkv.connect(node.url) as db:
        db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
        db.sql("ALTER TABLE t SPLIT AT VALUES (1000), (2000)")
        for start in range(0, ROWS, 500):
            db.sql(
                "INSERT INTO t VALUES "
                + ", ".join(f"({k}, 'v')" for k in range(start, start + 500))
            )
    stdout, stderr = io.StringIO(), io.StringIO()
    code = run_sql(
        node.url,
        [f"CREATE CHANGEFEED FOR t INTO 'file://{tmp_path}/out'"],
        stdout=stdout,
        stderr=stderr,
        progress=True,
    )
    assert code == 0, stderr.getvalue()
    assert "job_id" in stdout.getvalue()
    last = stderr.getvalue().split("\r")[-1]
    assert last.startswith(f"initial scan done: {ROWS:,} rows in "), stderr.getvalue()
    # without a terminal (and not asked), no bar
    quiet = io.StringIO()
    assert run_sql(node.url, ["CREATE CHANGEFEED FOR t INTO 'null://'"], stderr=quiet) == 0
    assert quiet.getvalue() == ""
