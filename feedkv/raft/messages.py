"""What a Raft group writes to its log and sends between its replicas.

Every value here is a small frozen dataclass. :func:`encode_message` and
:func:`decode_message` turn a :class:`Message` into compact msgpack bytes and back (a list
of fields in a fixed order, no field names), so that a transport can carry it between
nodes; decoding is strict and raises :class:`~feedkv.errors.InvariantViolation` on bytes
that are not a message (a peer of another version, or corruption).

A message names no group: the transport of a node that hosts many groups wraps each
message with its group's id (the range id) and hands it to that group's
:class:`~feedkv.raft.state.RaftState`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any

import msgpack

from feedkv.errors import InvariantViolation

__all__ = [
    "COMMIT_ONLY",
    "NO_NODE",
    "ConfChange",
    "ConfChangeType",
    "ConfState",
    "Entry",
    "EntryType",
    "HardState",
    "Message",
    "MessageType",
    "Snapshot",
    "SnapshotMeta",
    "decode_conf_change",
    "decode_message",
    "encode_conf_change",
    "encode_message",
]

NO_NODE = 0
"""The id of no node: no vote cast, no leader known. Node ids are positive."""


class EntryType(IntEnum):
    NORMAL = 0
    CONF_CHANGE = 1


@dataclass(frozen=True, slots=True)
class Entry:
    """One log entry. ``data`` is opaque to Raft except in a ``CONF_CHANGE`` entry,
    where it holds an encoded :class:`ConfChange`. A leader appends an entry with empty
    data when it takes office (to commit its predecessors' entries)."""

    term: int
    index: int
    data: bytes = b""
    type: EntryType = EntryType.NORMAL


@dataclass(frozen=True, slots=True)
class HardState:
    """What a replica must persist before it sends the messages of the same
    :class:`~feedkv.raft.state.Ready`: its term, its vote in that term and the commit
    index it knows."""

    term: int = 0
    vote: int = NO_NODE
    commit: int = 0


@dataclass(frozen=True, slots=True)
class ConfState:
    """A group's membership: the voters (who elect and form quorums) and the learners
    (who receive the log but do not vote)."""

    voters: tuple[int, ...] = ()
    learners: tuple[int, ...] = ()


class ConfChangeType(IntEnum):
    ADD_NODE = 0
    """Add a voter, or promote a learner to a voter."""
    ADD_LEARNER = 1
    REMOVE_NODE = 2


@dataclass(frozen=True, slots=True)
class ConfChange:
    """One membership change of one replica (a simple change, not joint consensus).
    ``node_id`` is the replica's peer id in the group; ``context`` is the application's
    and Raft never reads it (feedkv puts the id of the replica's node there)."""

    type: ConfChangeType
    node_id: int
    context: int = 0


@dataclass(frozen=True, slots=True)
class SnapshotMeta:
    """The log position a snapshot covers (``index`` inclusive) and the membership as
    of that position."""

    index: int = 0
    term: int = 0
    conf_state: ConfState = ConfState()


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A state machine image up to ``meta.index``; ``data`` is the application's."""

    meta: SnapshotMeta = SnapshotMeta()
    data: bytes = b""

    @property
    def is_empty(self) -> bool:
        return self.meta.index == 0


COMMIT_ONLY = 1
"""An append's ``context``: see :class:`Message`."""


class MessageType(IntEnum):
    VOTE = 1
    VOTE_RESP = 2
    PRE_VOTE = 3
    PRE_VOTE_RESP = 4
    APP = 5
    """Append: entries after ``(index, log_term)``, and the leader's commit index."""
    APP_RESP = 6
    """``index``: the follower's last index matching the leader's (or, with ``reject``,
    the rejected ``index`` and in ``reject_hint`` the last index that may match)."""
    HEARTBEAT = 7
    HEARTBEAT_RESP = 8
    SNAP = 9
    TIMEOUT_NOW = 10
    """A leader handing its office over: campaign now, at once, ignoring leases."""


@dataclass(frozen=True, slots=True)
class Message:
    """One message between two replicas of a group.

    ``term`` is the sender's term (for a granted pre-vote and its request: the term the
    pre-candidate would take). ``force`` marks a vote request of a leader transfer, which
    voters grant even while they hear from a leader. ``context``: on a heartbeat and its
    answer, the newest read the leader is confirming its leadership for (0: none); on an
    append, ``COMMIT_ONLY`` when it carries no entries and the leader waits for no answer
    to it (it tells a follower in step the commit index): the follower answers it only to
    reject it.
    """

    type: MessageType
    to: int
    sender: int
    term: int
    log_term: int = 0
    index: int = 0
    entries: tuple[Entry, ...] = ()
    commit: int = 0
    reject: bool = False
    reject_hint: int = 0
    snapshot: Snapshot | None = None
    force: bool = False
    context: int = 0


def _pack_entry(entry: Entry) -> list[Any]:
    return [entry.term, entry.index, entry.data, int(entry.type)]


def _unpack_entry(raw: Any) -> Entry:
    term, index, data, kind = raw
    if type(term) is not int or type(index) is not int or type(data) is not bytes:
        raise TypeError(f"not an entry: {raw!r}")
    return Entry(term, index, data, _ENTRY_TYPES[kind])


def _pack_conf_state(cs: ConfState) -> list[Any]:
    return [list(cs.voters), list(cs.learners)]


def _unpack_conf_state(raw: Any) -> ConfState:
    voters, learners = raw
    return ConfState(tuple(_int(v) for v in voters), tuple(_int(v) for v in learners))


def _int(value: Any) -> int:
    if type(value) is not int:
        raise TypeError(f"expected an int, got {value!r}")
    return value


def _bytes(value: Any) -> bytes:
    if type(value) is not bytes:
        raise TypeError(f"expected bytes, got {value!r}")
    return value


def encode_message(msg: Message) -> bytes:
    """``msg`` as compact bytes for the wire (:func:`decode_message` reverses it)."""
    snap = None
    if msg.snapshot is not None:
        meta = msg.snapshot.meta
        snap = [meta.index, meta.term, _pack_conf_state(meta.conf_state), msg.snapshot.data]
    fields = [
        int(msg.type),
        msg.to,
        msg.sender,
        msg.term,
        msg.log_term,
        msg.index,
        [_pack_entry(e) for e in msg.entries],
        msg.commit,
        msg.reject,
        msg.reject_hint,
        snap,
        msg.force,
        msg.context,
    ]
    packed: bytes = msgpack.packb(fields, use_bin_type=True)
    return packed


# NB: looked up, not called: an IntEnum's call is two Python frames, and a message of a
# few entries makes one for each (KeyError on a value that is none of them)
_MESSAGE_TYPES = {int(t): t for t in MessageType}
_ENTRY_TYPES = {int(t): t for t in EntryType}


def decode_message(raw: bytes) -> Message:
    """The message :func:`encode_message` made; raises
    :class:`~feedkv.errors.InvariantViolation` on anything else."""
    try:
        fields = msgpack.unpackb(raw, raw=False, use_list=True, strict_map_key=True)
        kind, to, sender, term, log_term, index, entries, commit, reject, hint, snap, *rest = fields
        force, ctx = rest
        snapshot = None
        if snap is not None:
            s_index, s_term, s_conf, s_data = snap
            meta = SnapshotMeta(_int(s_index), _int(s_term), _unpack_conf_state(s_conf))
            snapshot = Snapshot(meta, _bytes(s_data))
        if type(reject) is not bool or type(force) is not bool:
            raise TypeError("reject and force must be booleans")
        for number in (to, sender, term, log_term, index, commit, hint, ctx):
            if type(number) is not int:
                raise TypeError(f"expected an int, got {number!r}")
        return Message(
            _MESSAGE_TYPES[kind],
            to,
            sender,
            term,
            log_term,
            index,
            tuple([_unpack_entry(e) for e in entries]),
            commit,
            reject,
            hint,
            snapshot,
            force,
            ctx,
        )
    except (KeyError, ValueError, TypeError, msgpack.ExtraData, msgpack.UnpackException) as exc:
        raise InvariantViolation(f"not a raft message ({len(raw)} bytes): {exc}") from exc


def encode_conf_change(cc: ConfChange) -> bytes:
    """The data of a ``CONF_CHANGE`` entry."""
    fields = [int(cc.type), cc.node_id] + ([cc.context] if cc.context else [])
    packed: bytes = msgpack.packb(fields)
    return packed


def decode_conf_change(data: bytes) -> ConfChange:
    try:
        kind, node_id, *context = msgpack.unpackb(data)
        (ctx,) = context or [0]
        return ConfChange(ConfChangeType(kind), _int(node_id), _int(ctx))
    except (ValueError, TypeError, msgpack.ExtraData, msgpack.UnpackException) as exc:
        raise InvariantViolation(f"not a conf change: {data!r}") from exc
