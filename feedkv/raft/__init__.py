"""Raft consensus for feedkv's ranges: a pure state machine per group, and its storage.

One :class:`~feedkv.raft.state.RaftState` is one replica of one group (a range). It takes
ticks and messages in and hands back :class:`~feedkv.raft.state.Ready` objects: hard
state and entries to persist, a snapshot to apply, messages to send (only once the
writes are durable) and committed entries to apply. It does no I/O and keeps no clock,
thread or random source of its own, so a node drives thousands of groups from its own
loop and tests run thousands of schedules of them (:mod:`feedkv.testing.raft_sim`).

Driving many groups from one store (the integration this package is shaped for):

- keep one ``RaftState`` per range replica, on an
  :class:`~feedkv.raft.engine_storage.EngineRaftStorage` (the range's log in the store's
  engine, under the range id; its ``make_snapshot`` reads the range's data at the applied
  index when a leader must send a snapshot);
- on each tick of the store's timer call ``tick()`` on every group (or only on groups
  that are not quiescent); route each incoming message, wrapped with its range id by the
  transport, to its group's ``step()``;
- collect the Readies of every group with ``has_ready()``; write all their hard states,
  entries and snapshots in *one* engine write transaction
  (:func:`~feedkv.raft.engine_storage.persist_readies`, or ``stage`` inside a
  transaction that also carries other writes: one fsync acknowledges all groups, the
  group commit of issue 38); only then send all their messages, batched
  per destination node (heartbeats of many groups to one node can be coalesced
  there, as CockroachDB does, outside this package); apply the committed entries of
  each group in order; call ``advance(ready)`` on each.

Modules: :mod:`~feedkv.raft.messages` (entries, messages, their wire encoding),
:mod:`~feedkv.raft.log` (the log view: stable entries and an unstable tail),
:mod:`~feedkv.raft.progress` (a leader's view of each follower),
:mod:`~feedkv.raft.state` (the state machine), :mod:`~feedkv.raft.storage` (the
storage protocol and an in-memory one), :mod:`~feedkv.raft.engine_storage` (logs in the
LMDB engine, many groups per transaction).

Libraries evaluated before writing this (needs: many groups per process, the log fsynced
before acknowledging, pure with no threads or I/O inside, Python 3.11+):

- *pysyncobj* (maintained, on PyPI and in Debian): a ``SyncObj`` is one group that owns
  its transport (TCP sockets), its event loop (its own thread, or ``onTick`` from the
  caller's loop, still doing the socket I/O itself) and its journal file; state
  machines are Python objects replicated by pickled method calls. One group per object,
  each with its own sockets, and no way to batch many groups' appends into one fsync.
- *raftos*: asyncio and UDP, one group per process (module-level ``register``), state
  kept in its own files; unmaintained for years.
- *pyraft* (a daemon with a RESP interface), *simpleRaft*, *aioraft-ng* (archived):
  one group per process, with their own networking; learning projects.
- *raftify*: Python bindings to a Rust Raft (tikv's raft-rs) that run their own
  runtime, network and storage; marked experimental, its API may break.

None fits, so this follows the design of etcd's raft package (ideas, not code): the
state machine is separate from storage and transport, which the caller provides.
"""

from feedkv.raft.engine_storage import RAFT_DB, EngineRaftStorage, persist_readies
from feedkv.raft.messages import (
    NO_NODE,
    ConfChange,
    ConfChangeType,
    ConfState,
    Entry,
    EntryType,
    HardState,
    Message,
    MessageType,
    Snapshot,
    SnapshotMeta,
    decode_conf_change,
    decode_message,
    encode_conf_change,
    encode_message,
)
from feedkv.raft.progress import ProgressState
from feedkv.raft.state import Config, RaftState, Ready, Role, SoftState
from feedkv.raft.storage import INITIAL_INDEX, INITIAL_TERM, MemoryStorage, RaftStorage

__all__ = [
    "INITIAL_INDEX",
    "INITIAL_TERM",
    "NO_NODE",
    "RAFT_DB",
    "Config",
    "ConfChange",
    "ConfChangeType",
    "ConfState",
    "Entry",
    "EngineRaftStorage",
    "EntryType",
    "HardState",
    "MemoryStorage",
    "Message",
    "MessageType",
    "ProgressState",
    "RaftState",
    "RaftStorage",
    "Ready",
    "Role",
    "Snapshot",
    "SnapshotMeta",
    "SoftState",
    "decode_conf_change",
    "decode_message",
    "encode_conf_change",
    "encode_message",
    "persist_readies",
]
