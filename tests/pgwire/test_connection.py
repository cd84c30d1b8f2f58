"""The connection state machine, driven with raw bytes (no socket): what each phase
answers, portal suspension, skipping to Sync after an error, the transaction status."""

from __future__ import annotations

import struct

import pytest

from feedkv import DB
from feedkv.pgwire.auth import LoopbackTrust
from feedkv.pgwire.connection import Connection
from feedkv.pgwire.types import OID
from feedkv.testing.pgwire_client import (
    backend_messages,
    bind,
    error_fields,
    frontend,
    parse,
    startup,
)


def query(text: str) -> bytes:
    return frontend(b"Q", text.encode() + b"\0")


def execute(portal: str = "", max_rows: int = 0) -> bytes:
    return frontend(b"E", portal.encode() + b"\0" + struct.pack("!i", max_rows))


def describe(kind: str, name: str = "") -> bytes:
    return frontend(b"D", kind.encode() + name.encode() + b"\0")


SYNC = frontend(b"S")


class Wire:
    """A connection and the messages it answers to each input."""

    def __init__(self, db: DB, peer_host: str | None = "127.0.0.1") -> None:
        self.db = db  # NB: another Wire on it is another client
        self.cancels: list[tuple[int, int]] = []
        self.conn = Connection(
            lambda user, database: db.session(user=user, database=database),
            LoopbackTrust(),
            process_id=42,
            secret=1234,
            peer_host=peer_host,
            on_cancel=lambda pid, secret: self.cancels.append((pid, secret)),
            max_message_bytes=1 << 16,
        )

    def send(self, *data: bytes) -> list[tuple[bytes, bytes]]:
        return backend_messages(self.conn.receive(b"".join(data)))

    def kinds(self, *data: bytes) -> bytes:
        return b"".join(kind for kind, _ in self.send(*data))


@pytest.fixture
def wire(db: DB) -> Wire:
    w = Wire(db)
    w.send(startup())
    w.send(query("CREATE TABLE t (id INT PRIMARY KEY, s STRING)"))
    w.send(query("INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c')"))
    return w


def test_startup_answers_ok_parameters_key_and_ready(db: DB) -> None:
    w = Wire(db)
    answers = w.send(startup())
    assert answers[0] == (b"R", struct.pack("!i", 0))
    statuses = dict(body[:-1].decode().split("\0") for kind, body in answers if kind == b"S")
    assert statuses["server_version"] == "13.0.0"
    assert statuses["client_encoding"] == "UTF8"
    assert statuses["TimeZone"] == "UTC"
    assert (b"K", struct.pack("!ii", 42, 1234)) in answers
    assert answers[-1] == (b"Z", b"I")


def test_ssl_and_gssenc_requests_are_declined_and_startup_goes_on(db: DB) -> None:
    w = Wire(db)
    assert w.conn.receive(struct.pack("!ii", 8, 80877103)) == b"N"
    assert w.conn.receive(struct.pack("!ii", 8, 80877104)) == b"N"
    assert w.send(startup())[-1] == (b"Z", b"I")


def test_a_cancel_request_is_passed_on_and_its_connection_closes(db: DB) -> None:
    w = Wire(db)
    assert w.conn.receive(struct.pack("!iiii", 16, 80877102, 7, 99)) == b""
    assert w.cancels == [(7, 99)]
    assert w.conn.closed


def test_a_client_off_loopback_is_refused_with_28000(db: DB) -> None:
    w = Wire(db, peer_host="10.1.2.3")
    [(kind, body)] = w.send(startup())
    assert kind == b"E"
    fields = error_fields(body)
    assert (fields["S"], fields["C"]) == ("FATAL", "28000")
    assert "loopback" in fields["M"]
    assert w.conn.closed


def test_a_startup_without_a_user_is_refused(db: DB) -> None:
    w = Wire(db)
    body = struct.pack("!i", 3 << 16) + b"database\0defaultdb\0\0"
    [(kind, fields)] = w.send(struct.pack("!i", len(body) + 4) + body)
    assert kind == b"E" and error_fields(fields)["C"] == "28000"
    assert w.conn.closed


