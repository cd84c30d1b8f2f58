"""The lake sinks through the sink conformance kit: a changelog in Delta and in Iceberg
holds every row the kit emitted once its window is committed, a resolved marker is the
lake's marker, and a Delta directory that cannot be written fails with a SinkError and
takes the rows again once it can. (A mirror keeps each key's last version in a window,
not every version, so the kit's delivery promise is a changelog's.)"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import feedkv.lake
from feedkv.changefeed.options import parse_options
from feedkv.changefeed.sink import Message, RowBlock, Sink, make_sink, parse_sink_uri, sink_defaults
from feedkv.testing.lake_rows import lake_rows
from feedkv.testing.sink_conformance import START, SinkSetup
from feedkv.util.hlc import Timestamp


def row_message(topic: str, key: int, updated: Timestamp) -> Message:
    """The kit's row as the Parquet rows a changefeed hands a lake sink."""
    block = RowBlock(lake_rows((key, f"{topic}-{key}", "c", updated)))
    return Message(topic, json.dumps([key]).encode(), None, updated, updated, 1, block)


def changelog_sink(uri: str) -> Sink:
    options = parse_options((("lake_mode", "changelog"),), now=START)
    options = sink_defaults(uri, options)
    return make_sink(parse_sink_uri(uri, options), options)


def read_changelog(uri: str) -> dict[str, list[bytes]]:
    """Each table at the lake's marker, its changes in timestamp order as the kit's JSON
    values, then the marker's timestamp."""
    marker = feedkv.lake.read_consistent(uri)
    if marker is None:
        return {}
    streams = {}
    for name, table in feedkv.lake.read_tables(uri, marker).items():
        changes = sorted(
            table.to_pylist(), key=lambda r: (Timestamp.parse(r["_feedkv_updated"]), r["k"])
        )
        payloads = [
            json.dumps({"topic": name, "key": [r["k"]], "updated": r["_feedkv_updated"]}).encode()
            for r in changes
        ]
        streams[name] = [*payloads, json.dumps({"resolved": str(marker.resolved)}).encode()]
    return streams


@pytest.fixture(params=["delta", "iceberg"])
def lake_setup(request: pytest.FixtureRequest, tmp_path: Path) -> SinkSetup:
    if request.param == "iceberg":
        uri = f"iceberg://cat/kit?warehouse={tmp_path}/warehouse"
        return SinkSetup(
            lambda: changelog_sink(uri), lambda: read_changelog(uri), message=row_message
        )
    uri = f"delta://{tmp_path}/lake"
    down = tmp_path / "down"

    def failing() -> Sink:
        """A sink whose directory is then taken by a file: every commit fails."""
        sink = changelog_sink(f"delta://{down}")
        shutil.rmtree(down)
        down.write_text("not a directory")
        return sink

    def recover() -> None:
        down.unlink()
        down.mkdir()

    return SinkSetup(
        lambda: changelog_sink(uri),
        lambda: read_changelog(uri),
        failing=failing,
        recover=recover,
        message=row_message,
    )


def test_lake_sinks_keep_the_sink_contracts(lake_setup: SinkSetup) -> None:
    lake_setup.check()
