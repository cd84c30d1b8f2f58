"""The claim a waiting node takes before it bootstraps a cluster, so that ``feedkv init``
makes one cluster whatever the timing: two inits sent at once to two waiting nodes of
one ``--join`` list never bootstrap two.

A node that ``feedkv init`` asks to bootstrap first asks every node of its ``--join``
list (itself included, when the list names it) to grant it the claim. A claimant is
named by its address and a token its store keeps (:func:`claimant_name`): two nodes
that listen on the same address string on two hosts (``0.0.0.0:26258``) are still two
claimants, and a node restarted on its store is still the same one. A node answering a
claim gives its token too, so that a message names a holder by the address of the join
list it answered at (:func:`holder_address`), not by one it listens on. Each waiting node
grants the claim to one claimant at a time (:class:`ClaimBook`), keeps the grant in its
store directory across restarts, and refuses others, naming the holder; a member of a
cluster refuses every claim in CockroachDB's words. The claimant bootstraps only when a
majority of its list granted it (:func:`tally`); a claimant that won keeps its grants
for ever, one that did not releases them. Two majorities of one list share a node, and
that node grants one claimant, so at most one node of a list bootstraps.

What the rule does not cover: nodes whose ``--join`` lists differ so much that two
majorities share no node (CockroachDB asks for one list on every node); and a node
that granted a claim to a node that never comes back waits for it (``feedkv init`` on
another node names the holder: start it again, or init it).

This module is pure: the acceptor's state machine and the claimant's count. The calls
are :mod:`feedkv.server.init_server`'s.
"""

from __future__ import annotations

import enum
import json
import secrets
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from feedkv.util.files import replace_durably

__all__ = [
    "Answer",
    "ClaimAnswer",
    "ClaimBook",
    "Outcome",
    "claimant_address",
    "claimant_name",
    "holder_address",
    "quorum",
    "tally",
]

_CLAIM_FILE = "init-claim.json"


class Answer(enum.Enum):
    GRANTED = "granted"
    HELD = "held"  # granted to another claimant, named in ``holder``
    MEMBER = "member"  # the node is in a cluster already
    UNREACHED = "unreached"  # no answer (down, still starting, or not waiting)


@dataclass(frozen=True, slots=True)
class ClaimAnswer:
    """What the node at ``address`` of the join list answered a claim."""

    address: str
    answer: Answer
    holder: str = ""  # HELD: who holds the claim there
    reason: str = ""  # UNREACHED: why
    token: str = ""  # the store token of the node that answered (none: UNREACHED)


@dataclass(frozen=True, slots=True)
class Outcome:
    """The count of a claim round: ``won`` (bootstrap), ``member`` (the address of a node
    in a cluster: join it), ``holder`` (another claimant holds a majority: it
    bootstraps), or none of them (undecided: release and try again)."""

    won: bool = False
    member: str = ""
    holder: str = ""


def claimant_name(address: str, token: str) -> str:
    """The name a node claims under: its address (what people read) and its store's
    token (what tells two nodes apart)."""
    return f"{address}#{token}"


def claimant_address(name: str) -> str:
    """The address part of a claimant's name (for messages)."""
    return name.rpartition("#")[0] or name


def holder_address(holder: str, answers: Sequence[ClaimAnswer]) -> str:
    """The address to name claimant ``holder`` by in a message: the address of the join
    list where that node answered (the one the reader gave, where its own may be
    ``0.0.0.0:26258``), else the address it names itself by."""
    token = holder.rpartition("#")[2]
    there = next((a.address for a in answers if token and a.token == token), None)
    return there or claimant_address(holder)


def quorum(join: Sequence[str]) -> int:
    """How many nodes of ``join`` (a repeated address counts once) make a majority."""
    return len(set(join)) // 2 + 1


def tally(answers: Sequence[ClaimAnswer], join: Sequence[str], own: ClaimAnswer) -> Outcome:
    """Decide a claim round from the answers of the nodes at ``join`` and of the
    claimant's own book (``own``: it may have granted another claimant, whether or not
    the list names it). A member anywhere means a cluster exists; a majority of grants
    (and its own) wins; a majority held by one other claimant means that one wins."""
    everyone = [own, *answers]
    member = next((a for a in everyone if a.answer is Answer.MEMBER), None)
    if member is not None:
        return Outcome(member=member.address)
    needed = quorum(join)
    granted = {a.address for a in answers if a.answer is Answer.GRANTED}
    if own.answer is Answer.GRANTED and len(granted) >= needed:
        return Outcome(won=True)
    held: dict[str, set[str]] = {}
    for a in answers:
        if a.answer is Answer.HELD:
            held.setdefault(a.holder, set()).add(a.address)
    for holder, addresses in held.items():
        if len(addresses) >= needed:
            return Outcome(holder=holder)
    return Outcome()


class ClaimBook:
    """A waiting node's side of the claims: which claimant holds it (kept in
    ``store_dir``), and whether the node joined a cluster. Thread-safe; its lock is
    never held during a call, so two claimants asking each other cannot deadlock."""

    def __init__(self, store_dir: Path) -> None:
        """Reads the book kept in ``store_dir``, or starts one (with the node's
        :attr:`token`)."""
        self.path = store_dir
        self._file = store_dir / _CLAIM_FILE
        self._lock = threading.Lock()
        self._member = False
        kept = json.loads(self._file.read_text()) if self._file.exists() else {}
        self._holder = str(kept.get("holder", ""))
        self.token = str(kept.get("token", "")) or secrets.token_hex(8)
        if "token" not in kept:
            self._keep(self._holder)

    @property
    def holder(self) -> str:
        with self._lock:
            return self._holder

    @property
    def member(self) -> bool:
        with self._lock:
            return self._member

    def claim(self, claimant: str) -> ClaimAnswer:
        """Grant the claim to ``claimant`` unless another holds it or the node is a
        member (idempotent: a holder asking again is granted again)."""
        with self._lock:
            if self._member:
                return ClaimAnswer("", Answer.MEMBER, token=self.token)
            if self._holder and self._holder != claimant:
                return ClaimAnswer("", Answer.HELD, holder=self._holder, token=self.token)
            if not self._holder:
                self._keep(claimant)
            return ClaimAnswer("", Answer.GRANTED, token=self.token)

    def release(self, claimant: str) -> None:
        """``claimant`` gave its claim up (a release by anyone else changes nothing)."""
        with self._lock:
            if self._holder == claimant:
                self._keep("")

    def become_member(self) -> None:
        """The node joined a cluster: every claim is refused from now on."""
        with self._lock:
            self._member = True

    def _keep(self, holder: str) -> None:
        # NB: durably before the answer: a grant forgotten in a crash could go to a
        # second claimant while the first bootstraps on it
        self._file.parent.mkdir(parents=True, exist_ok=True)
        replace_durably(self._file, json.dumps({"holder": holder, "token": self.token}))
        self._holder = holder
