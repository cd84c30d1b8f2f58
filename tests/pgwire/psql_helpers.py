"""Running psql against a node in tests (importable by the tests beside it)."""

from __future__ import annotations

import subprocess


def _run(url: str, command: str, options: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["psql", url, "-X", "-v", "ON_ERROR_STOP=1", *options, "-c", command],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def psql(url: str, command: str, *options: str) -> str:
    """What psql prints for ``command`` at ``url`` (fails the test if psql fails);
    ``options``: more of psql's (``-A``: unaligned)."""
    done = _run(url, command, options)
    assert done.returncode == 0, done.stderr
    return done.stdout


def psql_failure(url: str, command: str, *options: str) -> str:
    """What psql reports on stderr for ``command`` at ``url``, which must fail."""
    done = _run(url, command, options)
    assert done.returncode != 0, done.stdout
    return done.stderr
