"""A node process that will not stop fails its test with every thread's stack, so a
hang in CI says where it hangs."""

from __future__ import annotations

from pathlib import Path

from feedkv.testing.node_process import NodeProcess


def test_a_running_node_prints_its_threads_stacks(tmp_path: Path) -> None:
    node = NodeProcess(tmp_path / "n1", "--insecure")
    try:
        stacks = node.stacks()
        assert "most recent call first" in stacks
        assert "feedkv/cli/start.py" in stacks  # the main thread, waiting for a signal
    finally:
        assert node.terminate() == 0
