"""Tests for the exactly-once file publishing of feedkv.spark.changefeed_job, without
Spark and without a node.

The writer is driven as Spark would drive it: ``write()`` once per task with the task's
rows as Arrow record batches (a marker row first, then messages), then
``commit(results, batch id)`` on the driver, or ``abort()``. Tasks stage their files
under ``.out.feedkv/jobs/<job id>/staging`` beside the sink's directory ``out``; a
commit records them in ``.out.feedkv/jobs/<job id>/manifests/<batch id>.json`` and moves
them into place, so ``out`` only ever holds data files and markers. A
replayed batch id (Spark re-running a batch after a crash) must publish each of the
first run's files exactly once and drop the replay's own files. The sink directory is a
real one under ``tmp_path``; crashes are simulated by putting files back where an
unfinished commit would have left them.
"""

from __future__ import annotations

import base64
import dataclasses
import itertools
import json
import pickle
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from feedkv.changefeed.changefeed import ChangefeedSpec
from feedkv.changefeed.options import parse_options
from feedkv.changefeed.rows import Target
from feedkv.changefeed.sink import Message, SinkError
from feedkv.changefeed.sinks.batch_publisher import manifests, staging
from feedkv.changefeed.sinks.cloud_storage import name_ts
from feedkv.errors import InvalidArgumentError
from feedkv.spark.blocks import block_row, marker_row, message_blocks
from feedkv.spark.changefeed_job import (
    ChangefeedStreamWriter,
    JobOptions,
    TaskResult,
    decode_spec,
    encode_spec,
)
from feedkv.util.hlc import Timestamp

URL = "feedkv://127.0.0.1:1"  # never dialled: no option here needs the node
TABLE_ID = 104
START = Timestamp(1_700_000_000_000_000_000, 0)
LO = Timestamp(1_700_000_001_000_000_000, 0)
HI = Timestamp(1_700_000_002_000_000_000, 0)


class Marker(NamedTuple):
    """A piece's marker row: its window ``(lo, hi]``."""

    lo: Timestamp
    hi: Timestamp


Row = Marker | Message  # what a task's rows stand for


def batches(rows: Iterable[Row]) -> Iterator[pa.RecordBatch]:
    """A task's rows as Spark hands them to the writer: markers, and the messages
    between them in blocks."""
    for is_marker, run in itertools.groupby(rows, lambda r: isinstance(r, Marker)):
        if is_marker:
            for m in run:
                yield marker_row(m.lo, m.hi)
            continue
        for topic, schema_id, block in message_blocks(iter(run)):
            yield block_row(topic, schema_id, block)


def marker(lo: Timestamp = LO, hi: Timestamp = HI) -> Row:
    return Marker(lo, hi)


def change(row_id: int, ts: Timestamp | None = None, topic: str = "t") -> Row:
    ts = ts or HI
    value = json.dumps({"after": {"id": row_id}}).encode()
    return Message(topic, f"[{row_id}]".encode(), value, ts, ts, 1)


def task(*row_ids: int) -> list[Row]:
    """One task's rows: its piece's marker, then a change per id."""
    return [marker(), *(change(i) for i in row_ids)]


def make_spec(out: Path, *, sink_params: str = "") -> ChangefeedSpec:
    return ChangefeedSpec(
        targets=(Target(table_id=TABLE_ID),),
        topics={TABLE_ID: "t"},
        options=parse_options((), now=START),
        start=START,
        sink_uri=f"file://{out}{sink_params}",
    )


def make_writer(out: Path, *, sink_params: str = "") -> ChangefeedStreamWriter:
    return ChangefeedStreamWriter(JobOptions(URL, make_spec(out, sink_params=sink_params)))


@pytest.fixture
def out(tmp_path: Path) -> Path:
    return tmp_path / "out"


@pytest.fixture
def writer(out: Path) -> ChangefeedStreamWriter:
    return make_writer(out)


def relative_files(root: Path) -> list[str]:
    if not root.exists():
        return []
    return sorted(
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and not p.name.endswith(".tmp")
    )


# The job's work folder beside the sink's directory ``out``; names in staged pairs and
# manifests are relative to ``out``'s parent, where it lies.
WORK = ".out.feedkv/"


