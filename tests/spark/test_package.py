"""What ``feedkv.spark`` offers a Spark user, without PySpark until it is asked for."""

from __future__ import annotations

import subprocess
import sys


def _python(code: str) -> str:
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    return run.stdout.strip()


def test_importing_feedkv_spark_imports_no_pyspark() -> None:
    code = "import sys, feedkv.spark; print('pyspark' in sys.modules)"
    assert _python(code) == "False"


def test_the_data_source_class_is_exported_to_register_in_ones_own_session() -> None:
    code = (
        "from feedkv.spark import FeedKVDataSource, spark_session\n"
        "from pyspark.sql.datasource import DataSource\n"
        "print(issubclass(FeedKVDataSource, DataSource), FeedKVDataSource.name(),"
        " callable(spark_session))"
    )
    assert _python(code) == "True feedkv True"


def test_an_unknown_name_is_an_attribute_error() -> None:
    code = (
        "import feedkv.spark\n"
        "try:\n    feedkv.spark.Nope\nexcept AttributeError as exc:\n    print(exc)"
    )
    assert "has no attribute 'Nope'" in _python(code)
