"""``feedkv start``: run a node in the foreground until SIGTERM or Ctrl-C, then drain."""

from __future__ import annotations

import errno
import faulthandler
import logging
import os
import select
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from types import FrameType

from feedkv.changefeed.node_buffers import NodeBuffers
from feedkv.db import connect
from feedkv.errors import InvalidArgumentError, NodeUnavailableError
from feedkv.kv.address import parse_listen
from feedkv.kv.store import StoreConfig
from feedkv.kv.txn import HEARTBEAT_INTERVAL_S
from feedkv.server.cluster import ClusterConfig
from feedkv.server.heap import freeze_startup_heap
from feedkv.server.logs import LogSetup, configure_logging
from feedkv.util.hlc import Clock
from feedkv.util.locality import Locality
from feedkv.util.units import parse_duration_ns, parse_size

__all__ = ["run_node", "store_config"]

log = logging.getLogger("feedkv.node")


MIN_RANGE_MAX_BYTES = 64 << 10  # as CockroachDB's zone configurations
# NB: a coordinator heartbeats its transaction's record every HEARTBEAT_INTERVAL_S (the
# first beat up to 1.1 intervals after it wrote or anchored it): a shorter window lets a
# waiter abort a live transaction and break its locks (CockroachDB's is 5 intervals)
MIN_TXN_LIVENESS_NS = int(2 * HEARTBEAT_INTERVAL_S * 1e9)


def _open_logs(store: Path, level: str) -> LogSetup | None:
    """The node's logs (:func:`configure_logging`), its id not yet known; ``None`` when
    the store's directory cannot hold them (opening the store then says why)."""
    try:
        return configure_logging(store, "", level)
    except OSError:
        return None


def _wait_for(stop: threading.Event) -> None:
    """Return once a signal's handler set ``stop``.

    NB: not ``stop.wait()``: Python runs a signal's handler on the main thread, between
    its bytecodes, and the kernel may hand the signal to any thread of the process; a
    main thread blocked on a lock is then not woken, and the handler waits for it (a node
    ignored SIGTERM for minutes so). A signal also writes a byte to the wakeup fd, which
    ends the select here; the handler runs as it returns."""
    receive, send = socket.socketpair()
    send.setblocking(False)
    previous = signal.set_wakeup_fd(send.fileno(), warn_on_full_buffer=False)
    try:
        while not stop.is_set():
            select.select([receive], [], [])
            receive.recv(64)
    finally:
        signal.set_wakeup_fd(previous)
        receive.close()
        send.close()


def store_config(closed_ts_target: str, txn_liveness: str, range_max_bytes: str) -> StoreConfig:
    """The node's settings from its command-line flags (merges start below a quarter of
    the maximum range size). InvalidArgumentError names a flag out of its range."""
    max_bytes = parse_size(range_max_bytes)
    if max_bytes < MIN_RANGE_MAX_BYTES:
        raise InvalidArgumentError(
            f"--range-max-bytes {range_max_bytes!r} is below the minimum, 64KiB "
            "(a range that small would split at nearly every row)"
        )
    liveness_ns = _positive("--txn-liveness", txn_liveness)
    if liveness_ns < MIN_TXN_LIVENESS_NS:
        raise InvalidArgumentError(
            f"--txn-liveness {txn_liveness!r} is below the minimum, "
            f"{MIN_TXN_LIVENESS_NS / 1e9:g}s (transactions heartbeat their records every "
            f"{HEARTBEAT_INTERVAL_S:g}s: a shorter window takes live ones for dead and "
            "aborts them)"
        )
    return StoreConfig(
        closed_ts_target_ns=_positive("--closed-ts-target", closed_ts_target),
        txn_liveness_ns=liveness_ns,
        range_max_bytes=max_bytes,
        range_min_bytes=max_bytes // 4,
    )