def published(out: Path) -> dict[str, bytes]:
    """The files a consumer of the sink sees: every file in ``out`` (named as the
    publisher names them, from ``out``'s parent), none of them the job's work."""
    return {f"out/{name}": (out / name).read_bytes() for name in relative_files(out)}


def staged_files(out: Path) -> list[str]:
    return relative_files(out.parent / staging(0, WORK))


def manifest(out: Path, batch_id: int) -> dict[str, Any]:
    path = out.parent / manifests(0, WORK) / f"{batch_id:020d}.json"
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def manifest_files(out: Path, batch_id: int) -> list[tuple[str, str]]:
    return [(staged, final) for staged, final in manifest(out, batch_id)["files"]]


def lines_of(files: Iterable[bytes]) -> list[bytes]:
    return [line for body in files for line in body.splitlines()]


def values(rows: Iterable[Row]) -> list[bytes]:
    return [r.value for r in rows if isinstance(r, Message) and r.value is not None]


# Writing and committing one batch.


def test_written_files_stay_out_of_sight_until_the_batch_commits(
    writer: ChangefeedStreamWriter, out: Path
) -> None:
    writer.write(batches(task(1, 2)))
    assert staged_files(out)
    assert published(out) == {}
    assert not (out.parent / manifests(0, WORK)).exists()


def test_a_task_result_names_each_staged_file_and_where_it_belongs(
    writer: ChangefeedStreamWriter, out: Path
) -> None:
    result = writer.write(batches(task(1, 2, 3)))
    assert result.rows == 3
    assert (result.lo, result.resolved) == (LO, HI)
    assert result.staged, "a task with messages stages at least one file"
    for staged, final in result.staged:
        assert staged.startswith(staging(0, WORK)) and staged.endswith(final.removeprefix("out"))
        assert final.startswith("out/") and not staged.startswith("out/")
        assert (out.parent / staged).is_file()
    assert sorted(s for s, _ in result.staged) == [
        f"{staging(0, WORK)}{n}" for n in staged_files(out)
    ]


def test_a_commit_publishes_the_staged_files_outside_the_feedkv_directory(
    writer: ChangefeedStreamWriter, out: Path
) -> None:
    result = writer.write(batches(task(1, 2)))
    writer.commit([result], 0)
    finals = sorted(final for _staged, final in result.staged)
    assert sorted(published(out)) == finals
    assert staged_files(out) == []


def test_the_manifest_lists_the_files_of_the_batch(
    writer: ChangefeedStreamWriter, out: Path
) -> None:
    first, second = writer.write(batches(task(1, 2))), writer.write(batches(task(3)))
    writer.commit([first, second], 0)
    assert (out.parent / manifests(0, WORK) / "00000000000000000000.json").is_file()
    assert manifest(out, 0)["batch"] == 0
    assert manifest_files(out, 0) == first.staged + second.staged
    assert sorted(final for _staged, final in manifest_files(out, 0)) == sorted(published(out))


def test_published_files_hold_the_values_written_one_per_line(
    writer: ChangefeedStreamWriter, out: Path
) -> None:
    rows = task(1, 2, 3)
    writer.commit([writer.write(batches(rows))], 0)
    assert lines_of(published(out).values()) == values(rows)


def test_every_task_of_a_batch_is_published(writer: ChangefeedStreamWriter, out: Path) -> None:
    tasks = [task(1, 2), task(3), task(4, 5, 6)]
    writer.commit([writer.write(batches(rows)) for rows in tasks], 0)
    assert sorted(lines_of(published(out).values())) == sorted(
        v for rows in tasks for v in values(rows)
    )


def test_a_task_that_writes_several_files_publishes_each_of_them(out: Path) -> None:
    writer = make_writer(out, sink_params="?file_size=1")  # one message per file
    rows = task(1, 2, 3, 4)
    result = writer.write(batches(rows))
    writer.commit([result], 0)
    assert len(published(out)) == 4
    assert sorted(lines_of(published(out).values())) == sorted(values(rows))


def test_data_files_are_named_after_the_windows_lower_bound(
    writer: ChangefeedStreamWriter, out: Path
) -> None:
    writer.commit([writer.write(batches(task(1)))], 0)
    (name,) = published(out)
    assert name.split("/")[-1].startswith(name_ts(LO) + "-")


