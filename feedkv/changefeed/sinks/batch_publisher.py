"""Exactly-once publication of a batch's files into a file or cloud-storage sink.

A job whose batches may run again under the same batch id (a Spark changefeed job after
a crash) publishes each batch's files in steps, so a consumer of the sink sees each file
exactly once:

1. Each task writes its files under the job's staging folder,
   ``<work>jobs/<job id>/staging/<random>/<final name>``, through
   :meth:`BatchPublisher.stage`: the file sink writes there as it would write in place.
2. The commit of batch ``b`` (:meth:`BatchPublisher.publish`) records the batch's files,
   ``(staged name, final name)`` pairs, in ``<work>jobs/<job id>/manifests/<run>/<b>.json``
   (``b`` in 20 digits; ``<run>/``: the run of batch ids it belongs to, as a Spark
   query adopted by another node, whose checkpoint is its own, numbers its batches
   from 0 again; none for a query started before runs were kept), then moves each
   into place, then deletes whatever else is in
   staging: batches commit one at a time, so it was written by attempts that never
   committed. A batch id committed again finds its manifest: it finishes moving the
   files listed there (a rename already done is no error) and deletes the files the new
   run staged, so nothing is published twice.
3. :meth:`BatchPublisher.abort` deletes a batch's staged files, except those a manifest
   already lists: the commit that wrote it failed part way, and the batch's next run
   publishes them.

Where ``<work>`` is (:func:`layout`): beside the sink's folder, not in it, so a loader
that copies every object under the sink's prefix sees only its data files and
``.RESOLVED`` markers. The sink ``s3://bucket/cdc/orders`` keeps its staging and
manifests under ``s3://bucket/cdc/.orders.feedkv/``, ``file:///data/cdc`` under
``/data/.cdc.feedkv/``: the same bucket, container or file system, so a publication is
a rename. A sink at a bucket's or container's root (or a directory at the file system's
root) has no such place: its work goes under ``.feedkv/`` in it.

Jobs that share a sink keep apart: each works under its job id. The caller owns
``blobs`` (a publisher never closes it; a :class:`StagedBlobs` does, as a sink closes
the store it writes to).
"""

from __future__ import annotations

import dataclasses
import json
import secrets
from collections.abc import Iterable
from dataclasses import dataclass

from feedkv.changefeed.sink import SinkURI
from feedkv.changefeed.sinks.cloud_storage import BlobStore

__all__ = ["BatchPublisher", "Layout", "StagedBlobs", "layout", "manifests", "staging"]

StagedFile = tuple[str, str]  # (staged name, final name), both in the publisher's store
IN_SINK = ".feedkv/"  # the work folder of a sink that has nothing beside it


@dataclass(frozen=True, slots=True)
class Layout:
    """Where a sink's files and its jobs' work go: ``root`` is the store a publisher
    opens, ``data`` the sink's folder in it (``""``: the root itself) and ``work`` the
    folder of the jobs' staging and manifests."""

    root: SinkURI
    data: str
    work: str


def layout(uri: SinkURI) -> Layout:
    """The layout of the file or cloud-storage sink ``uri`` (see the module's notes):
    its work beside its folder, in the folder's parent, when it has one."""
    parent, _, leaf = uri.path.rstrip("/").rpartition("/")
    if not leaf or (uri.scheme == "file" and not parent):
        return Layout(uri, "", IN_SINK)
    return Layout(dataclasses.replace(uri, path=parent or "/"), f"{leaf}/", f".{leaf}.feedkv/")


def manifests(job_id: int, work: str = IN_SINK) -> str:
    """Where job ``job_id`` keeps its batches' manifests, under the work folder."""
    return f"{work}jobs/{job_id}/manifests"


def staging(job_id: int, work: str = IN_SINK) -> str:
    """Where job ``job_id``'s tasks write files before a commit publishes them."""
    return f"{work}jobs/{job_id}/staging/"


