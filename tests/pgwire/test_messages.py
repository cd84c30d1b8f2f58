"""Framing and parsing of frontend messages, encoding of backend ones."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from feedkv.pgwire import messages as m
from feedkv.testing.pgwire_client import backend_messages, bind, error_fields, frontend, parse


def started(max_message_bytes: int = m.DEFAULT_MAX_MESSAGE_BYTES) -> m.Decoder:
    decoder = m.Decoder(max_message_bytes)
    decoder.started()
    return decoder


def decode_all(data: bytes) -> list[m.FrontendMessage]:
    decoder = started()
    decoder.feed(data)
    out = []
    while (message := decoder.next()) is not None:
        out.append(message)
    return out


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (frontend(b"Q", b"SELECT 1\0"), m.Query("SELECT 1")),
        (parse("s1", "SELECT $1", [20]), m.Parse("s1", "SELECT $1", (20,))),
        (
            bind("p", "s", [b"7", None], param_formats=[0], result_formats=[1]),
            m.Bind("p", "s", (0,), (b"7", None), (1,)),
        ),
        (frontend(b"D", b"Sname\0"), m.Describe("S", "name")),
        (frontend(b"D", b"P\0"), m.Describe("P", "")),
        (frontend(b"E", b"\0" + struct.pack("!i", 5)), m.Execute("", 5)),
        (frontend(b"C", b"Pp\0"), m.Close("P", "p")),
        (frontend(b"S"), m.Sync()),
        (frontend(b"H"), m.Flush()),
        (frontend(b"X"), m.Terminate()),
        (frontend(b"p", b"secret\0"), m.PasswordMessage(b"secret\0")),
    ],
)
def test_each_frontend_message_parses_to_its_fields(data: bytes, expected: object) -> None:
    assert decode_all(data) == [expected]


def test_messages_split_anywhere_across_reads_come_out_whole_and_in_order() -> None:
    stream = frontend(b"Q", b"SELECT 1\0") + parse("", "SELECT 2") + frontend(b"S")
    for cut in range(len(stream) + 1):
        decoder = started()
        got = []
        for piece in (stream[:cut], stream[cut:]):
            decoder.feed(piece)
            while (message := decoder.next()) is not None:
                got.append(message)
        assert got == [m.Query("SELECT 1"), m.Parse("", "SELECT 2", ()), m.Sync()], cut


def test_a_message_fed_in_many_reads_after_whole_ones_comes_out_whole_as_bytes() -> None:
    data = bytes(range(256)) * 300  # a body of many reads
    stream = frontend(b"S") + frontend(b"d", data) + frontend(b"Q", b"SELECT 1\0")
    decoder = started()
    got = []
    for at in range(0, len(stream), 1000):
        decoder.feed(stream[at : at + 1000])
        while (message := decoder.next()) is not None:
            got.append(message)
    assert got == [m.Sync(), m.CopyData(data), m.Query("SELECT 1")]
    assert type(got[1].data) is bytes  # NB: not the bytearray it gathered in
    assert decoder.next() is None and decoder.buffered_kinds() == b""


@pytest.mark.parametrize(
    ("data", "code", "message"),
    [
        (frontend(b"!"), "08P01", "invalid frontend message type b'!'"),
        (b"Q" + struct.pack("!i", 3), "08P01", "invalid message length 3"),
        (b"Q" + struct.pack("!i", -7), "08P01", "invalid message length -7"),
        (b"Q" + struct.pack("!i", 1 << 30), "54000", "over the limit of"),
        (frontend(b"Q", b"no terminator"), "08P01", "without its terminator"),
        (frontend(b"Q", b"SELECT 1\0extra"), "08P01", "bytes past its last field"),
        (frontend(b"E", b"\0\0"), "08P01", "Execute message ends before its fields do"),
        (frontend(b"D", b"X\0"), "08P01", "expected 'S' (statement) or 'P' (portal)"),
        (frontend(b"Q", b"\xff\xfe\0"), "08P01", "not UTF-8"),
        (
            bind("", "", [b"1"], param_formats=[7]),
            "08P01",
            "format code 7; formats are 0 (text) and 1",
        ),
        (frontend(b"B", b"\0\0\0\0\0\x01\xff\xff\xff\xf0"), "08P01", "negative value length"),
    ],
)
def test_malformed_messages_are_protocol_violations_naming_the_problem(
    data: bytes, code: str, message: str
) -> None:
    with pytest.raises(m.ProtocolViolation) as caught:
        decode_all(data)
    assert caught.value.code == code
    assert message in caught.value.message


def test_an_oversized_length_is_refused_before_its_body_arrives() -> None:
    decoder = started(max_message_bytes=1000)
    decoder.feed(b"Q" + struct.pack("!i", 1001))  # the header alone: nothing buffered
    with pytest.raises(m.ProtocolViolation, match="1001 bytes, over the limit of 1000"):
        decoder.next()


@pytest.mark.parametrize(
    ("packet", "expected"),
    [
        (struct.pack("!ii", 8, 80877103), m.SSLRequest()),
        (struct.pack("!ii", 8, 80877104), m.GSSENCRequest()),
        (struct.pack("!iiii", 16, 80877102, 7, -5), m.CancelRequest(7, -5)),
        (
            struct.pack("!ii", 23, 3 << 16) + b"user\0root\0a\0b\0\0",
            m.StartupMessage(3 << 16, {"user": "root", "a": "b"}),
        ),
    ],
)
def test_startup_packets(packet: bytes, expected: object) -> None:
    decoder = m.Decoder()
    decoder.feed(packet)
    assert decoder.next() == expected


@pytest.mark.parametrize(
    ("packet", "message"),
    [
        (struct.pack("!ii", 8, 2 << 16), "unsupported frontend protocol 2.0"),
        (struct.pack("!ii", 4, 0), "invalid length of startup packet: 4"),
        (struct.pack("!ii", 1 << 20, 3 << 16), "invalid length of startup packet"),
        (struct.pack("!ii", 14, 3 << 16) + b"user\0r", "without its terminator"),
    ],
)
def test_bad_startup_packets_are_refused(packet: bytes, message: str) -> None:
    decoder = m.Decoder()
    decoder.feed(packet)
    with pytest.raises(m.ProtocolViolation, match=message):
        decoder.next()


@settings(max_examples=2000, deadline=None)
@given(hs.binary(max_size=64))
def test_garbage_either_parses_waits_for_more_or_is_a_protocol_violation(data: bytes) -> None:
    """The parser's only failure is ProtocolViolation: no other exception, whatever
    bytes come (typed phase)."""
    decoder = started(max_message_bytes=1 << 10)
    decoder.feed(data)
    with contextlib.suppress(m.ProtocolViolation):
        while decoder.next() is not None:
            pass


@settings(max_examples=1000, deadline=None)
@given(hs.binary(max_size=64))
def test_garbage_startup_packets_are_only_ever_protocol_violations(data: bytes) -> None:
    decoder = m.Decoder()
    decoder.feed(struct.pack("!i", len(data) + 4) + data)
    with contextlib.suppress(m.ProtocolViolation):
        decoder.next()


def test_backend_messages_encode_as_postgresql_frames_them() -> None:
    out = (
        m.row_description([m.Field("id", 20, 8, 0)])
        + m.data_row([b"1", None])
        + m.command_complete("SELECT 1")
        + m.ready_for_query("T")
        + m.error_response("42601", "bad", position=3)
    )
    messages = backend_messages(out)
    assert [kind for kind, _ in messages] == [b"T", b"D", b"C", b"Z", b"E"]
    assert messages[0][1] == b"\0\x01id\0" + struct.pack("!ihihih", 0, 0, 20, 8, -1, 0)
    assert messages[1][1] == struct.pack("!hi", 2, 1) + b"1" + struct.pack("!i", -1)
    assert messages[2][1] == b"SELECT 1\0"
    assert messages[3][1] == b"T"
    assert error_fields(messages[4][1]) == {
        "S": "ERROR",
        "V": "ERROR",
        "C": "42601",
        "M": "bad",
        "P": "3",
    }


def _typed(kind: bytes, body: bytes) -> object:
    """What the frontend reader (fast path first) makes of a ``kind`` message's body: the
    message, or the violation's text."""
    try:
        return m._parse_typed(kind, body)
    except m.ProtocolViolation as exc:
        return str(exc)


