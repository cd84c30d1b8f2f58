"""Following the users and grants, so a node can end what a user may no longer do.

A user's rangefeed is checked against the grants when it is registered
(:mod:`feedkv.sql.read_access`); a ``REVOKE`` or ``DROP USER`` later must end it too,
as a read made after it is refused. Checking every event or checkpoint would cost a read
per registration every few hundred milliseconds; instead a node follows the catalog's
users and grants (:func:`~feedkv.sql.catalog.access_spans`) with one rangefeed of its
own, and on each change calls ``on_change`` (the rangefeed service's recheck), which
checks its running registrations again. A burst of changes gives one call at a time,
and at least one call after the last change: a change seen while ``on_change`` runs
calls it again once it returns.

``on_change`` is also called once the feed has caught up (its first checkpoint): a
change made before the feed started, and after a registration's check, is not missed.
If the feed fails (a node away), the watch opens it again after ``retry_s``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from feedkv.errors import FeedKVError
from feedkv.rangefeed.event import Checkpoint, Value
from feedkv.rangefeed.feed_client import FeedClient
from feedkv.sql import catalog

__all__ = ["GrantWatch"]

log = logging.getLogger(__name__)


class GrantWatch:
    """Calls ``on_change()`` after each change of the users or grants read through
    ``db``, from a thread of its own, until :meth:`close`."""

    def __init__(
        self, db: FeedClient, on_change: Callable[[], None], *, retry_s: float = 1.0
    ) -> None:
        self._db = db
        self._on_change = on_change
        self._retry_s = retry_s
        self._closed = threading.Event()
        self._changed = threading.Event()
        self._lock = threading.Lock()
        self._feed: object | None = None
        self._follower = threading.Thread(target=self._follow, name="grant-watch", daemon=True)
        self._caller = threading.Thread(target=self._call, name="grant-recheck", daemon=True)
        self._follower.start()
        self._caller.start()

    def close(self) -> None:
        self._closed.set()
        self._changed.set()
        with self._lock:
            feed = self._feed
        close = getattr(feed, "close", None)
        if close is not None:
            close()

    def _follow(self) -> None:
        while not self._closed.is_set():
            try:
                feed = self._db.rangefeed(catalog.access_spans(), self._db.now())
                with self._lock:
                    self._feed = feed
                if self._closed.is_set():
                    feed.close()
                    return
                caught_up = False
                for event in feed:
                    if isinstance(event, Value) or (
                        isinstance(event, Checkpoint) and not caught_up
                    ):
                        caught_up = caught_up or isinstance(event, Checkpoint)
                        self._changed.set()
            except FeedKVError as exc:
                if self._closed.is_set():
                    return
                log.info("the watch on users and grants failed (%s); opening it again", exc)
            self._closed.wait(self._retry_s)

    def _call(self) -> None:
        while True:
            self._changed.wait()
            if self._closed.is_set():
                return
            self._changed.clear()
            try:
                self._on_change()
            except FeedKVError as exc:
                log.warning("rechecking after a change of the grants failed: %s", exc)
