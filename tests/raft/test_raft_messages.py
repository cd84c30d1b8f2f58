from __future__ import annotations

import msgpack
import pytest

from feedkv.errors import InvariantViolation
from feedkv.raft.messages import (
    ConfChange,
    ConfChangeType,
    ConfState,
    Entry,
    EntryType,
    Message,
    MessageType,
    Snapshot,
    SnapshotMeta,
    decode_conf_change,
    decode_message,
    encode_conf_change,
    encode_message,
)

MESSAGES = [
    Message(MessageType.VOTE, 2, 1, 5, log_term=4, index=9, force=True),
    Message(MessageType.PRE_VOTE_RESP, 1, 3, 6, reject=True),
    Message(
        MessageType.APP,
        3,
        1,
        7,
        log_term=6,
        index=10,
        entries=(Entry(7, 11, b"a"), Entry(7, 12, b"\x00cc", EntryType.CONF_CHANGE)),
        commit=10,
    ),
    Message(MessageType.APP_RESP, 1, 2, 7, index=10, reject=True, reject_hint=8),
    Message(MessageType.HEARTBEAT_RESP, 1, 2, 7, context=12),
    Message(
        MessageType.SNAP,
        2,
        1,
        3,
        snapshot=Snapshot(SnapshotMeta(40, 3, ConfState((1, 2, 3), (4,))), b"image"),
    ),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: m.type.name)
def test_a_message_survives_the_wire(message: Message) -> None:
    assert decode_message(encode_message(message)) == message


def test_a_heartbeat_is_small() -> None:
    # many groups heartbeat many peers: the encoding must stay a few bytes
    assert len(encode_message(Message(MessageType.HEARTBEAT, 2, 1, 5, commit=100))) < 20


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"\xc1",
        msgpack.packb([1, 2, 3]),
        msgpack.packb([99, 2, 1, 5, 0, 0, [], 0, False, 0, None, False, 0]),  # unknown type
        msgpack.packb([1, 2, 1, "5", 0, 0, [], 0, False, 0, None, False, 0]),  # a str term
        msgpack.packb([1, 2, 1, 5, 0, 0, [], 0, 1, 0, None, False, 0]),  # an int for a bool
        msgpack.packb([7, 2, 1, 5, 0, 0, [], 0, False, 0, None, False]),  # no read context
        msgpack.packb([5, True, 1, 5, 0, 0, [], 0, False, 0, None, False, 0]),  # a bool for an id
        # entries: of an unknown kind, with a str index, with str data
        msgpack.packb([5, 2, 1, 5, 0, 0, [[5, 1, b"a", 7]], 0, False, 0, None, False, 0]),
        msgpack.packb([5, 2, 1, 5, 0, 0, [[5, "1", b"a", 0]], 0, False, 0, None, False, 0]),
        msgpack.packb([5, 2, 1, 5, 0, 0, [[5, 1, "a", 0]], 0, False, 0, None, False, 0]),
    ],
)
def test_decoding_garbage_raises_rather_than_guessing(raw: bytes) -> None:
    with pytest.raises(InvariantViolation, match="not a raft message"):
        decode_message(raw)


def test_a_conf_change_survives_encoding() -> None:
    change = ConfChange(ConfChangeType.ADD_LEARNER, 7)
    assert decode_conf_change(encode_conf_change(change)) == change
    with_node = ConfChange(ConfChangeType.ADD_NODE, 9, context=4)  # replica 9 on node 4
    assert decode_conf_change(encode_conf_change(with_node)) == with_node
    with pytest.raises(InvariantViolation):
        decode_conf_change(b"\x94\x01\x02\x03\x04")
