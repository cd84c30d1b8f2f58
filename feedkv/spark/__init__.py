"""feedkv on Apache Spark: the ``feedkv`` data source and changefeed jobs as Spark queries.

Importing this package does not import PySpark: :class:`FeedKVDataSource` and
:func:`spark_session` are looked up when first named (``from feedkv.spark import
FeedKVDataSource``), which imports PySpark then. In a Spark session of your own::

    from feedkv.spark import FeedKVDataSource

    spark.dataSource.register(FeedKVDataSource)
    spark.read.format("feedkv").option("url", "feedkv://127.0.0.1:26258").option("table", "t")
"""

from __future__ import annotations

from typing import Any

__all__ = ["FeedKVDataSource", "spark_session"]


def __getattr__(name: str) -> Any:
    if name == "FeedKVDataSource":
        from feedkv.spark.source import FeedKVDataSource

        return FeedKVDataSource
    if name == "spark_session":
        from feedkv.spark.session import spark_session

        return spark_session
    raise AttributeError(f"module 'feedkv.spark' has no attribute {name!r}")
