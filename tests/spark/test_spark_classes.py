"""The archive of Spark's classes (feedkv.spark.classes): where it is kept, that
recording it leaves a whole archive or none, and that Spark's JVM then loads Spark's
classes from it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from feedkv.spark.classes import archive, archive_path
from feedkv.spark.session import JAVA_OPTIONS, java_options


def test_the_archive_is_kept_in_the_cache_keyed_by_the_jvms_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = archive_path(JAVA_OPTIONS)
    assert path.parent == tmp_path / "feedkv"
    assert archive_path(f"{JAVA_OPTIONS} -Xmx1g") != path
    assert archive(JAVA_OPTIONS) is None
    assert java_options() == JAVA_OPTIONS  # nothing recorded: Spark starts as it did

    path.parent.mkdir()
    path.touch()
    assert archive(JAVA_OPTIONS) == path
    assert java_options() == f"{JAVA_OPTIONS} -XX:SharedArchiveFile={path}"


# A session on the archive, its JVM logging where each class came from.
_SESSION = """
import sys
from feedkv.spark.session import java_options, spark_session
log = sys.argv[1]
options = f"{java_options()} -Xlog:class+load=info:file={log}"
spark = spark_session("local[1]", config={"spark.driver.extraJavaOptions": options})
print(spark.range(3).count())
spark.stop()
"""


@pytest.mark.slow(90)
def test_spark_starts_from_the_recorded_archive(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    record = [sys.executable, "-m", "feedkv.spark.classes"]
    subprocess.run(record, env=env, check=True, capture_output=True, timeout=600)
    kept = list((tmp_path / "cache" / "feedkv").iterdir())
    assert [p.name for p in kept] == [archive_path(JAVA_OPTIONS).name]  # no part left

    log = tmp_path / "classes.log"
    session = [sys.executable, "-c", _SESSION, str(log)]
    run = subprocess.run(session, env=env, check=True, capture_output=True, text=True, timeout=600)
    assert run.stdout.split()[-1] == "3"
    loaded = [
        line for line in log.read_text().splitlines() if "org.apache.spark.SparkContext " in line
    ]
    assert loaded and "source: shared objects file (top)" in loaded[0]
