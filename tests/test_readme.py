"""The README's Python examples run as written, one after the other (the storage, KV,
RangeFeed and SQL tour; the changefeed examples need sinks and are tested elsewhere)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
TOUR = 4  # the examples up to the SQL one


def test_the_readme_tour_runs_as_written(tmp_path: Path) -> None:
    blocks = re.findall(r"^```python\n(.*?)^```", README.read_text(), re.S | re.M)
    script = "\n".join(blocks[:TOUR]) + "\ndb.close()\n"
    run = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    lines = run.stdout.splitlines()
    assert lines[0] == "b'hello'"
    assert "b'100'" in lines
    assert any(line.startswith("Checkpoint(") for line in lines)
    assert lines[-1] == "[('ink', 1, Decimal('1')), ('pen', 1, Decimal('2'))]"
