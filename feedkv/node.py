"""A node: a store, its rangefeeds, and (when it listens) the gRPC server in front of them.

``feedkv.connect(path)`` runs one inside the calling process without a server;
``feedkv start`` runs one that listens; tests and embedded users that need a URL (Spark
executors are other processes) start one with ``Node(path, listen="127.0.0.1:0")``.
Stopping drains: the server refuses new calls and lets calls in flight finish, the
rangefeeds stop, then the store closes (every observer is told ``NODE_SHUTDOWN``).

The node is where the layers meet, so it lives above them: the KV layer knows nothing of
rangefeeds, and the rangefeed layer only observes the store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Self

from feedkv.kv.address import host_port, parse_listen
from feedkv.kv.server import NodeServer
from feedkv.kv.store import Store, StoreConfig
from feedkv.rangefeed.store_feeds import FeedConfig, StoreFeeds
from feedkv.util.hlc import Clock

__all__ = ["Node"]


class Node:
    def __init__(
        self,
        store_path: str | Path,
        *,
        listen: str | None = "127.0.0.1:26257",
        config: StoreConfig | None = None,
        feed_config: FeedConfig | None = None,
        clock: Clock | None = None,
    ) -> None:
        address = parse_listen(listen) if listen is not None else None
        self.store = Store(store_path, clock=clock, config=config)
        self.server: NodeServer | None = None
        try:
            self.feeds = StoreFeeds(self.store, feed_config)
            if address is not None:
                self.server = NodeServer(self.store, *address)
                self.server.start()
        except BaseException:
            self.store.close()
            raise

    @property
    def url(self) -> str:
        """``feedkv://host:port`` of a listening node."""
        if self.server is None:
            raise RuntimeError("this node does not listen; start it with listen='HOST:PORT'")
        return f"feedkv://{host_port(self.server.host, self.server.port)}"

    def stop(self, grace_s: float = 10.0) -> None:
        """Drain calls in flight, stop the rangefeeds, then close the store. Idempotent."""
        if self.server is not None:
            self.server.stop(grace_s)
        self.feeds.close()
        self.store.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
