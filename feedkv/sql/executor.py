"""Running one statement: its handler, chosen by the statement's type
(:mod:`feedkv.sql.ddl` for schema and cluster statements, :mod:`feedkv.sql.query`
for queries, :mod:`feedkv.sql.dml` for writes), in an
:class:`~feedkv.sql.execution.Execution`; errors of the layers below become SQL errors
with a SQLSTATE.
"""

from __future__ import annotations

import decimal
from collections.abc import Callable
from typing import Any

from feedkv.errors import InvalidArgumentError, InvalidKeyError, SQLError, ValueTooLargeError
from feedkv.sql import (
    alter_type,
    copy_rows,
    cursor_statements,
    ddl,
    dml,
    explain,
    query,
    session_activity,
)
from feedkv.sql import statements as st
from feedkv.sql.execution import Execution, Result

__all__ = ["LEASED", "run"]

_HANDLERS: dict[type, Callable[[Execution, Any], Result]] = {
    **ddl.HANDLERS,
    **alter_type.HANDLERS,
    **query.HANDLERS,
    **dml.HANDLERS,
    **copy_rows.HANDLERS,
    **explain.HANDLERS,
    **session_activity.HANDLERS,
    **cursor_statements.HANDLERS,
}
LEASED = (
    st.Select | st.Insert | st.Update | st.Delete | st.CopyRows
)  # may run on leased descriptors
_LEASED = LEASED


def run(execution: Execution, statement: st.Statement) -> Result:
    """Run ``statement`` in ``execution``; errors of the layers below become SQL errors."""
    handler: Callable[[Execution, Any], Result] | None = _HANDLERS.get(type(statement))
    if handler is None:
        raise SQLError("0A000", f"unsupported statement: {statement.text[:60]}")
    execution.run_nested = run
    execution.leasing = (execution.autocommit or execution.lease_in_txn) and isinstance(
        statement, _LEASED
    )
    try:
        return handler(execution, statement)
    except InvalidKeyError as exc:
        raise SQLError("54000", f"primary key too long: {exc}") from None
    except ValueTooLargeError as exc:
        raise SQLError("54000", f"row too large: {exc}") from None
    except InvalidArgumentError as exc:
        code = "22021" if "Unicode" in str(exc) else "22023"
        raise SQLError(code, str(exc)) from None
    except RecursionError:
        raise SQLError("54001", "statement too complex: it nests too deeply") from None
    except decimal.DecimalException:
        raise SQLError("22003", "numeric value out of range") from None
    except TypeError as exc:  # ordering values that have no order (JSONB)
        raise SQLError("42883", f"values cannot be compared: {exc}") from None
