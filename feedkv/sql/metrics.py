"""SQL metrics, as CockroachDB names them: statements executed successfully by type
(``sql_select_count``, ``sql_insert_count``, ``sql_update_count``, ``sql_delete_count``,
``sql_ddl_count``, ``sql_misc_count``), ``sql_failure_count`` for those that failed (a
batch sent together counts once), ``sql_query_count`` for all of them; transactions
(``sql_txn_begin_count``, ``sql_txn_commit_count``, ``sql_txn_rollback_count``) and the
latency of each statement, ``sql_service_latency`` (a histogram in nanoseconds;
statements sent together in one implicit transaction are one observation). The node
adds ``sql_conns`` (its open SQL connections)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

from feedkv.sql import statements as st
from feedkv.util.metrics import Registry

__all__ = ["SQLMetrics", "unregistered_sql_metrics"]

_DDL = (
    st.CreateDatabase
    | st.DropDatabase
    | st.CreateTable
    | st.DropTable
    | st.AddColumn
    | st.AlterTableActions
    | st.AlterColumn
    | st.DropColumn
    | st.Truncate
    | st.CreateUser
    | st.AlterUserPassword
    | st.DropUser
    | st.GrantRole
    | st.GrantPrivileges
)


# Each statement type's place in SQLMetrics' tally, and its metric.
_TALLIED = (
    ("sql_select_count", "Number of SQL SELECT statements successfully executed"),
    ("sql_insert_count", "Number of SQL INSERT statements successfully executed"),
    ("sql_update_count", "Number of SQL UPDATE statements successfully executed"),
    ("sql_delete_count", "Number of SQL DELETE statements successfully executed"),
    ("sql_ddl_count", "Number of SQL DDL statements successfully executed"),
    (
        "sql_misc_count",
        "Number of other SQL statements (SHOW, SET, jobs, changefeeds) successfully executed",
    ),
    ("sql_txn_begin_count", "Number of SQL transaction BEGIN statements successfully executed"),
    ("sql_txn_commit_count", "Number of SQL transaction COMMIT statements successfully executed"),
    (
        "sql_txn_rollback_count",
        "Number of SQL transaction ROLLBACK statements successfully executed",
    ),
    ("sql_failure_count", "Number of statements resulting in a planning or runtime error"),
)
_DDL_INDEX, _MISC_INDEX = 4, 5
_FAILED_INDEX = len(_TALLIED) - 1  # statements that failed, whatever their type


class _Places(dict[type, int]):
    """Each statement class's place in the tally: those of a type of their own listed,
    any other's (DDL or the rest) found at its first statement and kept. Thread-safe:
    two threads that ask of a new class at once store the same answer."""

    def __missing__(self, cls: type) -> int:
        place = self[cls] = _DDL_INDEX if issubclass(cls, _DDL) else _MISC_INDEX
        return place


_PLACES = _Places(
    {
        st.Select: 0,
        st.Insert: 1,
        st.Update: 2,
        st.Delete: 3,
        st.Begin: 6,
        st.Commit: 7,
        st.Rollback: 8,
    }
)


class SQLMetrics:
    """A node's SQL metrics. A statement is counted by its type (or as failed) and timed
    in one call (:meth:`ran`), without a lock: the counts in a :class:`Tally` that the
    counters read at scrape time, the latency in a lean histogram."""

    def __init__(self, registry: Registry | None = None) -> None:
        r = registry or Registry()
        self.enabled = r.enabled  # False: every metric records nothing
        self._tally = r.tally(len(_TALLIED))
        for index, (name, documentation) in enumerate(_TALLIED):
            self._tallied(r, index, name, documentation)
        # NB: each statement is counted once, in its type's count; their sum, read at
        # scrape time, saves every statement a second increment
        r.sampled("sql_query_count", "Number of SQL statements", self._statements, kind="counter")
        # NB: observed for each statement: a lean histogram (see feedkv.util.metrics)
        self.service_latency = r.lean_histogram(
            "sql_service_latency",
            "Latency of SQL request execution (nanoseconds), from parsing to the result",
        )

    def _tallied(self, r: Registry, index: int, name: str, documentation: str) -> None:
        """A counter read from the tally's ``index`` at scrape time."""
        tally = self._tally
        r.sampled(name, documentation, lambda: tally.counts()[index], kind="counter")

    def _statements(self) -> float:
        """Statements of every type."""
        return sum(self._tally.counts())

    def ran(self, statement: st.Statement, nanos: int, *, failed: bool = False) -> None:
        """Count ``statement`` by its type (or as ``failed``) and observe its latency
        (``nanos``): what every statement a session runs alone costs the metrics."""
        place = _FAILED_INDEX if failed else _PLACES[type(statement)]
        self.service_latency.observe_tallied(nanos, self._tally, place)

    def ran_together(
        self, statements: Sequence[st.Statement], nanos: int, *, failed: bool = False
    ) -> None:
        """Count each of ``statements`` by its type (or all as one ``failed``) and
        observe their latency together (``nanos``): statements sent as one implicit
        transaction are one observation."""
        if failed:
            self.service_latency.observe_tallied(nanos, self._tally, _FAILED_INDEX)
            return
        *counted, last = statements
        for statement in counted:
            self._tally.add(_PLACES[type(statement)])
        self.service_latency.observe_tallied(nanos, self._tally, _PLACES[type(last)])


@cache
def unregistered_sql_metrics() -> SQLMetrics:
    """The metrics of sessions that belong to no node: counted but not exposed."""
    return SQLMetrics()
