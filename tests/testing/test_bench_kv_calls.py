"""``bench/kv_calls.py``: Python calls a kv0 commit costs, by thread (issue 47)."""

from __future__ import annotations

from feedkv.testing.benches import bench_module


def test_an_embedded_put_is_counted_on_its_client_and_the_commit_thread() -> None:
    """The counts a regression hunt reads (no budget: the commit thread also runs the
    store's side work, as much of it as the run's length brings)."""
    row = bench_module("kv_calls").count("embedded", clients=1, puts=200, top=0, sync=False)
    threads = row["threads"]
    assert threads["kv0-client"] > 0 and threads["feedkv-commit"] > 0, row


def test_numbered_threads_of_a_pool_are_counted_together() -> None:
    family = bench_module("kv_calls")._family
    assert family("feedkv-rpc_3") == family("feedkv-rpc_0") == "feedkv-rpc"
    assert family("Thread-7 (_run)") == "(_run)"
    assert family("kv0-client-12") == "kv0-client"
    assert family("feedkv-commit") == "feedkv-commit"
