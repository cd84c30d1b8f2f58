"""The build this process runs: feedkv's version, and the build tag a node shows for it
(``build`` of ``feedkv node status``: CockroachDB's ``v<version>`` form)."""

from __future__ import annotations

__all__ = ["BUILD_TAG", "VERSION"]

VERSION = "0.1.0"
BUILD_TAG = f"v{VERSION}"
