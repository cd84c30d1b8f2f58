"""The files a node keeps beside its store: its identity and the peers it knows."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from feedkv.server.cluster import ClusterIdent, load_ident, load_peers, start_ident
from feedkv.util.files import replace_durably


def test_a_replaced_file_holds_the_new_text_and_leaves_no_temporary_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "peers.json"
    replace_durably(path, '["a:1"]')
    replace_durably(path, '["b:2", "c:3"]')
    assert path.read_text() == '["b:2", "c:3"]'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["peers.json"]


def test_unreadable_peers_are_a_warning_and_none_known(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A torn or hand-edited peers.json does not keep the node from starting: --join
    still finds the cluster."""
    assert load_peers(tmp_path) == []  # a store that never ran
    (tmp_path / "peers.json").write_text('["127.0.0.1:26258", ')
    with caplog.at_level(logging.WARNING, logger="feedkv.server.cluster"):
        assert load_peers(tmp_path) == []
    assert "peers.json cannot be read" in caplog.text


def test_a_node_identity_is_kept_across_starts(tmp_path: Path) -> None:
    ident, bootstraps = start_ident(tmp_path)
    assert bootstraps and load_ident(tmp_path) == ident
    again, bootstraps = start_ident(tmp_path)
    assert not bootstraps
    assert again == ClusterIdent(ident.cluster_id, ident.node_id, ident.epoch + 1)
