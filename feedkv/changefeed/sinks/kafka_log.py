"""librdkafka's log, into Python logging once per state change.

librdkafka logs every failed attempt to reach a broker (``FAIL ... Connect to ...
failed: Connection refused``), and retries about once a second: a Kafka sink without
its brokers would write a line a second for as long as they are down. confluent-kafka
hands the log to a Python ``logger`` (its ``logger`` setting) as
``logger.log(level, "%s [%s] %s", facility, client name, text)``; a :class:`BrokerLog`
is that logger. It logs a broker's first failure (a ``FAIL`` line, or any line at
warning level or above) at its level, the ones after it at debug level, and once the
sink sees the brokers work again (a delivery, an answer), :meth:`BrokerLog.recovered`
logs that once. librdkafka's lines below warning level are
logged at debug level.
"""

from __future__ import annotations

import logging
import re
import threading

__all__ = ["BrokerLog"]

# "[thrd:...]: 127.0.0.1:9092/bootstrap: Connect to ..." (the thread's name first).
_THREAD = re.compile(r"^\[thrd:[^\]]*\]: ")
_BROKER = re.compile(r"^(\S+?:\d+/\S+?): ")
_SASL_REFUSED = "SASL authentication error"  # librdkafka's, for a SaslAuthenticate error


class BrokerLog:
    """confluent-kafka's ``logger`` for one client: see the module docstring. Safe to
    call from any thread."""

    def __init__(self, target: logging.Logger) -> None:
        self._target = target
        self._lock = threading.Lock()
        self._failing: dict[str, str] = {}  # what fails (a broker, a facility): its first error
        self._refused: str | None = None  # the last SASL refusal since the last recovery

    @property
    def token_failure(self) -> str | None:
        """How librdkafka last failed to fetch an OAuth token (``OAUTHBEARER`` with
        OIDC), if it did since the last recovery: a broker then refuses or never
        answers, and this says why."""
        with self._lock:
            return self._failing.get("client (OIDC)")

    @property
    def authentication_failure(self) -> str | None:
        """A broker's refusal of this client's SASL credentials or token, if one was
        logged since the last recovery. NB: librdkafka reports it only in its log and
        error events; a request then fails as a transport failure."""
        with self._lock:
            return self._refused

    @property
    def failing(self) -> bool:
        """Whether a failure was logged since the last recovery."""
        with self._lock:
            return bool(self._failing)

    def log(self, level: int, msg: str, *args: object) -> None:
        """One line of librdkafka's log (the ``logging.Logger.log`` signature)."""
        text = msg % args if args else msg
        # NB: a broker that takes connections and drops them fails at info level
        if level < logging.WARNING and not (args and args[0] == "FAIL"):
            self._target.debug("librdkafka: %s", text)
            return
        body = _THREAD.sub("", str(args[2]) if len(args) == 3 else text)
        found = _BROKER.match(body)
        what = f"broker {found[1]}" if found else f"client ({args[0] if args else 'log'})"
        with self._lock:
            if _SASL_REFUSED in body:
                self._refused = body
            first = what not in self._failing
            if first:
                self._failing[what] = body
        if first:
            self._target.log(
                level,
                "Kafka %s is failing: %s (logged once; its recovery is logged too)",
                what,
                body,
            )
        else:
            self._target.debug("librdkafka: %s", text)

    def recovered(self) -> None:
        """The brokers answered: log that once, if a failure was logged."""
        with self._lock:
            failing, self._failing = self._failing, {}
            self._refused = None
        if failing:
            self._target.info("Kafka %s working again", ", ".join(sorted(failing)))
