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
    clock). A job's record changes about once a second while the watch reads it more
    often, so rates and the ETA are taken between the first and the latest *change*."""

    def __init__(self, started: float) -> None:
        self._started = started
        self._fractions: list[tuple[float, float]] = []  # (time, fraction): first, latest
        self._rows: list[tuple[float, float]] = []  # (time, rows): first, latest change

    def line(self, scan: JobScan, now: float) -> str:
        """The bar for ``scan`` read at ``now``."""
        # NB: a scan that was seen running and shows none now has scanned every range
        # (its rows are being flushed before it says it is done)
        seen = 1.0 if self._fractions else 0.0
        fraction = scan.fraction if scan.fraction is not None else seen
        if scan.fraction is not None:
            _note(self._fractions, now, fraction)
        if scan.rows is not None:
            _note(self._rows, now, scan.rows)
        filled = round(fraction * WIDTH)
        parts = [f"initial scan [{'#' * filled}{'-' * (WIDTH - filled)}] {fraction:4.0%}"]
        if scan.rows is not None:
            parts.append(f"{scan.rows:,} rows")
            if len(self._rows) == 2:
                (t0, r0), (t1, r1) = self._rows
                parts.append(f"{(r1 - r0) / (t1 - t0):,.0f} rows/s")
        parts.append(f"ETA {self._eta(now)}")
        return "  ".join(parts)

    def _eta(self, now: float) -> str:
        if len(self._fractions) < 2:
            return "-"
        (t0, f0), (t1, f1) = self._fractions
        left = max(0.0, (1.0 - f1) * (t1 - t0) / (f1 - f0) - (now - t1))
        return f"{left:.0f} s" if left < 120 else f"{left / 60:.0f} min"

    def done(self, scan: JobScan, now: float) -> str:
        """The last line, once the watch ends."""
        took = f"{now - self._started:.1f} s"
        if not scan.done:
            return f"initial scan: the job is {scan.status}; SHOW CHANGEFEED JOB for more"
        rows = f"{scan.rows:,} rows in " if scan.rows is not None else ""
        return f"initial scan done: {rows}{took}"


def _note(seen: list[tuple[float, float]], now: float, value: float) -> None:
    """Keep the first observation and the latest that changed the value (it grows)."""
    if not seen:
        seen.append((now, value))
    elif value > seen[-1][1]:
        if len(seen) == 2:
            seen.pop()
        seen.append((now, value))


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
