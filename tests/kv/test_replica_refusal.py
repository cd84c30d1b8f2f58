"""The typed refusals between stores: the notice to a removed replica, told apart from a
Raft message by its encoding's type, and a refused snapshot's reason."""

from __future__ import annotations

import msgpack
import pytest

from feedkv.errors import InvariantViolation
from feedkv.kv.replica_refusal import (
    Refusal,
    ReplicaTooOld,
    SnapshotRefusedError,
    decode_inbound,
    encode_notice,
)
from feedkv.raft import Message, MessageType, encode_message


@pytest.mark.parametrize("replica_id", [1, 255, 1 << 24, (1 << 32) - 1])
def test_a_replica_too_old_notice_decodes_to_itself(replica_id: int) -> None:
    assert decode_inbound(encode_notice(ReplicaTooOld(replica_id))) == ReplicaTooOld(replica_id)


def test_a_raft_message_is_never_taken_for_a_notice() -> None:
    message = Message(MessageType.HEARTBEAT, 4, 1, 7, commit=3)
    assert decode_inbound(encode_message(message)) == message


@pytest.mark.parametrize(
    "fields",
    [{"refusal": "no-such-reason", "replica": 3}, {"replica": 3}, {"refusal": "overlap"}],
)
def test_a_notice_without_a_known_reason_fails_loudly(fields: dict[str, object]) -> None:
    with pytest.raises(InvariantViolation, match="notice"):
        decode_inbound(msgpack.packb(fields))


def test_a_refused_snapshot_names_its_reason() -> None:
    refused = SnapshotRefusedError(Refusal.OVERLAP, "r7 replica 4 on n2")
    assert refused.reason is Refusal.OVERLAP
    assert str(refused) == "snapshot refused (overlap): r7 replica 4 on n2"
    # NB: the value travels: two reasons sharing one would arrive as one (an alias)
    assert len({reason.value for reason in Refusal}) == len(Refusal.__members__)
