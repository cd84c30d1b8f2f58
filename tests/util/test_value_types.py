"""Tests for feedkv.util.value_types: a value type compares, hashes and reads as a
frozen dataclass does, keeps no per-instance dict, and mypy holds its fields read-only."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import field, replace
from pathlib import Path

from feedkv.kv.api import BatchRequest, ConditionalPut, Header
from feedkv.util.value_types import value_type


@value_type
class _Pair:
    left: int
    right: tuple[int, ...] = field(default_factory=tuple)


def test_value_types_compare_and_hash_by_their_fields() -> None:
    assert _Pair(1, (2,)) == _Pair(1, (2,))
    assert _Pair(1) != _Pair(2)
    assert len({_Pair(1, (2,)), _Pair(1, (2,)), _Pair(3)}) == 2
    assert replace(_Pair(1, (2,)), left=5) == _Pair(5, (2,))
    assert _Pair(1).right == ()


def test_value_types_keep_no_instance_dict() -> None:
    for value in (_Pair(1), Header(1, 2), BatchRequest(Header()), ConditionalPut(b"k", b"v", None)):
        assert not hasattr(value, "__dict__"), type(value)


def test_requests_made_alike_are_one_key() -> None:
    requests = {ConditionalPut(b"k", b"v", None): 1}
    assert requests[ConditionalPut(b"k", b"v", None)] == 1
    assert hash(BatchRequest(Header(1, 2), (ConditionalPut(b"k", b"v", None),))) == hash(
        BatchRequest(Header(1, 2), (ConditionalPut(b"k", b"v", None),))
    )


def test_mypy_refuses_to_assign_a_value_types_field(tmp_path: Path) -> None:
    source = tmp_path / "assigns.py"
    source.write_text(
        "from feedkv.util.value_types import value_type\n"
        "@value_type\n"
        "class Point:\n"
        "    x: int\n"
        "def move(p: Point) -> None:\n"
        "    p.x = 1\n"
    )
    root = Path(__file__).resolve().parents[2]
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(source)],
        capture_output=True,
        text=True,
        cwd=root,
        env={"PYTHONPATH": str(root), "MYPYPATH": str(root), "PATH": ""},
    )
    assert 'assigns.py:6: error: Property "x" defined in "Point" is read-only' in checked.stdout