def test_a_task_result_spans_the_windows_of_all_its_markers(writer: ChangefeedStreamWriter) -> None:
    early, late = Timestamp(LO.wall - 10, 0), Timestamp(HI.wall + 10, 0)
    rows = [marker(LO, HI), marker(early, HI), marker(LO, late), change(1)]
    result = writer.write(batches(rows))
    assert (result.lo, result.resolved) == (early, late)


def test_a_task_with_only_its_marker_stages_nothing_and_commits_an_empty_batch(
    writer: ChangefeedStreamWriter, out: Path
) -> None:
    result = writer.write(batches([marker()]))
    assert (result.rows, result.staged, result.resolved) == (0, [], HI)
    writer.commit([result], 0)
    assert published(out) == {}
    assert manifest_files(out, 0) == []


def test_successive_batches_each_get_a_manifest_and_publish_their_own_files(
    writer: ChangefeedStreamWriter, out: Path
) -> None:
    first, second = task(1, 2), task(3)
    writer.commit([writer.write(batches(first))], 0)
    writer.commit([writer.write(batches(second))], 1)
    assert sorted(relative_files(out.parent / manifests(0, WORK))) == [
        "00000000000000000000.json",
        "00000000000000000001.json",
    ]
    assert sorted(lines_of(published(out).values())) == sorted(values(first + second))


def test_a_commit_accepts_task_results_that_went_through_pickle(
    writer: ChangefeedStreamWriter, out: Path
) -> None:
    rows = task(1, 2)
    result = pickle.loads(pickle.dumps(writer.write(batches(rows))))
    assert isinstance(result, TaskResult)
    writer.commit([result, None], 0)
    assert lines_of(published(out).values()) == values(rows)


# Replays: Spark runs a batch id again after a crash.


def test_a_replayed_batch_publishes_nothing_twice(
    writer: ChangefeedStreamWriter, out: Path
) -> None:
    rows = task(1, 2, 3)
    writer.commit([writer.write(batches(rows))], 0)
    before = published(out)

    replay = make_writer(out)  # a restarted query has a new writer
    replay.commit([replay.write(batches(rows))], 0)

    assert published(out) == before
    assert lines_of(published(out).values()) == values(rows)


def test_a_replayed_batch_deletes_the_files_the_replay_staged(
    writer: ChangefeedStreamWriter, out: Path
) -> None:
    rows = task(1, 2)
    writer.commit([writer.write(batches(rows))], 0)
    recorded = manifest(out, 0)

    again = writer.write(batches(rows))
    assert again.staged and all((out.parent / staged).is_file() for staged, _ in again.staged)
    writer.commit([again], 0)

    assert staged_files(out) == []
    assert manifest(out, 0) == recorded


def test_a_replay_finishes_publishing_a_file_the_first_commit_left_staged(
    out: Path,
) -> None:
    writer = make_writer(out, sink_params="?file_size=1")
    rows = task(1, 2, 3)
    writer.commit([writer.write(batches(rows))], 0)
    before = published(out)
    staged, final = manifest_files(out, 0)[1]
    (out.parent / staged).parent.mkdir(parents=True, exist_ok=True)
    (out.parent / final).rename(out.parent / staged)  # as if the commit died before this rename

    writer.commit([], 0)

    assert published(out) == before
    assert staged_files(out) == []


def test_a_replay_after_a_crash_before_any_rename_publishes_the_first_runs_files(
    writer: ChangefeedStreamWriter, out: Path
) -> None:
    rows = task(1, 2, 3)
    writer.commit([writer.write(batches(rows))], 0)
    before = published(out)
    for staged, final in manifest_files(out, 0):  # back to just after the manifest
        (out.parent / staged).parent.mkdir(parents=True, exist_ok=True)
        (out.parent / final).rename(out.parent / staged)
    assert published(out) == {}

    replay = make_writer(out)
    replay.commit([replay.write(batches(rows))], 0)

    assert published(out) == before
    assert lines_of(published(out).values()) == values(rows)
    assert staged_files(out) == []


# Aborting.


