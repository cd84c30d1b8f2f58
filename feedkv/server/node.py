"""A node: a store, its rangefeeds, and (when it listens) the gRPC server in front of them.

``feedkv.connect(path)`` runs one inside the calling process without a server;
``feedkv start`` runs one that listens; tests and embedded users that need a URL (Spark
executors are other processes) start one with ``Node(path, listen="127.0.0.1:0")``.
Stopping drains: the rangefeeds end (each stream is told ``NODE_SHUTDOWN``), the server
refuses new calls and lets calls in flight finish, then the store closes.

The node is where the layers meet, so it lives above them: the KV layer knows nothing of
rangefeeds, and the rangefeed layer only observes the store.
"""

from __future__ import annotations

import secrets
import threading
from dataclasses import replace
from pathlib import Path
from typing import Self

from feedkv.kv.address import host_port, parse_listen
from feedkv.kv.server import NodeServer
from feedkv.kv.store import Store, StoreConfig
from feedkv.rangefeed.service import RangeFeedService
from feedkv.rangefeed.store_feeds import FeedConfig, StoreFeeds
from feedkv.sql.row_codec import row_split_key
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
        config = config or StoreConfig()
        if config.split_key is None:
            config = replace(config, split_key=row_split_key)
        self.path = Path(store_path)
        self.store = Store(store_path, clock=clock, config=config)
        self.node_id = _node_id(self.path)
        self.server: NodeServer | None = None
        self._serve_lock = threading.Lock()
        try:
            self.feeds = StoreFeeds(self.store, feed_config)
            if listen is not None:
                self.serve(listen)
        except BaseException:
            self.store.close()
            raise

    def serve(self, listen: str = "127.0.0.1:0") -> str:
        """Start the gRPC server (if it is not running) and return :attr:`url`: an
        embedded node does this when other processes (Spark's) need to reach it."""
        with self._serve_lock:
            if self.server is None:
                rangefeed = RangeFeedService(self.feeds).handler()
                server = NodeServer(
                    self.store, *parse_listen(listen), more_methods={"RangeFeed": rangefeed}
                )
                server.start()
                self.server = server
        return self.url

    @property
    def url(self) -> str:
        """``feedkv://host:port`` of a listening node."""
        if self.server is None:
            raise RuntimeError("this node does not listen; start it with listen='HOST:PORT'")
        return f"feedkv://{host_port(self.server.host, self.server.port)}"

    def stop(self, grace_s: float = 10.0) -> None:
        """End the rangefeeds (their streams send ``NODE_SHUTDOWN`` and finish), drain
        calls in flight, then close the store. Idempotent."""
        self.feeds.close()
        if self.server is not None:
            self.server.stop(grace_s)
        self.store.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _node_id(path: Path) -> str:
    """The node's identity, kept in its store directory (job leases name it)."""
    file = path / "node-id"
    if not file.exists():
        file.write_text(secrets.token_hex(8) + "\n")
    return file.read_text().strip()
