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

:func:`raise_young_threshold`, which every node calls as it starts, embedded or not,
raises the collector's threshold for its young generation from CPython's 700 to
:data:`YOUNG_THRESHOLD` tracked allocations. A node with live rangefeeds keeps well over
700 young tracked objects alive at any moment (each writer's request in flight, the
values in a processor's log and in its consumers' batches, what a feed keeps until a
checkpoint), so with the default the count of young objects never falls far below the
threshold: the collector ran every ~110 commits and moved that whole live set into the
older generations each time, which set off a full collection of the process's heap every
10-20k commits. Measured in one process (32 embedded writers, 1 and 100 feeds, load 11-17
on 2 cores, gc.callbacks): the collector's CPU per commit went from 5-7 us (of ~85) to
0.1-0.3 us, young collections from 8-12 to 0.15-0.26 per 1,000 commits, and full ones from
0.05-0.11 to none in 6 s runs; at 2,000 it was 0.4-1.2 us. A young collection now walks up
to 5,000 objects (about a millisecond here) where it walked 700, and cyclic garbage waits
that much longer. Only raised: a program that set a higher threshold, or turned the
collector off (0), keeps its own, and may set its own after opening a node.
"""

from __future__ import annotations

import gc

__all__ = ["YOUNG_THRESHOLD", "freeze_startup_heap", "raise_young_threshold"]

YOUNG_THRESHOLD = 5000  # tracked allocations between young collections (CPython: 700)


def freeze_startup_heap() -> int:
    """Collect the garbage startup left, then freeze every object still tracked, so the
    collector's full collections no longer walk them; returns how many were frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def raise_young_threshold() -> None:
    """Raise the collector's young-generation threshold to :data:`YOUNG_THRESHOLD`,
    keeping a higher one or 0 (collection off), and the older generations' thresholds."""
    young, *older = gc.get_threshold()
    if 0 < young < YOUNG_THRESHOLD:
        gc.set_threshold(YOUNG_THRESHOLD, *older)
