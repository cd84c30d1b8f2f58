"""The external I/O boundary: paths resolve inside the directory or are refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from feedkv.errors import InvalidArgumentError
from feedkv.security.external_io import confine


def test_paths_inside_are_accepted(tmp_path: Path) -> None:
    root = tmp_path / "extern"
    assert confine(root / "feeds" / "a", root) == (root / "feeds" / "a").resolve()
    assert confine("feeds/b", root) == (root / "feeds" / "b").resolve()
    assert confine(root / "x" / ".." / "y", root) == (root / "y").resolve()


def test_paths_outside_are_refused(tmp_path: Path) -> None:
    root = tmp_path / "extern"
    root.mkdir()
    (root / "link").symlink_to(tmp_path)
    for path in (tmp_path / "elsewhere", root / ".." / "x", "../x", "/etc", root / "link" / "x"):
        with pytest.raises(InvalidArgumentError, match="outside the node's external I/O"):
            confine(path, root)
    assert not (tmp_path / "x").exists()


def test_a_prefix_of_the_root_name_is_not_inside(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="outside"):
        confine(tmp_path / "extern2" / "x", tmp_path / "extern")


@settings(max_examples=2000, deadline=None)
@given(
    parts=hs.lists(
        hs.sampled_from(["..", ".", "a", "link", "", "/", "b/../..", "x\0y", "é", "~"]),
        max_size=8,
    )
)
def test_no_path_resolves_outside_the_directory(
    tmp_path_factory: pytest.TempPathFactory, parts: list[str]
) -> None:
    base = _base(tmp_path_factory)
    root = base / "extern"
    path = "/".join(parts)
    try:
        resolved = confine(path, root)
    except InvalidArgumentError:
        return
    assert resolved == root.resolve() or resolved.is_relative_to(root.resolve())


_BASES: dict[int, Path] = {}


def _base(factory: pytest.TempPathFactory) -> Path:
    """One directory for every example: an extern dir holding a symlink out of it."""
    key = id(factory)
    if key not in _BASES:
        base = factory.mktemp("fuzz-io")
        (base / "extern" / "a").mkdir(parents=True)
        (base / "extern" / "link").symlink_to(base)
        _BASES[key] = base
    return _BASES[key]
