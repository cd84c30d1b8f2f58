"""The coverage-guided fuzz targets of ``atheris_targets.py`` (atheris: libFuzzer for
Python) each run thousands of inputs in a process of their own: libFuzzer ends that
process non-zero, naming the input, on any uncaught exception (and on a change the SQL
target's reader may not make), so each run must end with all its inputs done."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TARGETS = Path(__file__).with_name("atheris_targets.py")
RUNS = {"sql": 3000, "options": 5000, "sink_uri": 5000, "batch_request": 5000, "pgwire": 5000}


@pytest.mark.parametrize("target", sorted(RUNS))
def test_each_fuzz_target_runs_its_inputs_without_a_crash(target: str, tmp_path: Path) -> None:
    runs = RUNS[target]
    root = str(Path(__file__).resolve().parents[2])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])),
    }
    done = subprocess.run(
        [sys.executable, str(TARGETS), target, f"-runs={runs}", "-seed=40", "-max_len=256"],
        capture_output=True,
        text=True,
        cwd=tmp_path,  # NB: a crash writes its input (crash-<sha1>) here
        env=env,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert f"Done {runs} runs" in done.stderr
    assert not list(tmp_path.glob("crash-*"))
