"""feedkv: a transactional MVCC key-value store built around change feeds."""

import os

# NB: gRPC's fork handlers run in any child forked while gRPC threads are busy, and
# PySpark starts its JVM with a preexec_fn (a fork, then Python code, then exec): in a
# node serving gRPC the child then sometimes aborts before it can exec, and Spark fails
# to start. feedkv never uses gRPC in a forked child, so the handlers are turned off
# (before grpc is first imported, which reads this once).
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")

from feedkv.db import DB, connect
from feedkv.errors import FeedKVError
from feedkv.kv.txn import Txn
from feedkv.util.build import VERSION
from feedkv.util.hlc import Timestamp
from feedkv.util.keys import Span

__all__ = ["DB", "FeedKVError", "Span", "Timestamp", "Txn", "connect"]
__version__ = VERSION