class StagedBlobs:
    """A task's view of the sink: writes each file under a staging folder of its own
    and remembers where it belongs (:attr:`staged`, the sink's folder ``data`` in front
    of the name). Reads, renames and deletes go to the sink's folder itself."""

    def __init__(self, blobs: BlobStore, prefix: str, data: str = "") -> None:
        self._blobs = blobs
        self._prefix = f"{prefix}{secrets.token_hex(8)}/"
        self._data = data
        self.staged: list[StagedFile] = []

    def put(self, name: str, data: bytes) -> None:
        self._blobs.put(self._prefix + name, data)
        self.staged.append((self._prefix + name, self._data + name))

    def get(self, name: str) -> bytes | None:
        return self._blobs.get(self._data + name)

    def rename(self, name: str, new_name: str) -> None:
        self._blobs.rename(self._data + name, self._data + new_name)

    def delete(self, name: str) -> None:
        self._blobs.delete(self._data + name)

    def list(self, prefix: str) -> list[str]:
        cut = len(self._data)
        return [name[cut:] for name in self._blobs.list(self._data + prefix)]

    def close(self) -> None:
        self._blobs.close()


class BatchPublisher:
    """Publishes the batches of job ``job_id`` into ``blobs``, the store of a
    :class:`Layout`'s root (``data`` and ``work`` its folders; the defaults: the sink's
    own store, its work in ``.feedkv/``); see the module's notes. :meth:`publish` and
    :meth:`abort` run on one process, one batch at a time; any number of tasks may
    :meth:`stage` at once."""

    def __init__(
        self, blobs: BlobStore, job_id: int, *, data: str = "", work: str = IN_SINK, run: str = ""
    ) -> None:
        """``run``: the run of batch ids (``""``: the folder of manifests itself)."""
        self._blobs = blobs
        self.job_id = job_id
        self.run = run
        self._data = data
        self._work = work

    @classmethod
    def of(cls, blobs: BlobStore, job_id: int, where: Layout, run: str = "") -> BatchPublisher:
        """A publisher into ``blobs``, the store of ``where.root``."""
        return cls(blobs, job_id, data=where.data, work=where.work, run=run)

    def manifest(self, batch_id: int) -> str:
        """The name of batch ``batch_id``'s manifest (in its run's folder)."""
        run = f"{self.run}/" if self.run else ""
        return f"{manifests(self.job_id, self._work)}/{run}{batch_id:020d}.json"

    def stage(self) -> StagedBlobs:
        """A task's staging: the blob store its file sink writes to."""
        return StagedBlobs(self._blobs, staging(self.job_id, self._work), self._data)

    def publish(self, batch_id: int, staged: Iterable[StagedFile]) -> None:
        """Publishes batch ``batch_id``, whose tasks staged ``staged``; idempotent.
        Raises :class:`~feedkv.changefeed.sink.SinkError` (then call :meth:`abort`)."""
        name = self.manifest(batch_id)
        written = self._blobs.get(name)
        ours = list(staged)
        if written is None:
            self._blobs.put(name, json.dumps({"batch": batch_id, "files": ours}).encode())
            files = ours
        else:  # a replay: the batch's files are the ones its first run recorded
            files = [(pair[0], pair[1]) for pair in json.loads(written)["files"]]
            for staged_name, _final in set(ours) - set(files):
                self._blobs.delete(staged_name)
        for staged_name, final in files:
            self._blobs.rename(staged_name, final)
        for leftover in self._blobs.list(staging(self.job_id, self._work)):
            self._blobs.delete(leftover)

    def abort(self, batch_id: int, staged: Iterable[StagedFile]) -> None:
        """Drops the files of batch ``batch_id`` in ``staged`` that its manifest, if
        written, does not list."""
        written = self._blobs.get(self.manifest(batch_id))
        keep = {pair[0] for pair in json.loads(written)["files"]} if written else set()
        for staged_name, _final in staged:
            if staged_name not in keep:
                self._blobs.delete(staged_name)
