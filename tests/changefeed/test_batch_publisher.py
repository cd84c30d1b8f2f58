"""Exactly-once publication of a batch's files (stage, manifest, move into place), on a
real directory, without a changefeed: what a consumer of the sink sees after commits,
replays and aborts. The Spark job's use of it is tested in tests/spark/test_file_manifest.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from feedkv.changefeed.sinks.batch_publisher import BatchPublisher, manifests, staging
from feedkv.changefeed.sinks.cloud_storage import LocalBlobs


@pytest.fixture
def blobs(tmp_path: Path) -> LocalBlobs:
    return LocalBlobs(str(tmp_path / "out"))


def published(blobs: LocalBlobs) -> dict[str, bytes]:
    root = Path(blobs.root)
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and not p.relative_to(root).as_posix().startswith(".feedkv/")
    }


def staged_files(blobs: LocalBlobs, job_id: int = 7) -> list[str]:
    return blobs.list(staging(job_id))


def stage(publisher: BatchPublisher, **files: bytes) -> list[tuple[str, str]]:
    task = publisher.stage()
    for name, data in files.items():
        task.put(f"d/{name}", data)
    return task.staged


def test_staged_files_are_out_of_sight_until_published(blobs: LocalBlobs) -> None:
    publisher = BatchPublisher(blobs, 7)
    staged = stage(publisher, a=b"1", b=b"2")
    assert [final for _staged, final in staged] == ["d/a", "d/b"]
    assert all(name.startswith(staging(7)) for name, _final in staged)
    assert published(blobs) == {}
    publisher.publish(0, staged)
    assert published(blobs) == {"d/a": b"1", "d/b": b"2"}
    assert staged_files(blobs) == []


def test_the_manifest_names_the_batch_and_its_files(blobs: LocalBlobs) -> None:
    publisher = BatchPublisher(blobs, 7)
    staged = stage(publisher, a=b"1")
    publisher.publish(3, staged)
    assert publisher.manifest(3) == f"{manifests(7)}/00000000000000000003.json"
    recorded = json.loads(blobs.get(publisher.manifest(3)) or b"")
    assert recorded == {"batch": 3, "files": [list(pair) for pair in staged]}


def test_a_batch_published_again_publishes_the_first_runs_files_only(blobs: LocalBlobs) -> None:
    publisher = BatchPublisher(blobs, 7)
    publisher.publish(0, stage(publisher, a=b"first"))
    publisher.publish(0, stage(publisher, a=b"again", b=b"again"))
    assert published(blobs) == {"d/a": b"first"}
    assert staged_files(blobs) == []


def test_publishing_deletes_what_attempts_that_never_committed_staged(blobs: LocalBlobs) -> None:
    publisher = BatchPublisher(blobs, 7)
    stage(publisher, lost=b"x")  # a task whose batch never committed
    publisher.publish(0, stage(publisher, a=b"1"))
    assert published(blobs) == {"d/a": b"1"}
    assert staged_files(blobs) == []


def test_abort_drops_the_staged_files_but_those_a_manifest_lists(blobs: LocalBlobs) -> None:
    publisher = BatchPublisher(blobs, 7)
    staged = stage(publisher, a=b"1")
    publisher.abort(0, staged)
    assert staged_files(blobs) == []

    staged = stage(publisher, a=b"1")
    blobs.put(publisher.manifest(1), json.dumps({"batch": 1, "files": staged}).encode())
    publisher.abort(1, staged)  # a commit that failed after its manifest
    assert staged_files(blobs) == [name for name, _final in staged]
    publisher.publish(1, [])
    assert published(blobs) == {"d/a": b"1"}


def test_jobs_that_share_a_sink_keep_apart(blobs: LocalBlobs) -> None:
    one, two = BatchPublisher(blobs, 1), BatchPublisher(blobs, 2)
    waiting = stage(two, b=b"2")
    one.publish(0, stage(one, a=b"1"))
    assert staged_files(blobs, 2) == [name for name, _final in waiting]
    two.publish(0, waiting)
    assert published(blobs) == {"d/a": b"1", "d/b": b"2"}
