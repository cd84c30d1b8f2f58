"""Waiting nodes' ports (:class:`~feedkv.server.init_server.InitServer`, plaintext, in
this process) under ``Init`` calls fired together: however many inits race, one node
of a ``--join`` list is asked to bootstrap, and every other init is told which."""

from __future__ import annotations

import io
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from feedkv.cli.credentials import Login
from feedkv.cli.init import run_init
from feedkv.errors import InvalidArgumentError
from feedkv.kv.dialer import call
from feedkv.kv.wire import SERVICE
from feedkv.security.tls import open_channel
from feedkv.server.init_server import CLAIM_METHOD, INIT_METHOD, RELEASE_METHOD, InitServer
from feedkv.testing.node_process import free_port
from feedkv.testing.waiting import run_threads


@pytest.fixture
def waiting(tmp_path: Path) -> Iterator[Callable[[int], list[InitServer]]]:
    started: list[InitServer] = []

    def start(count: int) -> list[InitServer]:
        ports = [free_port() for _ in range(count)]
        join = [f"127.0.0.1:{port}" for port in ports]
        base = tmp_path / f"list{len(started)}"
        servers = [
            InitServer("127.0.0.1", port, None, join=join, store_dir=base / f"n{index + 1}")
            for index, port in enumerate(ports)
        ]
        started.extend(servers)
        return servers

    yield start
    for server in started:
        server.stop()


def _fire_together(servers: list[InitServer]) -> list[dict[str, Any]]:
    barrier = threading.Barrier(len(servers))
    answers: list[dict[str, Any]] = [{} for _ in servers]

    def fire(index: int) -> Callable[[], None]:
        def run() -> None:
            barrier.wait(timeout=30)
            with open_channel(servers[index].address, [], None) as channel:
                answers[index] = call(channel, INIT_METHOD, {}, 30.0)

        return run

    run_threads([fire(index) for index in range(len(servers))], deadline_s=60)
    return answers


@pytest.mark.parametrize("count", [2, 3])
def test_inits_fired_at_every_waiting_node_at_once_bootstrap_one(
    waiting: Callable[[int], list[InitServer]], count: int
) -> None:
    """Every node of the list gets an init at the same moment (the votes may split:
    the claimants part ways after random pauses), five times over."""
    for _ in range(5):
        servers = waiting(count)
        answers = _fire_together(servers)
        bootstrapping = [s for s in servers if s.init_requested.is_set()]
        assert len(bootstrapping) == 1, answers
        (winner,) = bootstrapping
        assert answers[servers.index(winner)] == {}  # `Cluster successfully initialized`
        for server, answer in zip(servers, answers, strict=True):
            if server is not winner:
                assert answer["refused"] == "cluster has already been initialized", answer
                assert answer["by"] == winner.address, answer


def test_a_second_init_at_the_bootstrapping_node_is_refused(
    waiting: Callable[[int], list[InitServer]],
) -> None:
    (server,) = waiting(1)
    with open_channel(server.address, [], None) as channel:
        assert call(channel, INIT_METHOD, {}) == {}
        again = call(channel, INIT_METHOD, {})
    assert again == {
        "refused": "cluster has already been initialized",
        "by": server.address,
        "here": True,
    }


def test_init_refused_by_the_node_asked_names_it_as_the_user_did(tmp_path: Path) -> None:
    """A node listening on 0.0.0.0 is reached at 127.0.0.1: a second init, and one at a
    member, say that the node asked bootstraps it or is a member, not that another node
    (its listen address) does."""
    port = free_port()
    asked = f"127.0.0.1:{port}"
    server = InitServer("0.0.0.0", port, None, join=[asked], store_dir=tmp_path / "n1")
    try:
        login = Login(f"feedkv://{asked}", None, "root")
        assert run_init(login, io.StringIO()) == 0
        with pytest.raises(InvalidArgumentError) as again:
            run_init(login, io.StringIO())
        assert f"the node at {asked} bootstraps it, as an earlier" in str(again.value)
        assert "0.0.0.0" not in str(again.value)
        server.claims.become_member()
        with pytest.raises(InvalidArgumentError) as member:
            run_init(login, io.StringIO())
        assert str(member.value).endswith(f"(the node at {asked} is a member)")
    finally:
        server.stop()


def test_an_init_that_lost_names_the_winner_by_its_join_list_address(tmp_path: Path) -> None:
    """Nodes listening on 0.0.0.0 (issue 37): the second init, at another node, is told
    which node bootstraps by the address the join list reaches it at, not 0.0.0.0."""
    ports = [free_port() for _ in range(3)]
    join = [f"127.0.0.1:{port}" for port in ports]
    servers = [
        InitServer("0.0.0.0", port, None, join=join, store_dir=tmp_path / f"n{port}")
        for port in ports
    ]
    try:
        assert run_init(Login(f"feedkv://{join[0]}", None, "root"), io.StringIO()) == 0
        with pytest.raises(InvalidArgumentError) as lost:
            run_init(Login(f"feedkv://{join[1]}", None, "root"), io.StringIO())
        assert f"reached the node at {join[0]} first" in str(lost.value)
        assert "0.0.0.0" not in str(lost.value)
    finally:
        for server in servers:
            server.stop()


def test_a_malformed_claim_or_release_is_refused_and_the_node_waits_on(
    waiting: Callable[[int], list[InitServer]],
) -> None:
    (server,) = waiting(1)
    with open_channel(server.address, [], None) as channel:
        for method in (CLAIM_METHOD, RELEASE_METHOD):
            stub = channel.unary_unary(f"/{SERVICE}/{method}")
            for raw in (b"\xc1", b"\x80", b"\x81\xa8claimant\x01", b"\x81\xa8claimant\xa0"):
                with pytest.raises(grpc.RpcError) as raised:
                    stub(raw, timeout=10)
                assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert call(channel, INIT_METHOD, {}, 30.0) == {}  # alone on its list: it bootstraps
    assert server.init_requested.is_set()
