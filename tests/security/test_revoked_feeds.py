"""A user's running rangefeed of a table, from a client of a secure node, ends with a
permission error soon after ``REVOKE SELECT`` or ``DROP USER``, instead of running on;
another user's feed, still allowed, runs on."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import feedkv
from feedkv import DB
from feedkv.errors import PermissionDeniedError
from feedkv.kv.store import StoreConfig
from feedkv.rangefeed.client import RangeFeed
from feedkv.rangefeed.event import Checkpoint, Value
from feedkv.sql import catalog
from feedkv.sql.row_codec import table_span
from feedkv.testing.certs import make_certs_dir
from feedkv.util.keys import Span

DEADLINE_S = 30.0


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_certs_dir(tmp_path_factory.mktemp("pki"), users=("root", "alice", "bob"))


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory, certs: Path) -> Iterator[DB]:
    config = StoreConfig(sync=False, closed_ts_target_ns=200_000_000, closed_ts_interval_s=0.05)
    store = tmp_path_factory.mktemp("secure") / "store"
    database = feedkv.connect(store, certs_dir=certs, listen="127.0.0.1:0", config=config)
    database.sql("CREATE USER alice")
    database.sql("CREATE USER bob")
    yield database
    database.close()


def _table(db: DB, name: str) -> Span:
    db.sql(f"CREATE TABLE {name} (id INT PRIMARY KEY)")
    db.sql(f"INSERT INTO {name} VALUES (1)")
    snapshot = catalog.Snapshot(db, db.now())
    database = catalog.database_by_name(snapshot, "defaultdb")
    return table_span(catalog.table_by_name(snapshot, database, name).id)


class _Follower:
    """Reads a feed on a thread: each event, then the error that ended it, if any."""

    def __init__(self, feed: RangeFeed) -> None:
        self.feed = feed
        self.events: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for event in self.feed:
                self.events.put(event)
        except Exception as exc:  # what the test waits for
            self.events.put(exc)

    def next_of(self, kind: type) -> object:
        """The next event (or error) of ``kind``, within the deadline."""
        while True:
            item = self.events.get(timeout=DEADLINE_S)
            if isinstance(item, kind):
                return item
            if isinstance(item, Exception):
                raise item


def _connect(db: DB, certs: Path, user: str) -> DB:
    return feedkv.connect(db.serving_url().partition("?")[0], certs_dir=certs, user=user)


def test_revoke_ends_a_running_feed_and_spares_another_users(db: DB, certs: Path) -> None:
    span = _table(db, "rides")
    db.sql("GRANT SELECT ON rides TO alice, bob")
    with _connect(db, certs, "alice") as alice, _connect(db, certs, "bob") as bob:
        theirs = _Follower(alice.rangefeed(span, alice.now()))
        ours = _Follower(bob.rangefeed(span, bob.now()))
        theirs.next_of(Checkpoint)
        ours.next_of(Checkpoint)
        db.sql("INSERT INTO rides VALUES (2)")
        assert isinstance(theirs.next_of(Value), Value)
        db.sql("REVOKE SELECT ON rides FROM alice")
        ended = theirs.next_of(PermissionDeniedError)
        assert "does not have SELECT privilege on relation rides" in str(ended)
        assert "revoked" in str(ended)
        db.sql("INSERT INTO rides VALUES (3)")
        value = ours.next_of(Value)
        assert isinstance(value, Value) and value.value is not None
        theirs.feed.close()
        ours.feed.close()


def test_revoking_a_role_ends_its_members_running_feed(db: DB, certs: Path) -> None:
    span = _table(db, "trips")
    db.sql("CREATE ROLE riders")
    db.sql("GRANT SELECT ON trips TO riders")
    db.sql("GRANT riders TO alice")
    with _connect(db, certs, "alice") as alice:
        feed = _Follower(alice.rangefeed(span, alice.now()))
        feed.next_of(Checkpoint)
        db.sql("REVOKE riders FROM alice")
        ended = feed.next_of(PermissionDeniedError)
        assert "user alice does not have SELECT privilege on relation trips" in str(ended)
        feed.feed.close()


def test_drop_user_ends_its_running_feed(db: DB, certs: Path) -> None:
    span = _table(db, "fares")
    db.sql("CREATE USER carol")
    db.sql("GRANT SELECT ON fares TO carol")
    carol_certs = make_certs_dir(certs.parent, users=("carol",))
    with _connect(db, carol_certs, "carol") as carol:
        feed = _Follower(carol.rangefeed(span, carol.now(), values=False))
        feed.next_of(Checkpoint)
        db.sql("DROP USER carol")
        ended = feed.next_of(PermissionDeniedError)
        assert "user carol does not have SELECT privilege on relation fares" in str(ended)
        feed.feed.close()
