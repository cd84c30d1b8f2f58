"""Coverage-guided fuzz targets (atheris, libFuzzer's engine for Python) for the inputs
a client reaches: SQL statements run by a user who may only read, changefeed options,
sink URIs, the gRPC batch decoder and the SQL wire messages. Each target turns libFuzzer's
bytes into an input, and takes feedkv's clear errors as answers; any other exception is
a crash, which libFuzzer reports with the input and a non-zero exit.

Run as ``python tests/security/atheris_targets.py TARGET -runs=N [libFuzzer flags]``
(``test_atheris_fuzz.py`` does). The SQL target checks every few hundred inputs that the
table it reads is as it began: a statement that changed it is a crash too.
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["feedkv"]):
    import feedkv
    from feedkv.changefeed.options import OPTION_NAMES, parse_options
    from feedkv.changefeed.sink import parse_sink_uri
    from feedkv.errors import FeedKVError, InvalidArgumentError, SQLError
    from feedkv.kv.proto import feedkv_pb2 as pb
    from feedkv.kv.store import StoreConfig
    from feedkv.kv.wire import batch_request_from_proto, parse_message
    from feedkv.pgwire import messages as m
    from feedkv.testing.fuzz_seeds import NOW, batch_requests

ROWS = [(1, "a", 1.5), (2, "b", None), (3, None, -2.0)]
CHECK_EVERY = 300
# pieces of the language, so that most inputs get past the tokenizer
WORDS = [
    "SELECT", "FROM", "WHERE", "INSERT", "INTO", "VALUES", "UPDATE", "SET", "DELETE",
    "UPSERT", "ON", "CONFLICT", "DO", "NOTHING", "excluded", "GROUP", "BY", "ORDER", "LIMIT",
    "AND", "OR", "NOT", "IS", "NULL", "IN", "LIKE", "CASE", "WHEN", "THEN", "ELSE", "END",
    "AS", "CAST", "JOIN", "t", "t.1", "excluded.3", "k", "v", "f", "t.k", "count(*)",
    "sum(f)", "now()", "(", ")", ",", "*", "+", "-", "/", "=", "<", "||", "::", "INT",
    "STRING", "'x'", "1", "0", "-1", "1e309", "9223372036854775808", "TRUE", "ARRAY[1,2]",
    "'{}'::JSONB", "->", ";", "CHANGEFEED", "FOR", "WITH", "GRANT", "REVOKE", "ALL", "TO",
    "root", "reader", "SHOW", "GRANTS", "CREATE", "DROP", "TABLE", "USER", "ALTER",
    "TRUNCATE", "RETURNING", "BEGIN", "COMMIT", "ROLLBACK", "AS OF SYSTEM TIME", "$1",
]  # fmt: skip
SCHEMES = ["kafka", "webhook-https", "file", "nodelocal", "s3", "gs", "null", "iceberg", ""]


def sql_target() -> Callable[[bytes], None]:
    config = StoreConfig(closed_ts_interval_s=0.05, sync=False)
    db = feedkv.connect(Path(tempfile.mkdtemp(prefix="atheris-sql-")) / "store", config=config)
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING, f FLOAT)")
    for row in ROWS:
        db.sql("INSERT INTO t VALUES ($1, $2, $3)", *row)
    db.sql("CREATE USER reader")
    db.sql("GRANT SELECT ON TABLE t TO reader")
    reader = db.session(user="reader")
    runs = [0]

    def one(data: bytes) -> None:
        fdp = atheris.FuzzedDataProvider(data)
        if fdp.ConsumeBool():
            words = [WORDS[fdp.ConsumeIntInRange(0, len(WORDS) - 1)] for _ in range(12)]
            statement = " ".join(words[: fdp.ConsumeIntInRange(1, 12)])
        else:
            statement = fdp.ConsumeUnicodeNoSurrogates(120)
        try:
            reader.execute(statement, *((7,) if "$1" in statement else ()))
        except FeedKVError:
            pass
        finally:
            if reader.in_transaction:
                reader.execute("ROLLBACK")
        runs[0] += 1
        if runs[0] % CHECK_EVERY == 0:
            rows = [tuple(r) for r in db.sql("SELECT k, v, f FROM t ORDER BY k").rows]
            if rows != ROWS:
                raise AssertionError(f"the reader changed the table: {rows}")

    return one


def options_target(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    names = sorted(OPTION_NAMES)
    given: list[tuple[str, str | None]] = []
    for _ in range(fdp.ConsumeIntInRange(0, 5)):
        name = names[fdp.ConsumeIntInRange(0, len(names) - 1)]
        value = fdp.ConsumeUnicodeNoSurrogates(16) if fdp.ConsumeBool() else None
        given.append((name, value))
    try:
        parse_options(given, now=NOW)
    except SQLError as exc:
        if exc.code != "22023":
            raise


def sink_uri_target(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    scheme = SCHEMES[fdp.ConsumeIntInRange(0, len(SCHEMES) - 1)]
    uri = f"{scheme}://{fdp.ConsumeUnicodeNoSurrogates(80)}"
    try:
        parse_sink_uri(uri, parse_options([], now=NOW))
    except SQLError as exc:
        if exc.code != "22023":
            raise


BATCHES = batch_requests()


def batch_request_target(data: bytes) -> None:
    """A valid batch with bytes overwritten and cut, or the fuzzer's bytes alone."""
    fdp = atheris.FuzzedDataProvider(data)
    which = fdp.ConsumeIntInRange(0, len(BATCHES))
    if which == len(BATCHES):
        message = fdp.ConsumeBytes(300)
    else:
        mutated = bytearray(BATCHES[which])
        for _ in range(fdp.ConsumeIntInRange(0, 6)):
            mutated[fdp.ConsumeIntInRange(0, len(mutated) - 1)] = fdp.ConsumeInt(1) & 0xFF
        message = bytes(mutated[: fdp.ConsumeIntInRange(0, len(mutated))])
    with contextlib.suppress(InvalidArgumentError):
        batch_request_from_proto(parse_message(pb.BatchRequest, message))


def pgwire_target(data: bytes) -> None:
    decoder = m.Decoder(1 << 10)
    if data[:1] != b"\x00":  # the typed phase; else a startup packet
        decoder.started()
    decoder.feed(data[1:])
    with contextlib.suppress(m.ProtocolViolation):
        while decoder.next() is not None:
            pass


TARGETS: dict[str, Callable[[], Callable[[bytes], None]]] = {
    "sql": sql_target,
    "options": lambda: options_target,
    "sink_uri": lambda: sink_uri_target,
    "batch_request": lambda: batch_request_target,
    "pgwire": lambda: pgwire_target,
}


def main() -> None:
    target = TARGETS[sys.argv[1]]()
    atheris.Setup([sys.argv[0], *sys.argv[2:]], target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
