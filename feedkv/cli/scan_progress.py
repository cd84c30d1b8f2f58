"""``feedkv sql``'s progress bar for a changefeed job's initial scan: rows, rate, ETA.

After ``CREATE CHANGEFEED ... INTO`` in a terminal, the shell watches the new job while
its initial scan runs and draws one line on stderr, redrawn in place::

    initial scan [##########----------]  52%  104,000 rows  21,300 rows/s  ETA 4 s

The part done is the job's ``fraction_completed`` (counted in ranges, as CockroachDB
counts it), the rows are those its scan emitted so far (known for a job this node's
client can read the record of; a ``postgresql://`` shell shows the part done only), and
the ETA is what the rate of the part done since the watch began leaves. The watch ends,
with a last line, once the scan is done (the job's runner says so, or its high-water mark
is set), when the job stops running, or on Ctrl-C (the job goes on: ``SHOW CHANGEFEED
JOB <id>``).

:class:`ScanBar` is the pure part (observations in, lines out); :func:`watch_scan`
polls through the narrow ``read`` callable and writes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

__all__ = ["JobScan", "ScanBar", "watch_scan"]

WIDTH = 20  # characters of the bar
POLL_S = 0.25


@dataclass(frozen=True, slots=True)
class JobScan:
    """What the watch reads of a job: its status, whether its initial scan is done (its
    high-water mark is set, or its runner says so), the part of its scan done (``None``:
    none runs) and the rows its scans emitted (``None``: not known here)."""

    status: str
    done: bool
    fraction: float | None
    rows: int | None


class ScanBar:
    """The bar's state from the watch's start at ``started`` (seconds of a monotonic
    clock)."""

    def __init__(self, started: float) -> None:
        self._started = started
        self._first: tuple[float, float] | None = None  # (time, fraction) first seen
        self._rows0: tuple[float, int] | None = None  # (time, rows) first seen

    def line(self, scan: JobScan, now: float) -> str:
        """The bar for ``scan`` read at ``now``."""
        fraction = scan.fraction or 0.0
        if self._first is None and scan.fraction is not None:
            self._first = (now, fraction)
        if self._rows0 is None and scan.rows is not None:
            self._rows0 = (now, scan.rows)
        filled = round(fraction * WIDTH)
        parts = [f"initial scan [{'#' * filled}{'-' * (WIDTH - filled)}] {fraction:4.0%}"]
        if scan.rows is not None:
            parts.append(f"{scan.rows:,} rows")
            rate = self._rate(self._rows0, scan.rows, now)
            if rate is not None:
                parts.append(f"{rate:,.0f} rows/s")
        parts.append(f"ETA {_eta(self._first, fraction, now)}")
        return "  ".join(parts)

    def done(self, scan: JobScan, now: float) -> str:
        """The last line, once the watch ends."""
        took = f"{now - self._started:.1f} s"
        if not scan.done:
            return f"initial scan: the job is {scan.status}; SHOW CHANGEFEED JOB for more"
        rows = f"{scan.rows:,} rows in " if scan.rows is not None else ""
        return f"initial scan done: {rows}{took}"

    @staticmethod
    def _rate(first: tuple[float, int] | None, rows: int, now: float) -> float | None:
        if first is None or now <= first[0] or rows <= first[1]:
            return None
        return (rows - first[1]) / (now - first[0])


def _eta(first: tuple[float, float] | None, fraction: float, now: float) -> str:
    if first is None or now <= first[0] or fraction <= first[1]:
        return "-"
    left = (1.0 - fraction) * (now - first[0]) / (fraction - first[1])
    return f"{left:.0f} s" if left < 120 else f"{left / 60:.0f} min"


def watch_scan(
    read: Callable[[], JobScan | None],
    out: TextIO,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Draw the bar on ``out`` until the scan is done, the job stops running or the job
    is gone (``read()`` is ``None``), then the last line. Ctrl-C ends the watch only."""
    bar = ScanBar(clock())
    scan: JobScan | None = None
    shown = 0
    try:
        while True:
            scan = read()
            if scan is None or scan.done or scan.status != "running":
                break
            text = bar.line(scan, clock())
            out.write("\r" + text.ljust(shown))
            out.flush()
            shown = len(text)
            sleep(POLL_S)  # wait-ok: a progress display's refresh cadence
    except KeyboardInterrupt:
        out.write("\r" + "watch stopped; the job goes on".ljust(shown) + "\n")
        return
    if scan is None:
        out.write("\r" + "initial scan: the job is gone".ljust(shown) + "\n")
        return
    out.write("\r" + bar.done(scan, clock()).ljust(shown) + "\n")
    out.flush()
