"""The external I/O boundary: paths resolve inside the directory or are refused."""

from __future__ import annotations

from pathlib import Path

import pytest

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
