"""Session variables as CockroachDB names them: ``SET``, ``SHOW``, ``RESET``.

Drivers and ORMs set some on every connection (``application_name``,
``extra_float_digits``, ``client_encoding``...) and read others (``server_version``,
``transaction_isolation``); each is checked here and kept in its canonical spelling.
feedkv runs every transaction SERIALIZABLE: asking for a weaker level upgrades it, as
CockroachDB does while READ COMMITTED is not enabled. A value feedkv cannot honour is
refused (0A000) rather than accepted and ignored. Pure: no session, no I/O; the session
keeps the values (``database`` is its current database, checked there).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from feedkv.errors import SQLError
from feedkv.sql.time_zone import checked_zone

__all__ = [
    "CLUSTER_VERSION",
    "SERVER_VERSION",
    "VARIABLES",
    "Variable",
    "canonical_name",
    "checked_value",
]

SERVER_VERSION = "13.0.0"  # the PostgreSQL version CockroachDB reports to drivers
# The CockroachDB version feedkv answers as: version() says v23.1.0, and the cluster
# setting ``version`` (the cluster's active version) is 23.1.
CLUSTER_VERSION = "23.1"


@dataclass(frozen=True, slots=True)
class Variable:
    """A session variable: its value when not set, how a value is checked (returning
    its canonical spelling, or raising SQLError), and whether SET may change it."""

    default: str
    check: Callable[[str, str], str]  # (name, value) -> canonical value
    read_only: bool = False


def _any(name: str, value: str) -> str:
    return value


def _one_of(*allowed: str, canonical: str | None = None) -> Callable[[str, str], str]:
    def check(name: str, value: str) -> str:
        if value.strip().lower() not in {a.lower() for a in allowed}:
            raise SQLError(
                "0A000",
                f"{name} {value!r} is not supported; feedkv supports {', '.join(allowed)}",
            )
        return canonical if canonical is not None else value.strip().lower()

    return check


def _isolation(name: str, value: str) -> str:
    level = " ".join(value.lower().replace("_", " ").split())
    if level not in ("serializable", "read committed", "repeatable read", "snapshot"):
        raise SQLError("22023", f"invalid value for parameter {name}: {value!r}")
    return "serializable"  # NB: weaker levels are upgraded, as in CockroachDB


def _quality_of_service(name: str, value: str) -> str:
    level = value.strip().lower()
    if level not in ("background", "regular", "critical"):
        raise SQLError("22023", f'invalid value for parameter "{name}": "{value.strip()}"')
    return level


def _float_digits(name: str, value: str) -> str:
    try:
        digits = int(value)
    except ValueError:
        raise SQLError("22023", f"invalid value for parameter {name}: {value!r}") from None
    if not -15 <= digits <= 3:
        raise SQLError("22023", f"{name} must be between -15 and 3, not {digits}")
    return str(digits)


def _on_off(name: str, value: str) -> str:
    word = value.strip().lower()
    if word in ("on", "true", "yes", "1"):
        return "on"
    if word in ("off", "false", "no", "0"):
        return "off"
    raise SQLError("22023", f'parameter "{name}" requires a Boolean value')


_TIMEOUT_UNITS = {"us": 0.001, "ms": 1, "s": 1000, "sec": 1000, "m": 60_000, "min": 60_000,
                  "h": 3_600_000, "d": 86_400_000}  # fmt: skip
_TIMEOUT = re.compile(r"\s*(\d+(?:\.\d*)?)\s*([a-z]*)\s*")


def _timeout(name: str, value: str) -> str:
    """A timeout as CockroachDB shows it: whole milliseconds (``0``: none), at most
    PostgreSQL's 2147483647. A bare number is milliseconds, as in PostgreSQL; else a
    number and a unit (``500ms``, ``10s``, ``1min``, ``2h``)."""
    found = _TIMEOUT.fullmatch(value.lower())
    if found is None or found.group(2) not in ("", *_TIMEOUT_UNITS):
        raise SQLError(
            "22023", f"invalid value for parameter {name}: {value!r} (such as '10s' or '500ms')"
        )
    ms = int(float(found.group(1)) * _TIMEOUT_UNITS.get(found.group(2), 1))
    if ms > _MAX_TIMEOUT_MS:
        raise SQLError(
            "22023", f"{value} is outside the valid range for parameter {name} (0 .. 2147483647)"
        )
    return str(ms)


_MAX_TIMEOUT_MS = 2**31 - 1


def _row_count(name: str, value: str) -> str:
    try:
        rows = float(value)
    except ValueError:
        raise SQLError("22023", f"invalid value for parameter {name}: {value!r}") from None
    return format(rows, "g")


def _read_only(name: str, value: str) -> str:
    raise SQLError("55000", f'parameter "{name}" cannot be changed')


VARIABLES: dict[str, Variable] = {
    "application_name": Variable("", _any),
    # CockroachDB's: on commits an explicit transaction before a schema change in it.
    # feedkv runs a schema change inside the transaction, which is off.
    "autocommit_before_ddl": Variable("off", _one_of("off", "false", canonical="off")),
    "client_encoding": Variable("UTF8", _one_of("UTF8", "UTF-8", "unicode", canonical="UTF8")),
    "database": Variable("", _any),  # the session's current database: see Session
    "datestyle": Variable("ISO, MDY", _one_of("ISO", "ISO, MDY", canonical="ISO, MDY")),
    "default_transaction_isolation": Variable("serializable", _isolation),
    "default_transaction_priority": Variable("normal", _one_of("low", "normal", "high")),
    # CockroachDB's: the admission-control priority of the session's work under overload.
    # feedkv admits all work at once, with no queue to order, so each level is served as
    # CockroachDB serves it when nothing waits.
    "default_transaction_quality_of_service": Variable("regular", _quality_of_service),
    "default_transaction_read_only": Variable("off", _on_off),
    # CockroachDB's: on, a query that reads a whole table fails (feedkv.sql.query)
    "disallow_full_table_scans": Variable("off", _on_off),
    # CockroachDB's: the table size (by statistics) past which a full scan is refused.
    # feedkv keeps no statistics, so every table counts as large, as CockroachDB counts
    # one it has none for.
    "large_full_scan_rows": Variable("0", _row_count),
    # CockroachDB's: on runs each transaction AS OF SYSTEM TIME follower_read_timestamp().
    # feedkv reads at the transaction's own timestamp, which is off.
    "default_transaction_use_follower_reads": Variable(
        "off", _one_of("off", "false", canonical="off")
    ),
    # an UPDATE's or DELETE's row read locks the rows it will write (feedkv.kv.lock_table)
    "enable_implicit_select_for_update": Variable("on", _on_off),
    "extra_float_digits": Variable("0", _float_digits),
    "integer_datetimes": Variable("on", _read_only, read_only=True),
    "intervalstyle": Variable("postgres", _one_of("postgres")),
    # each statement's waits for another transaction's row lock or intent end with 55P03
    # once one has lasted this long (CockroachDB's; feedkv.kv.api.Header.lock_timeout_ms)
    "lock_timeout": Variable("0", _timeout),
    "search_path": Variable("$user, public", _any),
    "server_encoding": Variable("UTF8", _read_only, read_only=True),
    "server_version": Variable(SERVER_VERSION, _read_only, read_only=True),
    "server_version_num": Variable("130000", _read_only, read_only=True),
    "session_user": Variable("", _read_only, read_only=True),  # the session's user
    "standard_conforming_strings": Variable("on", _one_of("on")),
    # the session arms its interrupt with it for each statement (feedkv.sql.interrupt):
    # 57014 once it has passed
    "statement_timeout": Variable("0", _timeout),
    # UTC, an IANA zone or an offset (feedkv.sql.time_zone); the session runs each
    # statement in it
    "timezone": Variable("UTC", checked_zone),
    "transaction_isolation": Variable("serializable", _isolation),
    # NB: the open transaction's (the session keeps it); outside one, the default's
    "transaction_priority": Variable("normal", _one_of("low", "normal", "high")),
    # The session's transaction state, as CockroachDB names it: NoTxn, Open, Aborted or
    # CommitWait (after RELEASE SAVEPOINT cockroach_restart); the session answers it.
    "transaction_status": Variable("NoTxn", _read_only, read_only=True),
    # NB: the open transaction's (the session keeps it); outside one, the default's
    "transaction_read_only": Variable("off", _on_off),
    # CockroachDB's: off runs every query row by row. Here on lets an analytic SELECT
    # take the vectorized path (feedkv.sql.analytic) when it answers as the other would.
    "vectorize": Variable("on", _one_of("on", "off")),
}
_ALIASES = {"time zone": "timezone", "transaction isolation level": "transaction_isolation"}


def canonical_name(name: str) -> str:
    """The variable ``name`` (any case, or an alias such as ``TIME ZONE``) names;
    42704 names an unknown one."""
    key = " ".join(name.lower().split())
    key = _ALIASES.get(key, key)
    if key not in VARIABLES:
        raise SQLError("42704", f'unrecognized configuration parameter "{name}"')
    return key


def checked_value(name: str, value: str) -> str:
    """``value`` for variable ``name`` (canonical), checked and canonical."""
    return VARIABLES[name].check(name, value)
