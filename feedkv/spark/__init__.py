"""feedkv on Apache Spark: the ``feedkv`` data source and changefeed jobs as Spark queries.

Importing this package does not import PySpark; :mod:`feedkv.spark.source` and
:func:`feedkv.spark.session.spark_session` do.
"""
