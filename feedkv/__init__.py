"""feedkv: a transactional MVCC key-value store built around change feeds."""

from feedkv.db import DB, connect
from feedkv.errors import FeedKVError
from feedkv.kv.txn import Txn
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

__all__ = ["DB", "FeedKVError", "Span", "Timestamp", "Txn", "connect"]
__version__ = "0.1.0"
