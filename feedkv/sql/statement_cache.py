"""A bounded cache of parsed statements that leaves nothing for the cyclic GC.

sqlglot links every node of a tree to its parent, so each parsed statement is a web of
reference cycles. A tree the cache drops is not freed by reference counting: it waits
for CPython's cyclic GC, and once more texts than the cache holds come by (an ORM's
generated SQL, literal values in the text), every new text hands the GC a tree, whose
collections then stop every thread of the process.

So the cache cuts the links from children to parents of a statement it drops, when
nothing else holds it (:func:`retire`), and reference counting frees the tree at once.
A statement held elsewhere is left whole, as its holder may still read a node's parent
while planning it: a statement running, a session's plan of it (``Session.plan`` keeps
the statement with the plan), a wire protocol's prepared statement. Whoever drops it
last then leaves it to the GC, or retires it too (``Session.plan`` does).

Holding is told by the statement object's reference count (CPython's): exact, and
cheap, where asking the GC for its referrers would scan the whole heap. A node of a
tree held without its statement is not seen; feedkv keeps none so.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

from sqlglot import exp

__all__ = ["StatementCache", "retire"]

V = TypeVar("V")


class StatementCache(Generic[V]):
    """``make(*args)``, kept for the ``maxsize`` argument tuples used most recently
    (as ``functools.lru_cache``; thread-safe, and two threads missing at once may both
    make the value, one of which is kept). ``statements_of(value)`` lists the statements
    a value holds, which are retired when the value is dropped."""

    def __init__(
        self,
        make: Callable[..., V],
        maxsize: int,
        statements_of: Callable[[V], list[Any]],
    ) -> None:
        self._make = make
        self._maxsize = maxsize
        self._statements_of = statements_of
        self._entries: OrderedDict[tuple[Hashable, ...], V] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, *args: Hashable) -> V:
        with self._lock:
            found = self._entries.get(args)
            if found is not None:
                self._entries.move_to_end(args)
                return found
        value = self._make(*args)  # NB: outside the lock: parsing takes a while
        dropped: list[Any] = []
        with self._lock:
            kept = self._entries.setdefault(args, value)
            self._entries.move_to_end(args)
            while len(self._entries) > self._maxsize:
                dropped += self._evict_oldest()
        if kept is not value:
            dropped += self._statements_of(value)  # another thread's made it first
        del value
        retire(dropped)
        return kept

    def _evict_oldest(self) -> list[Any]:
        """Drop the least recently used entry; its statements (the value itself dies
        when this returns)."""
        _args, value = self._entries.popitem(last=False)
        return self._statements_of(value)

    def cache_clear(self) -> None:
        """Drop every entry, retiring their statements."""
        dropped: list[Any] = []
        with self._lock:
            while self._entries:
                dropped += self._evict_oldest()
        retire(dropped)

    def __len__(self) -> int:
        return len(self._entries)


def retire(statements: list[Any]) -> None:
    """Cut the parent links of the trees of those ``statements`` that nothing holds
    but this list (the caller has dropped its every other reference to them), so that
    they are freed as the list is. NB: the list is emptied."""
    for i in range(len(statements)):
        # The list's reference and the call's argument: no one else holds it.
        if sys.getrefcount(statements[i]) <= 2:
            _cut(statements[i])
    statements.clear()


def _cut(value: object) -> None:
    """Unlink every sqlglot node in ``value`` (a statement, the dataclasses and
    collections inside it) from its parent: each node's whole tree, from its root (a
    statement keeps parts of the tree it was parsed from, whose root it does not hold)."""
    if isinstance(value, exp.Expr):
        root: exp.Expr = value
        while root.parent is not None:
            root = root.parent
        for node in root.walk():
            node.parent = None
    elif isinstance(value, tuple | list):
        for item in value:
            _cut(item)
    elif isinstance(value, dict):
        for item in value.values():
            _cut(item)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            _cut(getattr(value, field.name))