def test_an_empty_query_gets_empty_query_response(wire: Wire) -> None:
    assert wire.kinds(query("")) == b"IZ"
    assert wire.kinds(query(" ; ")) == b"IZ"


def test_a_simple_query_answers_description_rows_and_tag(wire: Wire) -> None:
    answers = wire.send(query("SELECT id, s FROM t WHERE id < 3"))
    assert [kind for kind, _ in answers] == [b"T", b"D", b"D", b"C", b"Z"]
    assert answers[1][1] == struct.pack("!hi", 2, 1) + b"1" + struct.pack("!i", 1) + b"a"
    assert answers[3][1] == b"SELECT 2\0"


def test_the_status_is_t_in_a_transaction_and_e_after_a_failure_until_rollback(
    wire: Wire,
) -> None:
    assert wire.send(query("BEGIN"))[-1] == (b"Z", b"T")
    assert wire.send(query("SELECT * FROM nowhere"))[-1] == (b"Z", b"E")
    answers = wire.send(query("SELECT 1"))
    assert error_fields(answers[0][1])["C"] == "25P02"
    assert answers[-1] == (b"Z", b"E")
    assert wire.send(query("ROLLBACK"))[-1] == (b"Z", b"I")


def test_execute_with_a_row_limit_suspends_the_portal_until_the_rows_run_out(
    wire: Wire,
) -> None:
    assert wire.kinds(parse("", "SELECT id FROM t ORDER BY id"), bind("", ""), describe("P")) == (
        b"12T"
    )
    first = wire.send(execute("", 2))
    assert [kind for kind, _ in first] == [b"D", b"D", b"s"]
    rest = wire.send(execute("", 2))
    assert [kind for kind, _ in rest] == [b"D", b"C"]
    assert rest[0][1].endswith(b"3")
    assert wire.kinds(SYNC) == b"Z"


def test_after_an_error_every_message_up_to_sync_is_skipped(wire: Wire) -> None:
    answers = wire.send(
        parse("", "SELECT * FROM nowhere"),
        bind("", ""),
        execute(),
        parse("ok", "INSERT INTO t VALUES (9, 'z')"),
        bind("", "ok"),
        execute(),
        SYNC,
    )
    # As PostgreSQL: names are resolved at Parse, so the Parse fails
    assert [kind for kind, _ in answers] == [b"E", b"Z"]
    assert error_fields(answers[0][1])["C"] == "42P01"
    assert wire.kinds(query("SELECT * FROM t WHERE id = 9")) == b"TCZ"  # nothing inserted


def test_the_executes_before_a_sync_are_one_transaction(wire: Wire) -> None:
    """As PostgreSQL's implicit transaction: a batch that fails part way writes nothing;
    one whose Sync comes later (another read) commits at that Sync."""
    insert = parse("ins", "INSERT INTO t VALUES ($1, $2)")
    rows = [bind("", "ins", [str(k).encode(), b"v"]) + execute() for k in (4, 1, 5)]
    answers = wire.send(insert, *rows, SYNC)
    assert [kind for kind, _ in answers] == [b"1", b"2", b"C", b"2", b"E", b"Z"]
    assert error_fields(answers[4][1])["C"] == "23505"
    assert answers[-1] == (b"Z", b"I")
    assert wire.kinds(query("SELECT * FROM t WHERE id > 3")) == b"TCZ"  # 4 rolled back
    assert wire.kinds(rows[0], rows[2]) == b"2C2C"  # NB: no Sync yet
    assert wire.send(SYNC) == [(b"Z", b"I")]
    other = Wire(wire.db)
    other.send(startup())
    assert other.kinds(query("SELECT * FROM t WHERE id > 3")) == b"TDDCZ"


