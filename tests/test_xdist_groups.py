"""``make test``'s workers keep the groups tests/conftest.py marks: the tests on the
shared Spark session run on one worker (one JVM), and the isolated tests still start
first, each in a worker of its own. Nothing in pytest-xdist checks either (under pytest
9.2 xdist 3.8 silently dropped every group, pytest-dev/pytest-xdist#1386).

A real pytest run with two xdist workers, distributing as ``make test`` does, over tests
in two files that use a ``spark`` fixture, under a copy of the suite's
tests/conftest.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = """
import os

import pytest


def ran(kind: str) -> None:
    with open(os.environ["WORKERS_FILE"], "a") as out:
        out.write(f"{kind} {os.environ['PYTEST_XDIST_WORKER']}\\n")


@pytest.mark.parametrize("i", range(4))
def test_on_spark(spark: str, i: int) -> None:
    ran("spark")
    assert spark == "session"


@pytest.mark.parametrize("i", range(4))
def test_elsewhere(i: int) -> None:
    ran("other")


@pytest.mark.isolated
def test_alone() -> None:
    ran("isolated")
"""

SPARK_FIXTURE = """

@pytest.fixture(scope="session")
def spark() -> str:
    return "session"
"""


@pytest.mark.slow(20)  # two workers start, each importing the suite's plugins
def test_spark_tests_share_a_worker_and_isolated_ones_start_first(tmp_path: Path) -> None:
    conftest = (Path(__file__).parent / "conftest.py").read_text()
    (tmp_path / "conftest.py").write_text(conftest + SPARK_FIXTURE)
    for name in ("test_first.py", "test_second.py"):
        (tmp_path / name).write_text(TESTS)
    workers = tmp_path / "workers.txt"
    # NB: none of this run's own (its worker's name, PYTEST_ADDOPTS)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    args = ["-q", "-n", "2", "--dist", "loadgroup", "--no-loadscope-reorder"]
    args += ["-p", "no:cacheprovider"]
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
    assert len(ran) == 18, ran
    on_spark = {worker for kind, worker in ran if kind == "spark"}
    assert len(on_spark) == 1, f"the Spark tests ran on {sorted(on_spark)}: {ran}"
    firsts: dict[str, str] = {}
    for kind, worker in ran:
        firsts.setdefault(worker, kind)
    assert sorted(firsts.values()) == ["isolated", "isolated"], ran
