"""The pure part of :mod:`feedkv.testing.partition`: which links a cut cuts."""

from __future__ import annotations

from feedkv.testing.partition import Links


def test_links_cut_one_way_isolate_partition_and_heal() -> None:
    links = Links(3)
    links.cut(0, 1)
    assert not links.passes(0, 1) and links.passes(1, 0) and links.passes(0, None)
    links.heal()
    links.isolate(2)
    assert {(a, b) for a in range(3) for b in range(3) if a != b and not links.passes(a, b)} == {
        (0, 2),
        (2, 0),
        (1, 2),
        (2, 1),
    }
    links.heal()
    links.partition([0, 1])
    assert links.cuts == {(0, 2), (2, 0), (1, 2), (2, 1)}
    links.heal()
    assert not links.cuts