def _bind_by_reader(body: bytes) -> object:
    """What the general reader makes of a Bind body: the message, or the violation's text."""
    r = m._Reader(body, "Bind")
    try:
        portal, statement = r.string(), r.string()
        param_formats = m._formats(r)
        params = tuple(r.value() for _ in range(r.count()))
        message = m.Bind(portal, statement, param_formats, params, m._formats(r))
        r.end()
    except m.ProtocolViolation as exc:
        return str(exc)
    return message


_BIND_PIECES = hs.lists(
    hs.sampled_from(
        (
            *(b"\0", b"p\0", b"s1\0", b"\xff\0", b"\0\0", b"\0\1", b"\0\2", b"\xff\xff"),
            *(b"\0\0\0\1", b"\0\0\0\3abc", b"\xff\xff\xff\xff", b"\xff\xff\xff\xfe"),
            *(b"\0\1\0\1", b"x"),
        )
    ),
    max_size=12,
)


@settings(max_examples=400, deadline=None)
@given(_BIND_PIECES)
def test_a_bind_parses_as_the_general_reader_reads_it(pieces: list[bytes]) -> None:
    """The fast path for Bind gives the reader's message, or leaves the body to the
    reader (which then names what is wrong with it)."""
    body = b"".join(pieces)
    expected = _bind_by_reader(body)
    fast = m._parse_bind(body)
    assert fast is None or fast == expected
    assert _typed(b"B", body) == expected