def test_a_rollback_in_a_batch_rolls_back_the_executes_before_it(wire: Wire) -> None:
    """As PostgreSQL: a ROLLBACK sent in a batch ends its implicit transaction by
    rolling it back, so the writes before it are undone rather than committed; a
    COMMIT commits them."""
    insert = parse("ins", "INSERT INTO t VALUES ($1, $2)")
    row = bind("", "ins", [b"7", b"v"]) + execute()
    rollback = parse("", "ROLLBACK") + bind("", "", []) + execute()
    wire.send(insert, SYNC)
    assert wire.kinds(row, rollback, SYNC) == b"2C12CZ"
    assert wire.kinds(query("SELECT * FROM t WHERE id = 7")) == b"TCZ"
    commit = parse("", "COMMIT") + bind("", "", []) + execute()
    assert wire.kinds(row, commit, SYNC) == b"2C12CZ"
    assert wire.kinds(query("SELECT * FROM t WHERE id = 7")) == b"TDCZ"


def test_a_begin_in_a_batch_makes_its_implicit_transaction_explicit(wire: Wire) -> None:
    """As PostgreSQL and CockroachDB: the writes sent before a BEGIN in one batch are
    part of the transaction it opens, so a ROLLBACK undoes them too."""
    insert = parse("ins", "INSERT INTO t VALUES ($1, $2)")
    wire.send(insert, SYNC)
    begin, rollback = (parse("", s) + bind("", "", []) + execute() for s in ("BEGIN", "ROLLBACK"))
    rows = [bind("", "ins", [str(k).encode(), b"v"]) + execute() for k in (7, 8)]
    assert wire.kinds(rows[0], begin, rows[1], SYNC) == b"2C12C2CZ"
    assert wire.send(rollback, SYNC)[-1] == (b"Z", b"I")
    assert wire.kinds(query("SELECT * FROM t WHERE id > 3")) == b"TCZ"


def test_reads_as_of_system_time_in_one_batch_each_run_outside_a_transaction(
    wire: Wire,
) -> None:
    """A batch of historical reads answers each, as the same statements sent in one
    simple query do: they join no implicit transaction (inside one, AS OF SYSTEM TIME
    is refused)."""
    read = parse("", "SELECT id FROM t AS OF SYSTEM TIME '-1us'") + bind("", "", []) + execute()
    write = bind("", "ins", [b"9", b"v"]) + execute()
    wire.send(parse("ins", "INSERT INTO t VALUES ($1, $2)"), SYNC)
    for batch in ((read, read), (write, read)):
        kinds = wire.kinds(*batch, SYNC)
        # NB: the rows a read finds depend on the clock; that each is answered does not
        assert b"E" not in kinds and kinds.count(b"C") == 2 and kinds.endswith(b"Z")
    assert wire.kinds(query("SELECT * FROM t WHERE id = 9")) == b"TDCZ"  # committed


def test_describe_statement_gives_parameter_types_and_no_data_for_a_write(wire: Wire) -> None:
    answers = wire.send(
        parse("ins", "INSERT INTO t VALUES ($1, $2)", [OID.INT8]), describe("S", "ins"), SYNC
    )
    assert [kind for kind, _ in answers] == [b"1", b"t", b"n", b"Z"]
    assert answers[1][1] == struct.pack("!hII", 2, OID.INT8, OID.TEXT)


def row_description_oids(body: bytes) -> list[int]:
    (count,) = struct.unpack_from("!h", body)
    oids, at = [], 2
    for _ in range(count):
        at = body.index(b"\0", at) + 1
        oids.append(struct.unpack_from("!ihi", body, at)[2])
        at += 18
    return oids


def test_describing_a_statement_before_bind_gives_parameter_and_column_types(
    wire: Wire,
) -> None:
    answers = wire.send(
        parse("q", "SELECT id, s, count(*) FROM t WHERE id > $1 GROUP BY id, s"),
        describe("S", "q"),
        SYNC,
    )
    assert [kind for kind, _ in answers] == [b"1", b"t", b"T", b"Z"]
    assert answers[1][1] == struct.pack("!hI", 1, OID.INT8)  # typed from "id > $1"
    assert row_description_oids(answers[2][1]) == [OID.INT8, OID.TEXT, OID.INT8]


