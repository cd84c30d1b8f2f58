"""The external I/O boundary: paths resolve inside the directory or are refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

import feedkv
from feedkv.errors import InvalidArgumentError, SQLError
from feedkv.security.external_io import confine, nodelocal_parts, nodelocal_to_file
from feedkv.testing.waiting import wait_until


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


# nodelocal://, as CockroachDB names a node's external I/O directory


def test_nodelocal_names_a_node_and_a_path_below_its_directory(tmp_path: Path) -> None:
    root = tmp_path / "extern"
    here = (root / "cdc" / "out").resolve()
    assert nodelocal_parts("nodelocal://2/cdc/out?file_size=1MB") == (2, "cdc/out")
    assert nodelocal_parts("nodelocal://self/cdc/out") == (None, "cdc/out")
    assert nodelocal_to_file("nodelocal://1/cdc/out?file_size=1MB", root) == (
        f"file://{here}?file_size=1MB"
    )
    assert nodelocal_to_file("nodelocal://self/cdc/out", root) == f"file://{here}"
    for uri, why in (
        ("nodelocal://self/../../etc", "outside the node's external I/O"),
        ("nodelocal://self/", "needs a directory"),
        ("nodelocal://somewhere/x", "names a node"),
        ("nodelocal://\u0661/x", "names a node"),  # a digit, but not an ASCII one
    ):
        with pytest.raises(InvalidArgumentError, match=why):
            nodelocal_to_file(uri, root)


def test_a_nodelocal_changefeed_writes_below_the_directory_and_keeps_its_uri(
    tmp_path: Path,
) -> None:
    extern = tmp_path / "store" / "extern"
    with feedkv.connect(
        tmp_path / "store", changefeed_runner="thread", external_io_dir=extern
    ) as db:
        db.sql("CREATE TABLE t (id INT PRIMARY KEY)")
        db.sql("INSERT INTO t VALUES (1), (2)")
        [(job_id,)] = db.sql(
            "CREATE CHANGEFEED FOR TABLE t INTO 'nodelocal://self/cdc' WITH resolved = '100ms', "
            "min_checkpoint_frequency = '100ms'"
        ).rows
        wait_until(
            lambda: any(
                f.suffix != ".RESOLVED" and "RESOLVED" not in f.name
                for f in (extern / "cdc").rglob("*.ndjson")
            ),
            timeout_s=60,
            what="the changefeed's files below the external I/O directory",
        )
        rows = db.sql(f"SELECT sink_uri FROM [SHOW CHANGEFEED JOB {job_id}]").rows
        assert rows == [("nodelocal://self/cdc",)]
        with pytest.raises(SQLError, match="outside the node's external I/O"):
            db.sql("CREATE CHANGEFEED FOR TABLE t INTO 'nodelocal://self/../escape'")
        with pytest.raises(SQLError, match="there is no node n7"):
            db.sql("CREATE CHANGEFEED FOR TABLE t INTO 'nodelocal://7/cdc2'")
        db.sql(f"CANCEL JOB {job_id}")
    assert not (tmp_path / "store" / "escape").exists()