def test_a_bind_with_parameters_of_both_formats_takes_the_fast_path() -> None:
    body = bind("", "s", [b"42", None, b""], param_formats=[0, 1, 0], result_formats=[1])[5:]
    expected = m.Bind("", "s", (0, 1, 0), (b"42", None, b""), (1,))
    assert m._parse_bind(body) == expected == _bind_by_reader(body)


def _execute_by_reader(body: bytes) -> object:
    """What the general reader makes of an Execute body: the message, or the violation's
    text."""
    r = m._Reader(body, "Execute")
    try:
        message = m.Execute(r.string(), max(r.int32(), 0))
        r.end()
    except m.ProtocolViolation as exc:
        return str(exc)
    return message


@settings(max_examples=300, deadline=None)
@given(
    hs.lists(
        hs.sampled_from(
            (b"\0", b"p\0", b"\xff\0", b"\0\0\0\5", b"\xff\xff\xff\xff", b"\0\0", b"x")
        ),
        max_size=6,
    )
)
def test_an_execute_parses_as_the_general_reader_reads_it(pieces: list[bytes]) -> None:
    """The fast path for Execute gives the reader's message, or leaves the body to the
    reader (which then names what is wrong with it)."""
    body = b"".join(pieces)
    expected = _execute_by_reader(body)
    fast = m._parse_execute(body)
    assert fast is None or fast == expected
    assert _typed(b"E", body) == expected


def test_a_sync_with_a_body_is_a_violation_and_one_without_is_a_sync() -> None:
    assert decode_all(frontend(b"S") + frontend(b"S")) == [m.Sync(), m.Sync()]
    with pytest.raises(m.ProtocolViolation, match="Sync message has bytes past its last field"):
        decode_all(frontend(b"S", b"\0"))


def test_the_kinds_of_whole_buffered_messages_are_read_without_taking_them() -> None:
    execute = frontend(b"E", b"\0" + struct.pack("!i", 0))
    stream = bind("", "s", [b"1"]) + execute + execute + frontend(b"S")
    decoder = started()
    decoder.feed(stream[:-3])  # the Sync cut short
    assert decoder.buffered_kinds() == b"BEE"
    decoder.feed(stream[-3:])
    assert decoder.buffered_kinds() == b"BEES"
    assert isinstance(decoder.next(), m.Bind)
    assert decoder.buffered_kinds() == b"EES"
    assert m.Decoder().buffered_kinds() == b""  # NB: before startup nothing is typed