def test_describing_a_show_statement_before_bind_reads_its_columns(wire: Wire) -> None:
    answers = wire.send(parse("q", "SHOW TABLES"), describe("S", "q"), SYNC)
    assert [kind for kind, _ in answers] == [b"1", b"t", b"T", b"Z"]
    assert b"table_name" in answers[2][1]


def test_describing_a_split_before_bind_is_refused_clearly(wire: Wire) -> None:
    answers = wire.send(parse("q", "ALTER TABLE t SPLIT AT VALUES (2)"), describe("S", "q"), SYNC)
    assert [kind for kind, _ in answers] == [b"1", b"E", b"Z"]
    assert error_fields(answers[1][1])["C"] == "0A000"


def test_an_untyped_parameter_takes_its_type_from_the_sql_layer(wire: Wire) -> None:
    answers = wire.send(
        parse("", "SELECT s FROM t WHERE id = $1"),
        bind("", "", [struct.pack("!q", 2)], param_formats=[1]),
        execute(),
        SYNC,
    )
    assert [kind for kind, _ in answers] == [b"1", b"2", b"D", b"C", b"Z"]
    assert answers[2][1] == struct.pack("!hi", 1, 1) + b"b"


def test_all_null_and_empty_columns_have_their_declared_types(wire: Wire) -> None:
    wire.send(query("CREATE TABLE n (id INT PRIMARY KEY, v DECIMAL)"))
    wire.send(query("INSERT INTO n VALUES (1, NULL)"))
    for text in ("SELECT v, id FROM n", "SELECT v, id FROM n WHERE id > 5"):
        answers = wire.send(query(text))
        assert answers[0][0] == b"T"
        assert row_description_oids(answers[0][1]) == [OID.NUMERIC, OID.INT8], text
    answers = wire.send(parse("", "SELECT v FROM n"), bind("", ""), describe("P"), SYNC)
    assert row_description_oids(answers[2][1]) == [OID.NUMERIC]


def test_a_portal_runs_at_execute_not_at_describe(wire: Wire) -> None:
    wire.send(query("BEGIN"))  # NB: a portal lasts until its transaction ends
    answers = wire.send(
        parse("", "INSERT INTO t VALUES (7, 'g') RETURNING id"),
        bind("p", ""),
        describe("P", "p"),
        SYNC,
    )
    assert [kind for kind, _ in answers] == [b"1", b"2", b"T", b"Z"]
    assert row_description_oids(answers[2][1]) == [OID.INT8]
    assert wire.send(query("SELECT count(*) FROM t"))[1][1] == struct.pack("!hi", 1, 1) + b"3"
    answers = wire.send(execute("p"), SYNC)
    assert [kind for kind, _ in answers] == [b"D", b"C", b"Z"]
    assert wire.send(query("SELECT count(*) FROM t"))[1][1] == struct.pack("!hi", 1, 1) + b"4"
    wire.send(query("COMMIT"))


def test_a_portal_ends_with_its_transaction(wire: Wire) -> None:
    """As in PostgreSQL and CockroachDB: a named portal of an implicit transaction is
    gone after its Sync, one of an explicit transaction after its COMMIT (34000)."""
    answers = wire.send(parse("s", "SELECT id FROM t"), bind("p", "s"), SYNC)
    assert [kind for kind, _ in answers] == [b"1", b"2", b"Z"]
    gone = wire.send(execute("p"), SYNC)
    assert [kind for kind, _ in gone] == [b"E", b"Z"]
    assert error_fields(gone[0][1])["M"] == 'portal "p" does not exist'
    wire.send(query("BEGIN"))
    assert wire.kinds(bind("p", "s"), SYNC) == b"2Z"
    assert wire.kinds(execute("p", 1), SYNC) == b"DsZ"  # kept past the Sync
    wire.send(query("COMMIT"))
    assert wire.kinds(execute("p"), SYNC) == b"EZ"