def _non_negative(flag: str, text: str) -> int:
    if text.strip().startswith("-"):
        raise InvalidArgumentError(f"{flag} {text!r} is negative; give a duration such as 1s")
    return parse_duration_ns(text)


def _positive(flag: str, text: str) -> int:
    ns = _non_negative(flag, text)
    if ns <= 0:
        raise InvalidArgumentError(f"{flag} {text!r} must be more than zero")
    return ns


def cluster_config(
    rebalance_interval: str,
    max_offset: str,
    replicas: int = 1,
    locality: str = "",
    *,
    lease_transfer_wait: str = "5s",
    raft_addr: str | None = None,
) -> ClusterConfig:
    """The node's cluster settings from its flags; InvalidArgumentError names a bad one."""
    if raft_addr is not None:
        parse_listen(raft_addr)  # NB: refused here, before the store is opened
    interval_ns = _non_negative("--rebalance-interval", rebalance_interval)
    wait_ns = _non_negative("--lease-transfer-wait", lease_transfer_wait)
    if not 1 <= replicas <= 7:
        raise InvalidArgumentError(f"--replicas {replicas} is not between 1 and 7")
    return ClusterConfig(
        rebalance_interval_s=interval_ns / 1e9,
        max_offset_ns=_positive("--max-offset", max_offset),
        replicas=replicas,
        locality=Locality.parse(locality),
        lease_transfer_wait_s=wait_ns / 1e9,
        raft_addr=raft_addr,
    )


# A testing knob: shift this node's clock by this many milliseconds (the clock-offset tests).
CLOCK_OFFSET_ENV = "FEEDKV_TESTING_CLOCK_OFFSET_MS"


def _testing_clock() -> Clock | None:
    offset = os.environ.get(CLOCK_OFFSET_ENV)
    if not offset:
        return None
    shift_ns = int(offset) * 1_000_000
    return Clock(lambda: time.time_ns() + shift_ns)


def _check_ports_free(addresses: dict[str, str | None]) -> None:
    """Refuse a port given by number that another process listens on, before the store
    is opened (or made): the server's own refusal comes once a new store's directory
    exists, after a log line of gRPC's. NB: a port taken after this check is still
    refused, by the server."""
    for flag, address in addresses.items():
        if address is None:
            continue
        host, port = parse_listen(address)
        if port == 0:
            continue
        try:
            found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        except OSError:
            continue  # NB: the server says what is wrong with the host
        for family, kind, proto, _, where in found:
            try:
                with socket.socket(family, kind, proto) as probe:
                    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers do
                    probe.bind(where)
            except OSError as exc:
                # NB: in use only: an address of the host this machine cannot take (::1
                # without IPv6) is the server's to skip, as it does when another one binds
                if exc.errno == errno.EADDRINUSE:
                    raise NodeUnavailableError(
                        f"cannot listen on {address} (--{flag}): {exc.strerror}"
                    ) from None


