"""Exactly-once publication of a batch's files (stage, manifest, move into place), on a
real directory, without a changefeed: what a consumer of the sink sees after commits,
replays and aborts. The Spark job's use of it is tested in tests/spark/test_file_manifest.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from feedkv.changefeed.options import ChangefeedOptions
from feedkv.changefeed.sink import parse_sink_uri
from feedkv.changefeed.sinks.batch_publisher import BatchPublisher, layout, manifests, staging
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


# Where the work goes: beside the sink's folder, never in it.


@pytest.mark.parametrize(
    ("uri", "root", "data", "work"),
    [
        ("file:///data/cdc", "/data", "cdc/", ".cdc.feedkv/"),
        ("file:///data/cdc/", "/data", "cdc/", ".cdc.feedkv/"),
        ("s3://bucket/cdc/orders?AWS_REGION=r", "/cdc", "orders/", ".orders.feedkv/"),
        ("s3://bucket/orders", "/", "orders/", ".orders.feedkv/"),
        ("azure://container/a/b", "/a", "b/", ".b.feedkv/"),
        # Nothing beside the sink: its work goes in it.
        ("s3://bucket", "", "", ".feedkv/"),
        ("s3://bucket/", "/", "", ".feedkv/"),
        ("file:///cdc", "/cdc", "", ".feedkv/"),
    ],
)
def test_the_work_folder_lies_beside_the_sinks_folder(
    uri: str, root: str, data: str, work: str
) -> None:
    where = layout(parse_sink_uri(uri, ChangefeedOptions()))
    assert (where.root.path, where.data, where.work) == (root, data, work)
    assert where.root.host == parse_sink_uri(uri, ChangefeedOptions()).host
    assert where.root.params == parse_sink_uri(uri, ChangefeedOptions()).params


def test_a_loader_copying_the_sinks_folder_sees_only_what_was_published(tmp_path: Path) -> None:
    """Staging, manifests and leftovers of attempts that never committed all stay
    beside the sink's directory: everything in it is a published file."""
    out = tmp_path / "out"
    where = layout(parse_sink_uri(f"file://{out}", ChangefeedOptions()))
    root = LocalBlobs(where.root.path)
    publisher = BatchPublisher.of(root, 7, where)
    never = stage(publisher, x=b"never committed")
    staged = stage(publisher, a=b"1", b=b"2")
    assert [final for _staged, final in staged] == ["out/d/a", "out/d/b"]
    assert not out.exists() or not any(p.is_file() for p in out.rglob("*"))
    publisher.publish(0, staged)
    publisher.abort(1, never)

    def files(folder: Path) -> dict[str, bytes]:
        return {
            p.relative_to(folder).as_posix(): p.read_bytes()
            for p in folder.rglob("*")
            if p.is_file()
        }

    assert files(out) == {"d/a": b"1", "d/b": b"2"}
    work = files(tmp_path / ".out.feedkv")
    assert list(work) == ["jobs/7/manifests/00000000000000000000.json"]
    task = publisher.stage()  # a task's reads go to the sink's folder
    assert task.get("d/a") == b"1" and sorted(task.list("d/")) == ["d/a", "d/b"]


def test_a_new_run_publishes_its_batch_0_though_an_earlier_run_had_one(
    blobs: LocalBlobs,
) -> None:
    first = BatchPublisher(blobs, 7, run="a1")
    first.publish(0, stage(first, a=b"first run"))
    adopted = BatchPublisher(blobs, 7, run="b2")  # its query counts from 0 again
    adopted.publish(0, stage(adopted, b=b"second run"))
    assert published(blobs) == {"d/a": b"first run", "d/b": b"second run"}
    assert adopted.manifest(0) == f"{manifests(7)}/b2/00000000000000000000.json"
