"""The SQL client: a :class:`~feedkv.rangefeed.feed_client.FeedClient` that also runs
SQL, as :class:`feedkv.DB` does. A changefeed into a SQL table and the SQL test kits
(:mod:`feedkv.testing`) are written against it."""

from __future__ import annotations

from typing import Any, Protocol

from feedkv.rangefeed.feed_client import FeedClient
from feedkv.sql.session import Result, Session

__all__ = ["SQLClient"]


class SQLClient(FeedClient, Protocol):
    def sql(self, statement: str, *params: Any) -> Result:
        """Run SQL as ``root`` in ``defaultdb`` (one session per thread); the last
        statement's result."""
        ...

    def session(self, *, user: str = "root", database: str = "defaultdb") -> Session:
        """A new SQL session."""
        ...
