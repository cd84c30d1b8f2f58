"""The wait-for graph: one victim per cycle of waits, none in a chain."""

from __future__ import annotations

from feedkv.kv.wait_for import WaitForGraph, is_victim

A, B, C = b"a" * 16, b"b" * 16, b"c" * 16


def test_wait_for_graph_names_one_victim_per_cycle() -> None:
    graph = WaitForGraph()
    graph.waits(A, 5, B)
    assert not graph.is_victim(A)  # a chain, not a cycle
    graph.waits(B, 3, C)
    graph.waits(C, 9, A)
    assert [graph.is_victim(t) for t in (A, B, C)] == [False, True, False]
    graph.done(B)
    assert not any(graph.is_victim(t) for t in (A, B, C))


def test_wait_for_graph_breaks_priority_ties_by_id() -> None:
    graph = WaitForGraph()
    graph.waits(A, 1, B)
    graph.waits(B, 1, A)
    assert graph.is_victim(A) and not graph.is_victim(B)


def test_a_waiter_led_into_a_cycle_it_is_not_in_is_no_victim() -> None:
    graph = WaitForGraph()
    graph.waits(A, 0, B)
    graph.waits(B, 5, C)
    graph.waits(C, 5, B)
    assert not graph.is_victim(A)
    assert graph.is_victim(B) != graph.is_victim(C)


def test_is_victim_reads_edges_from_any_source() -> None:
    edges = {A: (B, 2), B: (C, 2), C: (A, 1)}
    assert [is_victim(edges, t) for t in (A, B, C)] == [False, False, True]
    assert not is_victim({A: (B, 0)}, A)
