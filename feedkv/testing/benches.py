"""The benchmarks of ``bench/``, by name: files, not a package, which ``feedkv bench NAME``
runs and which borrow from each other (a PostgreSQL server, a workload, a runner)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["BENCH_DIR", "bench_module"]

BENCH_DIR = Path(__file__).resolve().parents[2] / "bench"


def bench_module(name: str) -> ModuleType:
    """``bench/<name>.py``, loaded as module ``feedkv_bench_<name>``."""
    spec = importlib.util.spec_from_file_location(f"feedkv_bench_{name}", BENCH_DIR / f"{name}.py")
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load bench/{name}.py")
    module = importlib.util.module_from_spec(spec)
    # NB: registered before it runs, as an import would: dataclasses look their module
    # up in sys.modules.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