def test_abort_deletes_the_staged_files_and_publishes_nothing(
    writer: ChangefeedStreamWriter, out: Path
) -> None:
    results = [writer.write(batches(task(1, 2))), writer.write(batches(task(3)))]
    assert staged_files(out)
    writer.abort([*results, None], 0)
    assert staged_files(out) == []
    assert published(out) == {}
    assert not (out.parent / manifests(0, WORK)).exists()


def test_abort_after_a_full_commit_leaves_the_published_files_alone(
    writer: ChangefeedStreamWriter, out: Path
) -> None:
    result = writer.write(batches(task(1, 2)))
    writer.commit([result], 0)
    before = published(out)
    writer.abort([result], 0)
    assert published(out) == before


def test_a_commit_that_failed_after_its_manifest_is_finished_by_the_replay_despite_the_abort(
    out: Path,
) -> None:
    # Spark calls abort(messages) when commit raises, then replays the batch id. Once the
    # manifest is written it promises its files: the abort must not delete them.
    writer = make_writer(out, sink_params="?file_size=1")  # one message per file
    rows = task(1, 2, 3)
    result = writer.write(batches(rows))
    _staged, blocked = result.staged[1]
    (out.parent / blocked).mkdir(
        parents=True
    )  # a fault: the second file cannot be moved into place
    with pytest.raises(SinkError):
        writer.commit([result], 0)
    writer.abort([result], 0)
    (out.parent / blocked).rmdir()  # the fault clears and the query restarts

    replay = make_writer(out, sink_params="?file_size=1")
    replay.commit([replay.write(batches(rows))], 0)

    assert sorted(lines_of(published(out).values())) == sorted(values(rows))
    assert staged_files(out) == []


# The spec as a Spark option.


def test_a_spec_survives_encoding_as_an_option_value(out: Path) -> None:
    spec = make_spec(out)
    text = encode_spec(spec)
    assert isinstance(text, str)
    assert decode_spec(text) == spec


def test_decoding_an_option_value_that_is_not_a_spec_is_rejected() -> None:
    text = base64.b64encode(pickle.dumps({"targets": [TABLE_ID]})).decode()
    with pytest.raises(InvalidArgumentError, match="not a changefeed spec"):
        decode_spec(text)


def test_a_commit_removes_what_attempts_that_never_committed_left_in_staging(
    writer: ChangefeedStreamWriter, out: Path
) -> None:
    # A driver that died mid-batch leaves its tasks' staged files behind: nothing
    # publishes them, and the next batch to commit clears them out.
    orphaned = writer.write(batches(task(1, 2)))
    assert staged_files(out)
    committed = task(3)
    writer.commit([writer.write(batches(committed))], 0)
    assert staged_files(out) == []
    assert lines_of(published(out).values()) == values(committed)
    assert all(final not in published(out) for _staged, final in orphaned.staged)


def test_a_parquet_block_is_published_in_files_of_about_the_file_size(out: Path) -> None:
    """A parquet block is many rows in one message: the writer cuts it so the sink still
    ends files near ``file_size``, and every row lands once, in order."""
    options = parse_options((("format", "parquet"),), now=START)
    spec = dataclasses.replace(make_spec(out, sink_params="?file_size=64KiB"), options=options)
    writer = ChangefeedStreamWriter(JobOptions(URL, spec))
    n = 20_000
    block = pa.record_batch(
        {
            "id": list(range(n)),
            "s": ["x" * 20] * n,
            "__crdb__event_type": ["c"] * n,
            "__crdb__updated": [str(HI)] * n,
            "__crdb__mvcc_timestamp": [str(HI)] * n,
        }
    )
    result = writer.write(iter([marker_row(LO, HI), block_row("t", 1, block)]))
    writer.commit([result], 0)

    files = sorted(name for name in published(out) if name.endswith(".parquet"))
    assert result.rows == n
    # Each file ends at the first cut of the block (an eighth of file_size) past 64 KiB.
    assert block.nbytes // (72 << 10) <= len(files) <= block.nbytes // (64 << 10) + 1
    ids = [i for name in files for i in pq.read_table(out.parent / name).column("id").to_pylist()]
    assert ids == list(range(n))
