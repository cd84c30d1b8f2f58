"""The null sink: it takes everything and keeps nothing, and keeps the sink contract's
calls."""

from __future__ import annotations

from feedkv.changefeed.options import parse_options
from feedkv.changefeed.sink import Sink, make_sink, parse_sink_uri
from feedkv.testing.sink_conformance import START, check_sink


def null_sink() -> Sink:
    options = parse_options((), now=START)
    return make_sink(parse_sink_uri("null://", options), options)


def test_the_null_sink_keeps_the_sink_contract() -> None:
    check_sink(null_sink, None)
