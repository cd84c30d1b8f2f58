"""Google's Cloud Pub/Sub emulator (the ``google-cloud-cli-pubsub-emulator`` package: a
Java server, run with the machine's Java) on a free loopback port, for tests of the
``gcpubsub://`` sink, and a subscriber that reads what was published, over the
emulator's REST API.
"""

from __future__ import annotations

import base64
import os
import signal
import socket
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from feedkv.testing.bearer_front import BearerFront
from feedkv.testing.waiting import wait_until

__all__ = ["EMULATOR", "AuthenticatingFront", "PulledMessage", "Subscription", "pubsub_emulator"]

_TIMEOUT = 60.0  # seconds for one request to the emulator

# Where the Debian package puts it (override with FEEDKV_PUBSUB_EMULATOR).
EMULATOR = Path(
    os.environ.get(
        "FEEDKV_PUBSUB_EMULATOR",
        "/usr/lib/google-cloud-sdk/platform/pubsub-emulator/bin/cloud-pubsub-emulator",
    )
)


@contextmanager
def pubsub_emulator(start_timeout_s: float = 120.0) -> Iterator[str]:
    """Run the emulator on a free loopback port; yields its ``host:port`` (what
    ``PUBSUB_EMULATOR_HOST`` takes) and stops it on exit. Raises ``FileNotFoundError``
    naming the package when it is not installed."""
    if not EMULATOR.exists():
        raise FileNotFoundError(
            f"no Pub/Sub emulator at {EMULATOR}: install google-cloud-cli-pubsub-emulator "
            "(or set FEEDKV_PUBSUB_EMULATOR to its cloud-pubsub-emulator script)"
        )
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # NB: a session of its own, so that stopping it stops the JVM the script execs
    server = subprocess.Popen(
        [str(EMULATOR), "--host=127.0.0.1", f"--port={port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )

    def answering() -> bool:
        if server.poll() is not None:
            raise RuntimeError(f"the Pub/Sub emulator exited with {server.returncode}")
        try:
            # NB: an API call, not just a connection: a JVM just started (on a busy
            # machine) takes a while over its first requests
            url = f"http://127.0.0.1:{port}/v1/projects/feedkv-ready/topics"
            return httpx.get(url, timeout=_TIMEOUT).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_until(answering, timeout_s=start_timeout_s, what="the Pub/Sub emulator to answer")
        yield f"127.0.0.1:{port}"
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(30)


@dataclass(frozen=True, slots=True)
class PulledMessage:
    data: bytes
    attributes: dict[str, str]


class Subscription:
    """A pull subscription to ``project``'s ``topic`` on the emulator at ``host``, made
    (with its topic, if missing) when constructed: it gets what is published after."""

    def __init__(self, host: str, project: str, topic: str, name: str) -> None:
        self._base = f"http://{host}/v1/projects/{project}"
        self._name = name
        answer = httpx.put(f"{self._base}/topics/{topic}", json={}, timeout=_TIMEOUT)
        if answer.status_code not in (200, 409):
            answer.raise_for_status()
        httpx.put(
            f"{self._base}/subscriptions/{name}",
            json={"topic": f"projects/{project}/topics/{topic}"},
            timeout=_TIMEOUT,
        ).raise_for_status()

    def pull(self) -> list[PulledMessage]:
        """What the subscription holds now (up to 1000 messages), acknowledged."""
        answer = httpx.post(
            f"{self._base}/subscriptions/{self._name}:pull",
            json={"maxMessages": 1000},
            timeout=_TIMEOUT,
        )
        answer.raise_for_status()
        received = answer.json().get("receivedMessages", [])
        if received:
            httpx.post(
                f"{self._base}/subscriptions/{self._name}:acknowledge",
                json={"ackIds": [r["ackId"] for r in received]},
                timeout=_TIMEOUT,
            ).raise_for_status()
        return [
            PulledMessage(
                base64.b64decode(r["message"].get("data", "")),
                dict(r["message"].get("attributes", {})),
            )
            for r in received
        ]


class AuthenticatingFront(BearerFront):
    """A :class:`~feedkv.testing.bearer_front.BearerFront` before the emulator at
    ``host`` (``host:port``): Pub/Sub's check of the caller's OAuth token."""

    def __init__(self, host: str, check: Callable[[str], str | None]) -> None:
        super().__init__(f"http://{host}", check)
