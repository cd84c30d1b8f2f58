"""feedkv: a transactional MVCC key-value store built around change feeds."""

from feedkv.errors import FeedKVError
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

__all__ = ["FeedKVError", "Span", "Timestamp"]
__version__ = "0.1.0"
