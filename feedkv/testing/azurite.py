"""Azurite, Microsoft's Azure Storage emulator, as a Blob Storage server on loopback for
tests of the ``azure://`` sink.

Azurite is the npm registry's ``azurite`` package; ``make`` installs it under
``.cache/azurite`` in the repository (``FEEDKV_AZURITE`` names another ``azurite-blob``
executable). :func:`azurite_blob` finds it; a test without it is skipped, saying why.
Each :class:`Azurite` is a process of its own, in memory, on a port the system chose,
with Azurite's well-known development account. Given a certificate and its key it
serves https and takes OAuth bearer tokens too (Azurite's ``--oauth basic``: a token
must be a JWT from an Entra ID issuer, for Blob Storage's audience, within its lifetime;
its signature is not checked), as well as the account's key.
"""

from __future__ import annotations

import os
import queue
import re
import shutil
import subprocess
import threading
from pathlib import Path

__all__ = ["ACCOUNT", "KEY", "Azurite", "azurite_blob"]

# Azurite's development account, the same in every installation (not a secret).
ACCOUNT = "devstoreaccount1"
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="

_INSTALLED = Path(__file__).resolve().parents[2] / ".cache/azurite/node_modules/.bin/azurite-blob"
_LISTENING = re.compile(r"successfully listens on (https?://\S+)")
START_TIMEOUT_S = 60.0


def azurite_blob() -> str | None:
    """The ``azurite-blob`` executable: ``FEEDKV_AZURITE``, the one ``make`` installed,
    or one on the ``PATH`` (``None``: there is none)."""
    given = os.environ.get("FEEDKV_AZURITE")
    if given:
        return given
    if _INSTALLED.exists():
        return str(_INSTALLED)
    return shutil.which("azurite-blob")


class Azurite:
    """An ``azurite-blob`` process serving Blob Storage on loopback; :attr:`account_url`
    is its development account's endpoint. Close it to end the process."""

    def __init__(self, executable: str, tls: tuple[Path, Path] | None = None) -> None:
        """``tls``: a certificate for 127.0.0.1 and its key (PEM): serve https, and take
        OAuth tokens (``--oauth basic``)."""
        oauth = ["--oauth", "basic", "--cert", str(tls[0]), "--key", str(tls[1])] if tls else []
        self._process = subprocess.Popen(
            [
                executable,
                "--blobHost",
                "127.0.0.1",
                "--blobPort",
                "0",
                "--inMemoryPersistence",
                "--extentMemoryLimit",
                "256",
                "--skipApiVersionCheck",  # the Python SDK may be newer than the emulator
                "--disableTelemetry",
                "--silent",
                *oauth,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, args=(lines,), daemon=True).start()
        seen: list[str] = []
        while True:
            try:
                line = lines.get(timeout=START_TIMEOUT_S)
            except queue.Empty:
                self.close()
                raise TimeoutError(f"Azurite did not listen within {START_TIMEOUT_S:g} s") from None
            if line is None:
                self.close()
                raise RuntimeError("Azurite exited before it listened: " + " | ".join(seen))
            seen.append(line.strip())
            found = _LISTENING.search(line)
            if found:
                self.url = found[1]
                self.account_url = f"{self.url}/{ACCOUNT}"
                return

    def _read(self, lines: queue.Queue[str | None]) -> None:
        for line in self._process.stdout or ():
            lines.put(line)  # NB: read to the end, so the pipe never fills and blocks it
        lines.put(None)

    def connection_string(self) -> str:
        """The development account's connection string, for the SDK's clients."""
        return (
            f"DefaultEndpointsProtocol={self.url.split(':', 1)[0]};"
            f"AccountName={ACCOUNT};AccountKey={KEY};"
            f"BlobEndpoint={self.account_url};"
        )

    def close(self) -> None:
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
