"""A hostile input breaks nothing: generated inputs for the parsers a client reaches
(SQL statements and expressions, changefeed options, sink URIs, the gRPC batch decoder)
each get a clear error of feedkv's, never an uncaught exception, and leave the data as
it was. Each test tries a thousand or more inputs (hypothesis; the SQL wire messages'
own fuzz tests are in ``tests/pgwire/test_messages.py``, SCRAM's in ``test_scram.py``;
coverage-guided ones, with atheris, in ``test_atheris_fuzz.py``)."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import feedkv
from feedkv import DB
from feedkv.changefeed.options import OPTION_NAMES, parse_options
from feedkv.changefeed.sink import parse_sink_uri
from feedkv.errors import FeedKVError, InvalidArgumentError, SQLError
from feedkv.kv.proto import feedkv_pb2 as pb
from feedkv.kv.store import StoreConfig
from feedkv.kv.wire import batch_request_from_proto, parse_message
from feedkv.sql.session import Session
from feedkv.testing.fuzz_seeds import NOW, batch_requests

MANY = settings(max_examples=1000, deadline=None, suppress_health_check=list(HealthCheck))
ROWS = [(1, "a", 1.5), (2, "b", None), (3, None, -2.0)]

# SQL: statements and expressions made of the language's own pieces, so most get past
# the tokenizer into the parser, the planner and the evaluator
_WORDS = [
    "SELECT", "FROM", "WHERE", "INSERT", "INTO", "VALUES", "UPDATE", "SET", "DELETE",
    "UPSERT", "ON", "CONFLICT", "DO", "NOTHING", "excluded", "GROUP", "BY", "ORDER",
    "LIMIT", "OFFSET", "AND", "OR", "NOT", "IS", "NULL", "IN", "BETWEEN", "LIKE", "CASE",
    "WHEN", "THEN", "ELSE", "END", "AS", "CAST", "JOIN", "USING", "DISTINCT", "t", "t.1",
    "excluded.3", "k", "v", "f", "t.k", "t.v", "count(*)", "sum(f)", "max(k)", "now()",
    "lower(v)", "length(v)", "coalesce(v,'x')", "(", ")", ",", "*", "+", "-", "/", "%",
    "=", "<>", "<", ">=", "||", "::", "INT", "STRING", "FLOAT", "DECIMAL", "BYTES",
    "TIMESTAMP", "'x'", "'2024-01-01'", "1", "0", "-1", "1e309", "9223372036854775808",
    "2.5", "$1", "TRUE", "FALSE", "ARRAY[1,2]", "[1]", "'{}'::JSONB", "->", "->>", ";",
    "CHANGEFEED", "FOR", "WITH", "GRANT", "REVOKE", "ALL", "TO", "root", "SHOW", "GRANTS",
    "CREATE", "DROP", "TABLE", "USER", "ALTER", "PRIMARY", "KEY", "AS OF SYSTEM TIME",
    "TRUNCATE", "RETURNING",
]  # fmt: skip
# whole statements that write: the reader may run none of them, alone or in a soup
_WRITES = [
    "UPDATE t SET v = 'y'", "DELETE FROM t", "TRUNCATE t", "TRUNCATE TABLE t",
    "UPSERT INTO t VALUES (1, 'z', 0)", "INSERT INTO t VALUES (9, 'n', 0)",
    "INSERT INTO t VALUES (1, 'z', 0) ON CONFLICT (k) DO UPDATE SET v = excluded.v",
    "DROP TABLE t", "ALTER TABLE t DROP COLUMN v", "ALTER TABLE t RENAME TO u",
]  # fmt: skip
_EXPR_ATOMS = [
    "k", "v", "f", "t.k", "t.1", "excluded.3", "NULL", "1", "0", "-1", "2.5", "'x'", "''",
    "TRUE", "9223372036854775807", "1e308", "'2024-01-01'::TIMESTAMP", "'{\"a\":1}'::JSONB",
    "ARRAY[1,2]", "now()", "$1",
]  # fmt: skip
_BINARY = ["+", "-", "*", "/", "%", "=", "<>", "<", ">=", "AND", "OR", "||", "LIKE", "->"]
_FUNCTIONS = ["lower", "upper", "length", "abs", "coalesce", "greatest", "substr", "round"]

expressions = st.recursive(
    st.sampled_from(_EXPR_ATOMS),
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(_BINARY), inner).map(" ".join),
        st.tuples(st.sampled_from(["NOT", "-", ""]), inner).map(lambda p: f"{p[0]} ({p[1]})"),
        st.tuples(st.sampled_from(_FUNCTIONS), st.lists(inner, max_size=3)).map(
            lambda p: f"{p[0]}({', '.join(p[1])})"
        ),
        st.tuples(inner, st.sampled_from(["INT", "STRING", "FLOAT", "BOOL", "BYTES"])).map(
            lambda p: f"CAST({p[0]} AS {p[1]})"
        ),
        st.tuples(inner, inner, inner).map(
            lambda p: f"CASE WHEN {p[0]} THEN {p[1]} ELSE {p[2]} END"
        ),
    ),
    max_leaves=8,
)
token_soup = st.one_of(
    st.sampled_from(_WRITES),
    st.lists(st.sampled_from(_WORDS + _WRITES), min_size=1, max_size=14).map(" ".join),
)


@pytest.fixture(scope="module")
def fuzz_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DB]:
    """A node with table ``t`` and a user who may only read it: no generated statement
    may change it, so it must end as it began."""
    config = StoreConfig(closed_ts_interval_s=0.05, sync=False)
    db = feedkv.connect(tmp_path_factory.mktemp("fuzz") / "store", config=config)
    db.sql("CREATE TABLE t (k INT PRIMARY KEY, v STRING, f FLOAT)")
    for row in ROWS:
        db.sql("INSERT INTO t VALUES ($1, $2, $3)", *row)
    db.sql("CREATE USER reader")
    db.sql("GRANT SELECT ON TABLE t TO reader")
    yield db
    db.close()


@pytest.fixture(scope="module")
def reader(fuzz_db: DB) -> Session:
    return fuzz_db.session(user="reader")


def _run(session: Session, statement: str) -> None:
    try:
        # NB: the argument only where there is a placeholder for it: a statement given
        # one it does not take is refused (08P01) before it is run
        session.execute(statement, *((7,) if "$1" in statement else ()))
    except FeedKVError:
        pass  # a clear error; anything else fails the test
    finally:
        if session.in_transaction:
            session.execute("ROLLBACK")


@MANY
@given(statement=token_soup)
def test_generated_statements_get_clear_errors_and_change_nothing(
    fuzz_db: DB, reader: Session, statement: str
) -> None:
    _run(reader, statement)


@MANY
@given(expr=expressions)
def test_generated_expressions_evaluate_or_fail_clearly(
    fuzz_db: DB, reader: Session, expr: str
) -> None:
    _run(reader, f"SELECT {expr} FROM t WHERE {expr} IS NULL OR TRUE ORDER BY k")


def test_after_the_fuzzing_the_table_is_as_it_was(fuzz_db: DB) -> None:
    rows = fuzz_db.sql("SELECT k, v, f FROM t ORDER BY k").rows
    assert [tuple(row) for row in rows] == ROWS


_VALUES = st.one_of(
    st.none(),
    st.text(max_size=20),
    st.sampled_from(["yes", "no", "only", "10s", "-5s", "0s", "1h", "{}", '{"a": 1}', "json",
                     "avro", "1700000000000000000.0000000000", "now", "wrapped", "bare"]),
)  # fmt: skip
_NAMES = st.one_of(st.sampled_from(sorted(OPTION_NAMES)), st.text(max_size=12))


@MANY
@given(st.lists(st.tuples(_NAMES, _VALUES), max_size=6))
def test_changefeed_options_parse_or_fail_with_22023(given: list[tuple[str, str | None]]) -> None:
    try:
        parse_options(given, now=NOW)
    except SQLError as exc:
        assert exc.code == "22023", exc


_SCHEMES = ["kafka", "webhook-https", "file", "nodelocal", "s3", "gs", "null", "iceberg", "x", ""]


@MANY
@given(
    scheme=st.sampled_from(_SCHEMES),
    rest=st.text(max_size=40),
    query=st.lists(st.tuples(st.text(max_size=8), st.text(max_size=8)), max_size=4),
)
def test_sink_uris_parse_or_fail_with_22023(
    scheme: str, rest: str, query: list[tuple[str, str]]
) -> None:
    uri = f"{scheme}://{rest}" + ("?" + "&".join(f"{k}={v}" for k, v in query) if query else "")
    options = parse_options([], now=NOW)
    try:
        parse_sink_uri(uri, options)
    except SQLError as exc:
        assert exc.code == "22023", exc


_BATCHES = batch_requests()


@MANY
@given(
    which=st.integers(0, len(_BATCHES) - 1),
    seed=st.integers(0, 2**32),
    flips=st.integers(1, 6),
    cut=st.integers(0, 400),
)
def test_mutated_batch_requests_decode_or_fail_clearly(
    which: int, seed: int, flips: int, cut: int
) -> None:
    rng = random.Random(seed)
    data = bytearray(_BATCHES[which][: cut or None])
    for _ in range(flips):
        if data:
            data[rng.randrange(len(data))] = rng.randrange(256)
    with contextlib.suppress(InvalidArgumentError):
        batch_request_from_proto(parse_message(pb.BatchRequest, bytes(data)))


@MANY
@given(st.binary(max_size=300))
def test_random_bytes_as_batch_requests_decode_or_fail_clearly(data: bytes) -> None:
    with contextlib.suppress(InvalidArgumentError):
        batch_request_from_proto(parse_message(pb.BatchRequest, data))
