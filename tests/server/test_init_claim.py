"""The claim to bootstrap a cluster (:mod:`feedkv.server.init_claim`): the count of a
claim round, a waiting node's book of grants, and seeded schedules of concurrent
claimants, of which at most one ever wins."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from feedkv.server.init_claim import (
    Answer,
    ClaimAnswer,
    ClaimBook,
    Outcome,
    claimant_address,
    claimant_name,
    holder_address,
    quorum,
    tally,
)

JOIN = ["a:1", "b:1", "c:1"]
GRANTED = ClaimAnswer("a:1", Answer.GRANTED)


def answers(*kinds: tuple[Answer, str]) -> list[ClaimAnswer]:
    return [
        ClaimAnswer(address, kind, holder=holder)
        for address, (kind, holder) in zip(JOIN, kinds, strict=True)
    ]


@pytest.mark.parametrize(
    ("kinds", "own", "outcome"),
    [
        # a majority granted, its own book too: it bootstraps
        (
            [(Answer.GRANTED, ""), (Answer.GRANTED, ""), (Answer.HELD, "c:1")],
            GRANTED,
            Outcome(won=True),
        ),
        # a node that is down does not stop a majority
        (
            [(Answer.GRANTED, ""), (Answer.UNREACHED, ""), (Answer.GRANTED, "")],
            GRANTED,
            Outcome(won=True),
        ),
        # its own book granted another claimant: no win, even with a majority elsewhere
        (
            [(Answer.GRANTED, ""), (Answer.GRANTED, ""), (Answer.GRANTED, "")],
            ClaimAnswer("a:1", Answer.HELD, holder="b:1"),
            Outcome(),
        ),
        # another claimant holds a majority: it bootstraps, this one is told which
        (
            [(Answer.GRANTED, ""), (Answer.HELD, "b:1"), (Answer.HELD, "b:1")],
            GRANTED,
            Outcome(holder="b:1"),
        ),
        # three claimants split the votes: nobody decides (release and try again)
        (
            [(Answer.GRANTED, ""), (Answer.HELD, "b:1"), (Answer.HELD, "c:1")],
            GRANTED,
            Outcome(),
        ),
        # a majority unreachable: undecided
        (
            [(Answer.GRANTED, ""), (Answer.UNREACHED, ""), (Answer.UNREACHED, "")],
            GRANTED,
            Outcome(),
        ),
        # a member anywhere: a cluster exists, whatever the other answers
        (
            [(Answer.GRANTED, ""), (Answer.GRANTED, ""), (Answer.MEMBER, "")],
            GRANTED,
            Outcome(member="c:1"),
        ),
        (
            [(Answer.GRANTED, ""), (Answer.GRANTED, ""), (Answer.GRANTED, "")],
            ClaimAnswer("d:1", Answer.MEMBER),
            Outcome(member="d:1"),
        ),
    ],
)
def test_a_claim_round_is_decided_by_a_majority_of_the_join_list(
    kinds: list[tuple[Answer, str]], own: ClaimAnswer, outcome: Outcome
) -> None:
    assert tally(answers(*kinds), JOIN, own) == outcome


def test_a_join_list_of_one_is_its_own_majority_and_repeats_count_once() -> None:
    assert quorum(["a:1"]) == 1
    assert quorum(["a:1", "a:1", "b:1"]) == 2
    assert quorum(["a:1", "b:1"]) == 2  # NB: two nodes: both must grant
    alone = [ClaimAnswer("a:1", Answer.GRANTED)]
    assert tally(alone, ["a:1"], GRANTED) == Outcome(won=True)


def test_a_book_grants_one_claimant_until_it_releases(tmp_path: Path) -> None:
    book = ClaimBook(tmp_path)
    assert book.claim("x").answer is Answer.GRANTED
    assert book.claim("x").answer is Answer.GRANTED  # asking again is granted again
    refused = book.claim("y")
    assert (refused.answer, refused.holder) == (Answer.HELD, "x")
    book.release("y")  # not the holder: nothing changes
    assert book.holder == "x"
    book.release("x")
    assert book.claim("y").answer is Answer.GRANTED


def test_a_grant_outlives_a_restart_of_the_waiting_node(tmp_path: Path) -> None:
    ClaimBook(tmp_path).claim("x")
    again = ClaimBook(tmp_path)
    assert again.holder == "x"
    assert again.claim("y").holder == "x"
    again.release("x")
    assert ClaimBook(tmp_path).holder == ""


def test_two_nodes_on_one_address_string_are_two_claimants(tmp_path: Path) -> None:
    """Nodes on two hosts may listen on the same address string (``0.0.0.0:26258``):
    their stores' tokens tell them apart, and a restart on its store keeps a node's."""
    first, second = ClaimBook(tmp_path / "first"), ClaimBook(tmp_path / "second")
    assert first.token != second.token
    assert ClaimBook(tmp_path / "first").token == first.token
    wildcard = "0.0.0.0:26258"
    name_1, name_2 = claimant_name(wildcard, first.token), claimant_name(wildcard, second.token)
    acceptor = ClaimBook(tmp_path / "acceptor")
    assert acceptor.claim(name_1).answer is Answer.GRANTED
    assert acceptor.claim(name_2).holder == name_1
    assert claimant_address(name_1) == wildcard


def test_a_member_refuses_every_claim(tmp_path: Path) -> None:
    book = ClaimBook(tmp_path)
    book.claim("x")
    book.become_member()
    assert book.claim("x").answer is Answer.MEMBER
    assert book.claim("y").answer is Answer.MEMBER


@pytest.fixture
def books(tmp_path: Path) -> Iterator[dict[str, ClaimBook]]:
    yield {address: ClaimBook(tmp_path / address) for address in JOIN}


def _run_schedule(
    books: dict[str, ClaimBook],
    claimants: list[str],
    rng: random.Random,
    *,
    faults: float = 0.0,
) -> list[str]:
    """Claimants (nodes of JOIN) take claim rounds with their calls interleaved at
    random, releasing and retrying when a round is undecided; returns the winners.
    ``faults``: how likely each release is lost, and each step restarts a node's book
    (it reads its grant back from its store)."""
    winners: list[str] = []
    done: set[str] = set()
    rounds = dict.fromkeys(claimants, 0)
    # each claimant's pending steps: ask its own book, then each node of the list
    pending: dict[str, list[str]] = {}
    got: dict[str, list[ClaimAnswer]] = {}
    own: dict[str, ClaimAnswer] = {}
    while len(done) < len(claimants):
        if rng.random() < faults:
            restarted = rng.choice(JOIN)
            books[restarted] = ClaimBook(books[restarted].path)
        claimant = rng.choice([c for c in claimants if c not in done])
        if claimant not in pending:
            pending[claimant] = rng.sample(JOIN, len(JOIN))
            got[claimant] = []
            own[claimant] = ClaimAnswer(claimant, books[claimant].claim(claimant).answer)
            continue
        if pending[claimant]:
            address = pending[claimant].pop()
            answer = books[address].claim(claimant)
            got[claimant].append(ClaimAnswer(address, answer.answer, holder=answer.holder))
            continue
        outcome = tally(got[claimant], JOIN, own[claimant])
        del pending[claimant]
        rounds[claimant] += 1
        if outcome.won:
            winners.append(claimant)
            done.add(claimant)
            continue
        for book in books.values():
            if rng.random() >= faults:
                book.release(claimant)
        if outcome.holder or rounds[claimant] >= 20:
            done.add(claimant)
    return winners


@pytest.mark.parametrize("seed", range(20))
def test_concurrent_claimants_never_both_bootstrap(books: dict[str, ClaimBook], seed: int) -> None:
    rng = random.Random(seed)
    claimants = rng.sample(JOIN, rng.choice([2, 3]))
    winners = _run_schedule(books, claimants, rng)
    assert len(winners) == 1, (claimants, winners)


@pytest.mark.parametrize("seed", range(20))
def test_lost_releases_and_restarted_nodes_never_make_two_bootstrap(
    books: dict[str, ClaimBook], seed: int
) -> None:
    """Releases lost on the way and waiting nodes restarted mid-schedule may leave
    grants behind (and so no winner), but never two winners."""
    rng = random.Random(seed)
    claimants = rng.sample(JOIN, rng.choice([2, 3]))
    winners = _run_schedule(books, claimants, rng, faults=0.3)
    assert len(winners) <= 1, (claimants, winners)


def test_a_holder_is_named_by_the_join_address_it_answered_at() -> None:
    holder = claimant_name("0.0.0.0:26258", "t1")
    answers = [
        ClaimAnswer("10.0.0.1:26258", Answer.HELD, holder=holder, token="t1"),
        ClaimAnswer("10.0.0.2:26258", Answer.HELD, holder=holder, token="t2"),
    ]
    assert holder_address(holder, answers) == "10.0.0.1:26258"
    # not among those that answered: the address it gave itself
    assert holder_address(holder, answers[1:]) == "0.0.0.0:26258"
