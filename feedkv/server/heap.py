"""A node process's heap and Python's cyclic garbage collector.

A node that is up holds some 90k objects the collector tracks (modules, functions,
descriptors, the catalog, caches), and they live as long as the process. Statements
in flight keep surviving the young collections, so every few seconds enough of them
reach the oldest generation to set off a full collection, which walks all 90k while
holding the GIL. Measured under pgbench (kv0, 32 clients, a 2-core machine at load
10-20): a full collection every 3-4 s, each ~42 ms of CPU (7 us a statement), and
40-370 ms of wall time, since the OS deschedules the collecting thread on a loaded
machine while it holds the GIL: every statement of the node stood still meanwhile,
up to 9% of the run.

:func:`freeze_startup_heap` moves what the process holds once it is up into the
collector's permanent generation (CPython's ``gc.freeze``): full collections then walk
only what came after, under 1 ms each in the same runs. Objects of the startup heap are
never collected as cycles afterwards; they are the process's own for its lifetime, and
reference counting still frees any of them that is dropped outside a cycle.

Only ``feedkv start`` calls it: an embedded node lives in a program whose heap is the
program's (as with logging, :mod:`feedkv.server.logs`).
"""

from __future__ import annotations

import gc

__all__ = ["freeze_startup_heap"]


def freeze_startup_heap() -> int:
    """Collect the garbage startup left, then freeze every object still tracked, so the
    collector's full collections no longer walk them; returns how many were frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
