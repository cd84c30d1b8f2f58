"""Valid inputs for the fuzz tests to mutate (hypothesis's in ``tests/security`` and
atheris's coverage-guided targets beside them): a mutation of a valid message reaches
deeper into a decoder than random bytes do."""

from __future__ import annotations

from feedkv.kv import api
from feedkv.kv.wire import batch_request_to_proto
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

__all__ = ["NOW", "batch_requests"]

NOW = Timestamp(1_700_000_000_000_000_000, 0)


def batch_requests() -> list[bytes]:
    """Serialized ``BatchRequest`` protos, one of each kind of header and a few requests."""
    txn = api.Transaction(id=b"\x01" * 16, key=b"k", epoch=1, read_ts=NOW, write_ts=NOW, priority=5)
    requests: list[tuple[api.Header, tuple[api.Request, ...]]] = [
        (api.Header(timestamp=NOW), (api.Put(b"a", b"1"), api.Get(b"a"))),
        (api.Header(txn=txn), (api.Scan(Span(b"a", b"z"), limit=5, reverse=True),)),
        (api.Header(deadline=NOW), (api.DeleteRange(Span(b"a", b"b")), api.Put(b"c", None))),
        (api.Header(), (api.ConditionalPut(b"k", b"v", None),)),
    ]
    return [batch_request_to_proto(api.BatchRequest(h, r)).SerializeToString() for h, r in requests]