@pytest.mark.parametrize(
    ("messages", "code"),
    [
        ([bind("", "missing")], "26000"),
        ([execute("missing")], "34000"),
        ([parse("", "SELECT 1; SELECT 2")], "42601"),
        ([parse("", "SELECT $1"), bind("", "", [])], "08P01"),
        ([parse("", "SELECT $1", [OID.INT8]), bind("", "", [b"seven"])], "22P02"),
        ([parse("", "SELECT $1", [OID.INT8]), bind("", "", [b"\x01"], param_formats=[1])], "22P03"),
        ([parse("s", "SELECT 1"), parse("s", "SELECT 2")], "42P05"),
        ([parse("", "SELECT id FROM t"), bind("", "", result_formats=[0, 1]), execute()], "08P01"),
    ],
)
def test_extended_protocol_mistakes_get_their_sqlstate_and_the_connection_goes_on(
    wire: Wire, messages: list[bytes], code: str
) -> None:
    answers = wire.send(*messages, SYNC)
    errors = [error_fields(body) for kind, body in answers if kind == b"E"]
    assert [(e["S"], e["C"]) for e in errors] == [("ERROR", code)]
    assert answers[-1] == (b"Z", b"I")
    assert not wire.conn.closed
    assert wire.kinds(query("SELECT 1")) == b"TDCZ"


def test_binary_parameters_and_results(wire: Wire) -> None:
    answers = wire.send(
        parse("", "SELECT id, s FROM t WHERE id = $1", [OID.INT8]),
        bind("", "", [struct.pack("!q", 2)], param_formats=[1], result_formats=[1]),
        describe("P"),
        execute(),
        SYNC,
    )
    assert [kind for kind, _ in answers] == [b"1", b"2", b"T", b"D", b"C", b"Z"]
    assert answers[3][1] == struct.pack("!hiqi", 2, 8, 2, 1) + b"b"


def test_a_protocol_violation_answers_fatal_and_closes(wire: Wire) -> None:
    [(kind, body)] = wire.send(frontend(b"!"))
    fields = error_fields(body)
    assert (kind, fields["S"], fields["C"]) == (b"E", "FATAL", "08P01")
    assert wire.conn.closed


def test_an_open_transaction_rolls_back_when_the_connection_closes(db: DB, wire: Wire) -> None:
    wire.send(query("BEGIN"), query("INSERT INTO t VALUES (5, 'e')"))
    wire.send(frontend(b"X"))
    assert wire.conn.closed
    assert db.sql("SELECT count(*) FROM t").rows == [(3,)]


def test_too_large_a_message_is_refused_with_54000(wire: Wire) -> None:
    [(kind, body)] = wire.send(b"Q" + struct.pack("!i", (1 << 16) + 1))
    assert (kind, error_fields(body)["C"]) == (b"E", "54000")
    assert wire.conn.closed


def test_messages_not_allowed_when_ready_are_protocol_violations(wire: Wire) -> None:
    [(kind, body)] = wire.send(frontend(b"p", b"pw\0"))
    assert (kind, error_fields(body)["C"]) == (b"E", "08P01")
    assert wire.conn.closed


def test_a_newer_minor_version_or_pq_option_is_negotiated_down_to_3_0(db: DB) -> None:
    w = Wire(db)
    body = struct.pack("!i", (3 << 16) | 2) + b"user\0root\0_pq_.feature\0on\0\0"
    answers = w.send(struct.pack("!i", len(body) + 4) + body)
    assert answers[0] == (b"v", struct.pack("!ii", 0, 1) + b"_pq_.feature\0")
    assert answers[1] == (b"R", struct.pack("!i", 0))
    assert answers[-1] == (b"Z", b"I")


def test_a_call_with_a_placeholder_typed_void_is_refused_as_cockroachdb_does(wire: Wire) -> None:
    """pgjdbc's ``{? = call upper(?)}``: the return value's placeholder comes typed VOID,
    which CockroachDB keeps (PostgreSQL drops it), and no builtin takes a VOID."""
    text = "select * from upper($1,$2) as result"
    answers = wire.send(parse("", text, [OID.VOID, OID.VARCHAR]), SYNC)
    assert [kind for kind, _ in answers] == [b"E", b"Z"]
    fields = error_fields(answers[0][1])
    assert (fields["C"], fields["M"]) == ("42883", "unknown signature: upper(void, string)")
