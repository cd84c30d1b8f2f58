"""Running psql against a node in tests (importable by the tests beside it)."""

from __future__ import annotations

import subprocess


def psql(url: str, command: str) -> str:
    """What psql prints for ``command`` at ``url`` (fails the test if psql fails)."""
    done = subprocess.run(
        ["psql", url, "-X", "-v", "ON_ERROR_STOP=1", "-c", command],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout
