"""Tests for feedkv.rangefeed.registry: finding registrations by key and by span.

Registrations are compared by identity (two with the same span are different
registrations). The property test runs random adds and removes against a plain list and
asks both the same questions for every key of a small universe.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from itertools import product

from hypothesis import given, settings
from hypothesis import strategies as st

from feedkv.rangefeed.registry import Registry
from feedkv.util.keys import KEY_MAX, KEY_MIN, Span


@dataclass(eq=False)
class Reg:
    span: Span
    name: str = ""


def ids(regs: Iterable[Reg]) -> list[int]:
    """Registrations as a sorted list of identities: order-free, duplicates kept."""
    return sorted(id(r) for r in regs)


def names(regs: Iterable[Reg]) -> set[str]:
    return {r.name for r in regs}


def registry_of(*regs: Reg) -> Registry[Reg]:
    registry: Registry[Reg] = Registry()
    for reg in regs:
        registry.add(reg)
    return registry


# --- covering -------------------------------------------------------------------------


def test_covers_all_between_two_keys_one_registration_covers_without_a_bound() -> None:
    registry = registry_of(Reg(Span(b"b", b"m"), "bm"), Reg(Span(b"f", b"q"), "fq"))
    assert registry.covers_all(b"b", b"e\xff")
    assert registry.covers_all(b"g", b"l")
    assert not registry.covers_all(b"c", b"g")  # NB: both covered, not by the same ones
    assert not registry.covers_all(b"a", b"c")  # "a" is covered by none
    assert not registry.covers_all(b"r", b"s")


def test_an_empty_registry_finds_nothing() -> None:
    registry: Registry[Reg] = Registry()
    assert len(registry) == 0
    assert registry.covering(b"a") == ()
    assert registry.covering(KEY_MIN) == ()
    assert registry.overlapping(Span(KEY_MIN, KEY_MAX)) == []
    assert list(registry) == []


def test_covering_includes_the_start_and_excludes_the_end() -> None:
    registry = registry_of(Reg(Span(b"b", b"d"), "bd"))
    assert names(registry.covering(b"a")) == set()
    assert names(registry.covering(b"b")) == {"bd"}
    assert names(registry.covering(b"c\xff")) == {"bd"}
    assert names(registry.covering(b"d")) == set()
    assert names(registry.covering(b"e")) == set()


def test_covering_finds_every_registration_containing_the_key() -> None:
    registry = registry_of(
        Reg(Span(b"a", b"m"), "am"),
        Reg(Span(b"f", b"z"), "fz"),
        Reg(Span(b"g", b"h"), "gh"),
    )
    assert names(registry.covering(b"b")) == {"am"}
    assert names(registry.covering(b"f")) == {"am", "fz"}
    assert names(registry.covering(b"g\x00")) == {"am", "fz", "gh"}
    assert names(registry.covering(b"h")) == {"am", "fz"}
    assert names(registry.covering(b"m")) == {"fz"}
    assert names(registry.covering(b"z")) == set()


def test_registrations_with_the_same_span_are_told_apart() -> None:
    first, second = Reg(Span(b"a", b"c"), "1"), Reg(Span(b"a", b"c"), "2")
    registry = registry_of(first, second)
    assert ids(registry.covering(b"b")) == ids([first, second])
    registry.remove(first)
    assert ids(registry.covering(b"b")) == ids([second])
    assert len(registry) == 1


def test_the_whole_keyspace_is_covered_from_key_min() -> None:
    everything = Reg(Span(KEY_MIN, KEY_MAX), "all")
    registry = registry_of(everything)
    assert names(registry.covering(KEY_MIN)) == {"all"}
    assert names(registry.covering(b"\x00")) == {"all"}
    assert names(registry.covering(b"\xff\xfe\xff")) == {"all"}
    assert names(registry.covering(KEY_MAX)) == set()


# --- overlapping ----------------------------------------------------------------------


def test_overlapping_finds_partial_overlaps_but_not_touching_spans() -> None:
    registry = registry_of(
        Reg(Span(b"a", b"c"), "ac"),
        Reg(Span(b"c", b"e"), "ce"),
        Reg(Span(b"d", b"z"), "dz"),
    )
    assert names(registry.overlapping(Span(b"b", b"c"))) == {"ac"}
    assert names(registry.overlapping(Span(b"b", b"c\x00"))) == {"ac", "ce"}
    assert names(registry.overlapping(Span(b"e", b"f"))) == {"dz"}
    assert names(registry.overlapping(Span(KEY_MIN, b"a"))) == set()
    assert names(registry.overlapping(Span(KEY_MIN, KEY_MAX))) == {"ac", "ce", "dz"}


# --- removal --------------------------------------------------------------------------


def test_a_removed_registration_is_found_nowhere() -> None:
    keep, gone = Reg(Span(b"a", b"z"), "keep"), Reg(Span(b"c", b"e"), "gone")
    registry = registry_of(keep, gone)
    registry.remove(gone)
    assert names(registry.covering(b"d")) == {"keep"}
    assert names(registry.overlapping(Span(b"c", b"e"))) == {"keep"}
    assert list(registry) == [keep]


def test_removing_twice_is_a_no_op() -> None:
    a, b = Reg(Span(b"a", b"c"), "a"), Reg(Span(b"b", b"d"), "b")
    registry = registry_of(a, b)
    registry.remove(a)
    registry.remove(a)
    assert len(registry) == 1
    assert names(registry.covering(b"b")) == {"b"}
    assert names(registry.covering(b"a")) == set()


def test_removing_an_unknown_registration_is_a_no_op() -> None:
    a = Reg(Span(b"a", b"c"), "a")
    registry = registry_of(a)
    registry.remove(Reg(Span(b"a", b"c"), "stranger"))
    assert len(registry) == 1
    assert names(registry.covering(b"b")) == {"a"}


def test_iterating_while_removing_sees_a_snapshot() -> None:
    regs = [Reg(Span(bytes([c]), bytes([c + 1])), chr(c)) for c in b"abcd"]
    registry = registry_of(*regs)
    for reg in registry:
        registry.remove(reg)
    assert len(registry) == 0
    assert all(registry.covering(bytes([c])) == () for c in b"abcd")


def test_boundaries_are_reused_after_a_removal() -> None:
    registry = registry_of(Reg(Span(b"b", b"d")))
    bounds = len(registry._bounds)  # NB: private; the promise is about its growth
    first = next(iter(registry))
    registry.remove(first)
    again = Reg(Span(b"b", b"d"), "again")
    registry.add(again)
    assert len(registry._bounds) == bounds
    assert names(registry.covering(b"c")) == {"again"}
    registry.add(Reg(Span(b"c", b"d"), "inner"))
    assert len(registry._bounds) == bounds + 1  # only the new start is a new boundary


# --- against a model ------------------------------------------------------------------

ALPHABET = b"ab\xff"
UNIVERSE: list[bytes] = sorted(
    bytes(combo) for n in range(3) for combo in product(ALPHABET, repeat=n)
)
# Query keys between and around universe keys, where an off-by-one in a bisect would show.
QUERY_KEYS: list[bytes] = sorted({k for u in UNIVERSE for k in (u, u + b"\x00")})


@st.composite
def spans(draw: st.DrawFn) -> Span:
    pair = draw(st.lists(st.sampled_from(UNIVERSE), min_size=2, max_size=2, unique=True))
    start, end = sorted(pair)
    return Span(start, end)


# ("add", span) or ("remove", index into every registration made so far).
actions = st.one_of(
    st.tuples(st.just("add"), spans()),
    st.tuples(st.just("remove"), st.integers(min_value=0, max_value=30)),
)


@settings(max_examples=300, deadline=None)
@given(script=st.lists(actions, max_size=30), probes=st.lists(spans(), min_size=1, max_size=5))
def test_registry_matches_a_brute_force_list(
    script: list[tuple[str, Span | int]], probes: list[Span]
) -> None:
    registry: Registry[Reg] = Registry()
    made: list[Reg] = []
    live: list[Reg] = []
    for kind, arg in script:
        if kind == "add":
            assert isinstance(arg, Span)
            reg = Reg(arg, str(len(made)))
            made.append(reg)
            live.append(reg)
            registry.add(reg)
        elif made:
            assert isinstance(arg, int)
            reg = made[arg % len(made)]  # may already be gone: removing again is a no-op
            registry.remove(reg)
            live = [r for r in live if r is not reg]
        assert len(registry) == len(live)
        assert ids(registry) == ids(live)
        for key in QUERY_KEYS:
            expected = [r for r in live if r.span.contains_key(key)]
            assert ids(registry.covering(key)) == ids(expected), key
        for probe in probes:
            expected = [r for r in live if r.span.overlaps(probe)]
            assert ids(registry.overlapping(probe)) == ids(expected), probe
        for low, high in product(QUERY_KEYS, QUERY_KEYS):
            if low <= high and registry.covers_all(low, high):
                between = [k for k in QUERY_KEYS if low <= k <= high]
                assert all(
                    ids(registry.covering(k)) == ids(registry.covering(low)) for k in between
                )
                assert registry.covering(low), (low, high)