def run_node(
    store: Path,
    listen: str,
    config: StoreConfig,
    *,
    sql_addr: str | None = None,
    changefeed_runner: str = "spark",
    spark_master: str | None = None,
    join: list[str] | None = None,
    cluster_config: ClusterConfig | None = None,
    http_addr: str | None = None,
    log_level: str = "info",
    certs_dir: Path | None = None,
    external_io_dir: Path | None = None,
    changefeed_buffers: NodeBuffers | None = None,
    batch_addr: str | None = None,
) -> int:
    """Serve the store on ``listen`` (gRPC), ``sql_addr`` (PostgreSQL clients) and
    ``http_addr`` (metrics for Prometheus at ``/_status/vars``) and
    run its changefeed jobs until SIGTERM or SIGINT; then stop the jobs (they resume at
    the next start) and drain. Logs go to ``store/logs/feedkv.log`` from ``log_level``
    up, once the store is open (:mod:`feedkv.server.logs`). ``certs_dir``: every port
    with TLS from there; ``None``: plaintext, which ``feedkv start`` does only when
    asked (``--insecure``) and says so on stderr and in the log."""
    _check_ports_free(
        {
            "listen": listen,
            "sql-addr": sql_addr,
            "http-addr": http_addr,
            "raft-addr": cluster_config.raft_addr if cluster_config is not None else None,
            "batch-addr": batch_addr,
        }
    )
    stop = threading.Event()
    opened = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()
        if not opened.is_set():
            # NB: a new node may wait for `feedkv init` without end: stop waiting
            raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # `kill -USR1`: every stack
    # NB: from the start, as CockroachDB's: a node that waits to join (another cluster's
    # CA, a --join that names no member) or cannot open its store says why in its log
    logs = _open_logs(store, log_level)
    try:
        db = connect(
            store,
            listen=listen,
            sql_addr=sql_addr,
            config=config,
            changefeed_runner=changefeed_runner,
            spark_master=spark_master,
            join=join or [],
            cluster_config=cluster_config,
            http_addr=http_addr,
            clock=_testing_clock(),
            certs_dir=certs_dir,
            external_io_dir=external_io_dir,
            changefeed_buffers=changefeed_buffers,
            batch_addr=batch_addr,
        )
    except KeyboardInterrupt:  # SIGTERM or Ctrl-C before the node served
        print("feedkv node stopped before it served", file=sys.stderr, flush=True)
        if logs is not None:
            log.info("stopped before it served")
            logs.close()
        return 0
    except BaseException as exc:
        if logs is not None:
            # NB: to the file alone: the command prints it on stderr
            logs.to_file_only(logging.ERROR, f"the node could not start: {exc}", exc)
            logs.close()
        raise
    opened.set()
    try:
        node = db.node
        if node is not None:
            # `feedkv node drain --shutdown`: stop as on SIGTERM (the drain is done)
            node.on_shutdown = lambda: os.kill(os.getpid(), signal.SIGTERM)
            if logs is not None:
                cluster = node.cluster
                logs.name_node(str(cluster.ident.node_id) if cluster is not None else node.node_id)
        db.changefeeds.start()
        if sql_addr is not None:
            # NB: on this thread (see load_engine); before the URL is out, so that it
            # slows no client's first statements (an IMPORT sent at once), and before
            # the heap is frozen (its modules are kept)
            from feedkv.sql.analytic import load_engine

            load_engine()
        ports = ""
        if db.node is not None and db.node.http_server is not None:
            ports += f", HTTP on {db.node.http_url}"
        if sql_addr is not None:  # NB: last: the URL ends at the space (NodeProcess)
            ports += f", SQL on {db.serve_sql()}"
        url = db.node.url if db.node is not None else db.serving_url()
        listening = f"feedkv node listening on {url}{ports} (store {store})"
        log.info("%s", listening)
        print(listening, flush=True)
        if certs_dir is None:
            warning = (
                "RUNNING IN INSECURE MODE (--insecure): no TLS on any port; "
                "anyone who reaches the gRPC port can read and write every key, the SQL "
                "port takes the user name a client gives (from loopback addresses only), and "
                "changefeed sink secrets are sealed with a key kept in the store itself, "
                "which protects them from no one who can read the store's files"
            )
            if logs is not None:  # NB: its handler writes warnings to stderr too: once
                log.warning("%s", warning)
            else:
                print(f"feedkv: WARNING: {warning}", file=sys.stderr, flush=True)
        # NB: once up: full collections then skip the heap a node keeps for its life
        frozen = freeze_startup_heap()
        log.debug("%d objects of the startup heap frozen for the garbage collector", frozen)
        _wait_for(stop)
        log.info("draining")
        print("feedkv node draining", file=sys.stderr, flush=True)
    finally:
        db.close()
        if logs is not None:
            logs.close()
    print("feedkv node stopped", file=sys.stderr, flush=True)
    return 0
