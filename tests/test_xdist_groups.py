"""``make test``'s workers keep the groups tests/conftest.py marks: the tests on the
shared Spark session run on one worker (one JVM), which no pytest-xdist option checks
(under pytest 9.2 xdist 3.8 silently dropped every group, pytest-dev/pytest-xdist#1386).

A real pytest run with two xdist workers, ``--dist loadgroup`` as ``make test`` runs it,
over tests in two files that use a ``spark`` fixture, under a copy of the suite's
tests/conftest.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SPARK_TESTS = """
import os

import pytest


@pytest.mark.parametrize("i", range(4))
def test_on_spark(spark: str, i: int) -> None:
    with open(os.environ["WORKERS_FILE"], "a") as out:
        out.write(f"spark {os.environ['PYTEST_XDIST_WORKER']}\\n")
    assert spark == "session"


@pytest.mark.parametrize("i", range(4))
def test_elsewhere(i: int) -> None:
    with open(os.environ["WORKERS_FILE"], "a") as out:
        out.write(f"other {os.environ['PYTEST_XDIST_WORKER']}\\n")
"""

SPARK_FIXTURE = """

@pytest.fixture(scope="session")
def spark() -> str:
    return "session"
"""


@pytest.mark.slow(20)  # two workers start, each importing the suite's plugins
def test_the_tests_on_the_spark_session_run_on_one_worker(tmp_path: Path) -> None:
    conftest = (Path(__file__).parent / "conftest.py").read_text()
    (tmp_path / "conftest.py").write_text(conftest + SPARK_FIXTURE)
    for name in ("test_first.py", "test_second.py"):
        (tmp_path / name).write_text(SPARK_TESTS)
    workers = tmp_path / "workers.txt"
    # NB: none of this run's own (its worker's name, PYTEST_ADDOPTS)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    args = ["-q", "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *args, "--rootdir", str(tmp_path), str(tmp_path)],
        cwd=tmp_path,
        env={**env, "WORKERS_FILE": str(workers)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    ran = [line.split() for line in workers.read_text().splitlines()]
    assert len(ran) == 16, ran
    on_spark = {worker for kind, worker in ran if kind == "spark"}
    assert len(on_spark) == 1, f"the Spark tests ran on {sorted(on_spark)}: {ran}"
