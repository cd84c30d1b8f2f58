"""The rangefeed service rechecks its users' running registrations when asked (the node
asks when the grants change): those refused now end with PERMISSION_DENIED, the others
and root's run on; a recheck that runs while a registration is being checked does not
miss it. The access rule is a small fake (the ReadAccess protocol); the store is real."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

import feedkv
from feedkv import DB
from feedkv.errors import PermissionDeniedError
from feedkv.kv.access import Read
from feedkv.kv.proto import feedkv_pb2 as pb
from feedkv.kv.wire import span_to_proto, timestamp_to_proto
from feedkv.rangefeed.event import Checkpoint, Error, ErrorReason
from feedkv.rangefeed.registration import Registration
from feedkv.rangefeed.service import RangeFeedService
from feedkv.rangefeed.stream import EventStream
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

DEADLINE_S = 30.0


class _Grants:
    """Who may read: the users in ``allowed``; ``during_check`` runs inside a check,
    after it has read ``allowed``."""

    def __init__(self, *allowed: str) -> None:
        self.allowed = set(allowed)
        self.during_check: Callable[[], None] | None = None

    def check(self, user: str, reads: Sequence[Read]) -> None:
        allowed = user in self.allowed  # read, then the hook: as a grant going meanwhile
        hook, self.during_check = self.during_check, None
        if hook is not None:
            hook()
        if not allowed:
            raise PermissionDeniedError(f"user {user} may not read {reads[0].span}")


@pytest.fixture
def db(tmp_path: Path) -> Iterator[DB]:
    database = feedkv.connect(tmp_path / "store")
    yield database
    database.close()


def _register(
    service: RangeFeedService, stream: EventStream, tag: int, user: str | None
) -> Registration:
    msg = pb.RangeFeedRegister(tag=tag, checkpoints_only=True)
    span_to_proto(Span(b"t/", b"t0"), msg.span)
    timestamp_to_proto(Timestamp(1, 0), msg.start_ts)
    return service.register(msg, stream, user)


def _ending(stream: EventStream, tag: int) -> Error:
    """The error that ends registration ``tag`` (waiting for it, within the deadline)."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        for got, event in stream.take(timeout=0.5):
            if got == tag and isinstance(event, Error):
                return event
    raise TimeoutError(f"registration {tag} did not end within {DEADLINE_S} s")


def _running(stream: EventStream, tags: set[int]) -> set[int]:
    """The tags of ``tags`` that send a checkpoint (waiting for each, within the deadline),
    failing on an error."""
    seen: set[int] = set()
    deadline = time.monotonic() + DEADLINE_S
    while seen != tags and time.monotonic() < deadline:
        for tag, event in stream.take(timeout=0.5):
            assert not isinstance(event, Error) or tag not in tags, event
            if isinstance(event, Checkpoint) and tag in tags:
                seen.add(int(tag))  # type: ignore[call-overload]
    return seen


def test_a_recheck_ends_only_the_registrations_refused_now(db: DB) -> None:
    assert db.node is not None
    grants = _Grants("alice", "bob")
    service = RangeFeedService(db.node.feeds, grants)
    stream = db.node.feeds.new_stream()
    regs = [_register(service, stream, tag, user) for tag, user in ((1, "alice"), (2, "bob"))]
    root = _register(service, stream, 3, None)  # root's: never checked
    grants.allowed.discard("alice")
    service.recheck()
    error = _ending(stream, 1)
    assert error.reason is ErrorReason.PERMISSION_DENIED
    assert "user alice may not read" in error.message and "revoked" in error.message
    db.put(b"t/1", b"v")
    assert _running(stream, {2, 3}) == {2, 3}
    for reg in (*regs, root):
        db.node.feeds.unregister(reg)


def test_a_recheck_during_a_registrations_check_does_not_miss_it(db: DB) -> None:
    """The grant goes after the check read it but before the registration was listed,
    and the recheck it caused ran in between: the registration is checked again."""
    assert db.node is not None
    grants = _Grants("alice")
    service = RangeFeedService(db.node.feeds, grants)
    stream = db.node.feeds.new_stream()
    _register(service, stream, 1, "alice")  # listed: the next recheck counts

    def revoke_and_recheck() -> None:
        grants.allowed.discard("alice")
        service.recheck()  # as the watch would, from its own thread

    grants.during_check = revoke_and_recheck
    grants.allowed.add("alice")
    late = _register(service, stream, 2, "alice")
    assert late.done
    error = _ending(stream, 2)
    assert error.reason is ErrorReason.PERMISSION_DENIED and "revoked" in error.message
