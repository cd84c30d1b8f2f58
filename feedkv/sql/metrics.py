"""SQL metrics, as CockroachDB names them: statements by type (``sql_select_count``,
``sql_insert_count``, ``sql_update_count``, ``sql_delete_count``, ``sql_ddl_count``,
``sql_misc_count``; ``sql_query_count`` for all of them, ``sql_failure_count`` for those
that failed), transactions (``sql_txn_begin_count``, ``sql_txn_commit_count``,
``sql_txn_rollback_count``) and the latency of each statement, ``sql_service_latency``
(a histogram in nanoseconds; statements sent together in one implicit transaction are
one observation). The node adds ``sql_conns`` (its open SQL connections)."""

from __future__ import annotations

from functools import cache

from feedkv.sql import statements as st
from feedkv.sql.statement_kinds import StatementKind
from feedkv.util.metrics import Counter, Registry

__all__ = ["SQLMetrics", "unregistered_sql_metrics"]

_DDL = StatementKind(
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


class SQLMetrics:
    def __init__(self, registry: Registry | None = None) -> None:
        r = registry or Registry()
        self.enabled = r.enabled  # False: every metric records nothing
        by_type = {
            kind: r.counter(f"sql_{kind}_count", f"Number of SQL {kind.upper()} statements")
            for kind in ("select", "insert", "update", "delete")
        }
        self.ddl = r.counter("sql_ddl_count", "Number of SQL DDL statements")
        self.misc = r.counter(
            "sql_misc_count", "Number of other SQL statements (SHOW, SET, jobs, changefeeds)"
        )
        # NB: each statement is counted once, in its type's counter; their sum, read at
        # scrape time, saves every statement a second increment
        r.sampled(
            "sql_query_count",
            "Number of SQL statements",
            self._statements,
            kind="counter",
        )
        self.failure = r.counter(
            "sql_failure_count", "Number of statements resulting in a planning or runtime error"
        )
        self.txn_begin = r.counter("sql_txn_begin_count", "Number of SQL transaction BEGIN")
        self.txn_commit = r.counter("sql_txn_commit_count", "Number of SQL transaction COMMIT")
        self.txn_rollback = r.counter(
            "sql_txn_rollback_count", "Number of SQL transaction ROLLBACK"
        )
        # NB: observed for each statement: a lean histogram (see feedkv.util.metrics)
        self.service_latency = r.lean_histogram(
            "sql_service_latency",
            "Latency of SQL request execution (nanoseconds), from parsing to the result",
        )
        self._by_class: dict[type[st.Statement], Counter] = {
            st.Select: by_type["select"],
            st.Insert: by_type["insert"],
            st.Update: by_type["update"],
            st.Delete: by_type["delete"],
            st.Begin: self.txn_begin,
            st.Commit: self.txn_commit,
            st.Rollback: self.txn_rollback,
        }

    def _statements(self) -> float:
        """Statements of every type (each type's counter counted once)."""
        return sum(c.value for c in (*self._by_class.values(), self.ddl, self.misc))

    def count(self, statement: st.Statement) -> None:
        """Count ``statement`` (before it runs) by its type."""
        counter = self._by_class.get(type(statement))
        if counter is None:
            counter = self.ddl if _DDL.holds(statement) else self.misc
        counter.inc()


@cache
def unregistered_sql_metrics() -> SQLMetrics:
    """The metrics of sessions that belong to no node: counted but not exposed."""
    return SQLMetrics()
