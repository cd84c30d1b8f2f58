"""The names of the MVCC layer's sub-databases (layouts in :mod:`feedkv.storage.mvcc_key`)."""

__all__ = ["CHANGES", "GC_THRESHOLDS", "INTENTS", "MVCC_DATABASES", "VERSIONS"]

VERSIONS = "versions"
INTENTS = "intents"
CHANGES = "changes"
GC_THRESHOLDS = "gc_thresholds"

MVCC_DATABASES = (VERSIONS, INTENTS, CHANGES, GC_THRESHOLDS)
