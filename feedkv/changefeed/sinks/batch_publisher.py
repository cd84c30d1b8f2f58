"""Exactly-once publication of a batch's files into a file or cloud-storage sink.

A job whose batches may run again under the same batch id (a Spark changefeed job after
a crash) publishes each batch's files in steps, so a consumer of the sink sees each file
exactly once:

1. Each task writes its files under the job's staging folder,
   ``.feedkv/jobs/<job id>/staging/<random>/<final name>``, through
   :meth:`BatchPublisher.stage`: the file sink writes there as it would write in place.
2. The commit of batch ``b`` (:meth:`BatchPublisher.publish`) records the batch's files,
   ``(staged name, final name)`` pairs, in ``.feedkv/jobs/<job id>/manifests/<b>.json``
   (``b`` in 20 digits), then moves each into place, then deletes whatever else is in
   staging: batches commit one at a time, so it was written by attempts that never
   committed. A batch id committed again finds its manifest: it finishes moving the
   files listed there (a rename already done is no error) and deletes the files the new
   run staged, so nothing is published twice.
3. :meth:`BatchPublisher.abort` deletes a batch's staged files, except those a manifest
   already lists: the commit that wrote it failed part way, and the batch's next run
   publishes them.

Jobs that share a sink keep apart: each works under its job id. The caller owns
``blobs`` (a publisher never closes it; a :class:`StagedBlobs` does, as a sink closes
the store it writes to).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable

from feedkv.changefeed.sinks.cloud_storage import BlobStore

__all__ = ["BatchPublisher", "StagedBlobs", "manifests", "staging"]

StagedFile = tuple[str, str]  # (staged name, final name)


def manifests(job_id: int) -> str:
    """Where job ``job_id`` keeps its batches' manifests, under its sink's root."""
    return f".feedkv/jobs/{job_id}/manifests"


def staging(job_id: int) -> str:
    """Where job ``job_id``'s tasks write files before a commit publishes them."""
    return f".feedkv/jobs/{job_id}/staging/"


class StagedBlobs:
    """A task's view of the sink: writes each file under a staging folder of its own
    and remembers where it belongs (:attr:`staged`). Reads, renames and deletes go to
    the sink itself."""

    def __init__(self, blobs: BlobStore, prefix: str) -> None:
        self._blobs = blobs
        self._prefix = f"{prefix}{secrets.token_hex(8)}/"
        self.staged: list[StagedFile] = []

    def put(self, name: str, data: bytes) -> None:
        self._blobs.put(self._prefix + name, data)
        self.staged.append((self._prefix + name, name))

    def get(self, name: str) -> bytes | None:
        return self._blobs.get(name)

    def rename(self, name: str, new_name: str) -> None:
        self._blobs.rename(name, new_name)

    def delete(self, name: str) -> None:
        self._blobs.delete(name)

    def list(self, prefix: str) -> list[str]:
        return self._blobs.list(prefix)

    def close(self) -> None:
        self._blobs.close()


class BatchPublisher:
    """Publishes the batches of job ``job_id`` into ``blobs`` (see the module's notes).
    :meth:`publish` and :meth:`abort` run on one process, one batch at a time; any
    number of tasks may :meth:`stage` at once."""

    def __init__(self, blobs: BlobStore, job_id: int) -> None:
        self._blobs = blobs
        self.job_id = job_id

    def manifest(self, batch_id: int) -> str:
        """The name of batch ``batch_id``'s manifest."""
        return f"{manifests(self.job_id)}/{batch_id:020d}.json"

    def stage(self) -> StagedBlobs:
        """A task's staging: the blob store its file sink writes to."""
        return StagedBlobs(self._blobs, staging(self.job_id))

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
        for leftover in self._blobs.list(staging(self.job_id)):
            self._blobs.delete(leftover)

    def abort(self, batch_id: int, staged: Iterable[StagedFile]) -> None:
        """Drops the files of batch ``batch_id`` in ``staged`` that its manifest, if
        written, does not list."""
        written = self._blobs.get(self.manifest(batch_id))
        keep = {pair[0] for pair in json.loads(written)["files"]} if written else set()
        for staged_name, _final in staged:
            if staged_name not in keep:
                self._blobs.delete(staged_name)
