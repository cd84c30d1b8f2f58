"""The ``feedkv`` command: the edge where argv and the terminal meet the library."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from feedkv.errors import FeedKVError, InvalidArgumentError, PermissionDeniedError
from feedkv.kv.address import host_port, parse_listen, split_host_port
from feedkv.testing.benches import BENCH_DIR, bench_module

if TYPE_CHECKING:
    from feedkv.cli.credentials import Login

__all__ = ["main"]


def _bench_names() -> list[str]:
    if not BENCH_DIR.is_dir():
        return []
    return sorted(p.stem for p in BENCH_DIR.glob("*.py") if not p.stem.startswith("_"))


def _run_bench(name: str, args: list[str]) -> int:
    names = _bench_names()
    if name not in names:
        known = ", ".join(names) or f"none found (benchmarks live in {BENCH_DIR})"
        print(f"feedkv bench: unknown benchmark {name!r}; available: {known}", file=sys.stderr)
        return 2
    code: int = bench_module(name).main(args)
    return code


def _negative_values(argv: Sequence[str]) -> list[str]:
    """``--flag -1s`` as ``--flag=-1s``: argparse takes a value that starts with ``-`` for
    an option, and would refuse the line without saying which value is wrong (no feedkv
    option looks like ``-1``)."""
    out: list[str] = []
    for arg in argv:
        previous = out[-1] if out else ""
        if arg[:2] in _NEGATIVE and previous.startswith("--") and "=" not in previous:
            out[-1] = f"{previous}={arg}"
            continue
        out.append(arg)
    return out


_NEGATIVE = {f"-{d}" for d in "0123456789."}


def _size(flag: str) -> Callable[[str], int]:
    """An argparse type reading ``flag``'s size (``512MiB``), refusing a bad one by name."""

    def parse(text: str) -> int:
        from feedkv.util.units import parse_size

        try:
            return parse_size(text)
        except FeedKVError as exc:
            raise argparse.ArgumentTypeError(f"{flag}: {exc}") from None

    return parse


_PASSWORD_HELP = (
    "in the URL (feedkv://USER:PASSWORD@HOST:PORT), in $FEEDKV_PASSWORD, or typed at the "
    "prompt when stdin is a terminal"
)
_CERTS_HELP = (
    "connect with TLS from this directory, as the URL's user (feedkv://USER@HOST:PORT; "
    "default root) with its client certificate, or with a password: " + _PASSWORD_HELP
)


DEFAULT_SQL_PORT = 26257  # CockroachDB's, feedkv start --sql-addr's
DEFAULT_NODE_URL = "feedkv://127.0.0.1:26258"  # feedkv start --listen's default


def sql_url(host: str, user: str, database: str, insecure: bool) -> str:
    """The ``postgresql://`` URL ``cockroach sql --host HOST[:PORT]`` connects to: the
    SQL port 26257 when ``host`` names none; ``sslmode=disable`` when ``insecure``."""
    address = split_host_port(host)
    if address is None:
        if ":" in host.strip("[]") and not host.startswith("["):
            raise InvalidArgumentError(f"--host {host!r}: expected HOST[:PORT] ([IPv6]:PORT)")
        address = (host.strip("[]"), DEFAULT_SQL_PORT)
    name, port = address
    if not name:
        raise InvalidArgumentError(f"--host {host!r} names no host")
    tail = "?sslmode=disable" if insecure else ""
    return f"postgresql://{quote(user, safe='')}@{host_port(name, port)}/{quote(database)}{tail}"


def insecure_sql_url(url: str) -> str:
    """``url`` (a ``postgresql://`` URL) for a node started with ``--insecure``: without
    TLS (``sslmode=disable`` unless it says so itself); refused if it asks for TLS."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    modes = [value for name, value in query if name == "sslmode"]
    if any(mode not in ("disable", "allow", "prefer") for mode in modes):
        raise InvalidArgumentError(
            f"--insecure connects without TLS, but the URL asks for sslmode={modes[-1]}"
        )
    if not modes:
        query.append(("sslmode", "disable"))
    return urlunsplit(parts._replace(query=urlencode(query)))


def _node_url(text: str) -> str:
    """An argparse type for ``--url``: a URL, never a path. :func:`feedkv.connect` opens
    any other text as a store directory, so ``--url 127.0.0.1:26258`` would create an
    empty store of that name and report on it as if it were the cluster."""
    if "://" in text:
        return text
    hint = f"; did you mean feedkv://{text}?" if split_host_port(text) is not None else ""
    raise argparse.ArgumentTypeError(
        f"{text!r} is not a URL: expected feedkv://HOST:PORT (feedkv sql also takes "
        f"postgresql://USER@HOST:PORT/DATABASE, and a store directory as --store){hint}"
    )


def _add_security(parser: argparse.ArgumentParser) -> None:
    """``--certs-dir DIR | --insecure`` of a command that dials a node, as ``cockroach``'s
    client commands take them (``--insecure``: the node was started with ``--insecure``,
    so the command dials it without TLS, as it does with neither flag)."""
    security = parser.add_mutually_exclusive_group()
    security.add_argument("--certs-dir", help=_CERTS_HELP)
    security.add_argument(
        "--insecure", action="store_true", help="the nodes were started with --insecure"
    )


def _login(args: argparse.Namespace, url: str) -> Login:
    """Whom a command that dials ``url`` connects as (:mod:`feedkv.cli.credentials`)."""
    from feedkv.cli.credentials import resolve_login

    return resolve_login(url, certs_dir=args.certs_dir, user=getattr(args, "user", None))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="feedkv", description="feedkv: a transactional MVCC store built around change feeds"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = commands.add_parser("demo", help="run the end-to-end demo on an embedded store")
    demo.add_argument("--store", default="demo-data", help="store directory (recreated)")
    demo.add_argument("--seconds", type=float, default=20.0, help="length of the workload")
    demo.add_argument(
        "--nodes",
        type=int,
        default=1,
        help="run on a local cluster of this many node processes, moving ranges between "
        "them while the changefeed runs (default 1: an embedded store)",
    )

    start = commands.add_parser(
        "start", help="run a node: a store served over gRPC and to PostgreSQL clients"
    )
    start.add_argument("--store", required=True, help="store directory (created if missing)")
    start.add_argument(
        "--external-io-dir",
        help="the node reads and writes users' files (file:// and nodelocal:// sinks, local "
        "lakes, IMPORT INTO) only below this directory (default STORE/extern)",
    )
    security = start.add_mutually_exclusive_group()
    security.add_argument(
        "--certs-dir",
        help="serve every port with TLS from this certs directory (feedkv cert); one of "
        "--certs-dir or --insecure is required",
    )
    security.add_argument(
        "--insecure",
        action="store_true",
        help="serve every port in plaintext, without authentication (testing only)",
    )
    start.add_argument(
        "--listen",
        default="127.0.0.1:26258",
        help="HOST:PORT of the gRPC API (feedkv:// URLs, Spark; port 0: any free)",
    )
    start.add_argument(
        "--raft-addr",
        help="HOST:PORT of the port node-to-node Raft messages use (default: any free port "
        "on the --listen host; fix it to let a firewall between nodes open it)",
    )
    start.add_argument(
        "--batch-addr",
        help="HOST:PORT of the port clients send their concurrent batches to (default: any "
        "free port on the --listen host, which clients ask the node for; fix it to let a "
        "firewall open it)",
    )
    start.add_argument(
        "--sql-addr",
        default="127.0.0.1:26257",
        help="HOST:PORT of the SQL port, PostgreSQL's wire protocol (port 0: any free)",
    )
    start.add_argument(
        "--http-addr",
        default="127.0.0.1:8080",
        help="HOST:PORT of the HTTP port: the admin page at /, metrics for Prometheus at "
        "/_status/vars (port 0: any free)",
    )
    start.add_argument(
        "--max-changefeed-memory",
        default="512MiB",
        type=_size("--max-changefeed-memory"),
        help="records this node's changefeeds hold for their sinks, in memory, across all "
        "changefeeds (default 512MiB); past it they spill to disk",
    )
    start.add_argument(
        "--max-disk-changefeed-storage",
        default="4GiB",
        type=_size("--max-disk-changefeed-storage"),
        help="records spilled to disk under STORE/changefeed-spill (default 4GiB); past "
        "it a changefeed whose sink takes nothing stalls: its feed is torn down until "
        "its sink's backlog clears, then it restarts from its high-water mark",
    )
    start.add_argument(
        "--log-level",
        default="info",
        choices=("debug", "info", "warning", "error"),
        help="the least severe level written to the JSON log, STORE/logs/feedkv.log "
        "(warnings and errors also go to stderr; default info)",
    )
    start.add_argument(
        "--join",
        default="",
        help="HOST:PORT[,HOST:PORT...] of the cluster's nodes (a store that never ran "
        "joins their cluster, or waits for `feedkv init` when they know none yet); "
        "without --join the node starts a cluster of its own",
    )
    start.add_argument(
        "--rebalance-interval",
        default="10s",
        help="how often the node moves a range to the live node holding the fewest, when "
        "it holds two more (0s: never; default 10s)",
    )
    start.add_argument(
        "--lease-transfer-wait",
        default="5s",
        help="how long a stopping node waits for the leases of the ranges it leads to move "
        "to other nodes before it drains its calls (CockroachDB's "
        "server.shutdown.lease_transfer_wait; 0s: it hands none over, and the others "
        "elect leaders once it is gone; default 5s)",
    )
    start.add_argument(
        "--replicas",
        type=int,
        default=1,
        help="how many replicas each range keeps, on distinct nodes, replicated with Raft "
        "(default 1: each range on one node; 3 survives the loss of any one node): the "
        "default zone's num_replicas when this node starts a cluster; later, ALTER RANGE "
        "default CONFIGURE ZONE USING num_replicas = N changes it for every node",
    )
    start.add_argument(
        "--max-offset",
        default="500ms",
        help="the largest clock offset from the other nodes this node serves with (500ms)",
    )
    start.add_argument(
        "--closed-ts-target",
        default="1s",
        help="how far behind now ranges close timestamps (e.g. 1s, 200ms; default 1s)",
    )
    start.add_argument(
        "--txn-liveness",
        default="5s",
        help="how long a transaction without a heartbeat stays alive (default 5s)",
    )
    start.add_argument(
        "--range-max-bytes",
        default="64MiB",
        help="split ranges past this size; merge neighbours below a quarter of it (64MiB)",
    )
    start.add_argument(
        "--spark-master",
        help="the Spark master changefeed jobs run on (default: the spark.master cluster "
        "setting, $FEEDKV_SPARK_MASTER or local[*])",
    )
    start.add_argument(
        "--locality",
        default="",
        help="where the node runs, as key=value tiers from the most general, such as "
        "region=us-east1,zone=a (changefeeds' execution_locality picks nodes by it)",
    )
    start.add_argument(
        "--changefeed-runner",
        choices=("spark", "thread"),
        default="spark",
        help="run changefeed jobs as Spark queries (default) or as threads of the node",
    )

    sql = commands.add_parser(
        "sql", help="run SQL statements, or an interactive SQL shell without -e"
    )
    where = sql.add_mutually_exclusive_group()
    where.add_argument(
        "--url",
        type=_node_url,
        help=f"the node to talk to (default {DEFAULT_NODE_URL}; with --insecure alone, "
        f"its SQL port, 127.0.0.1:{DEFAULT_SQL_PORT}, as cockroach sql --insecure)",
    )
    where.add_argument("--store", help="open this store directory in-process instead")
    where.add_argument(
        "--host",
        help="HOST[:PORT] of a node's SQL port (26257 by default), as cockroach sql --host: "
        "the same as --url postgresql://USER@HOST:PORT/DATABASE, with TLS from --certs-dir "
        "or, with --insecure, without",
    )
    sql.add_argument(
        "--insecure",
        action="store_true",
        help="connect without TLS, to a node started with --insecure",
    )
    sql.add_argument(
        "-e",
        "--execute",
        action="append",
        default=[],
        metavar="STATEMENT",
        help="run STATEMENT and print its results (repeatable); stops at the first error",
    )
    sql.add_argument("--format", choices=("table", "csv", "json"), default="table")
    sql.add_argument(
        "--user",
        help="run statements as this user (default: the URL's user, else root)",
    )
    sql.add_argument(
        "--certs-dir",
        help="connect with TLS, as --user, with the certificates in this directory "
        "(a user without a client certificate there logs in with a password: "
        f"{_PASSWORD_HELP})",
    )
    sql.add_argument("--database", "-d", default="defaultdb", help="current database")

    init = commands.add_parser(
        "init",
        help="bootstrap a new cluster on one of the nodes started with the same --join list",
    )
    init.add_argument(
        "--url",
        type=_node_url,
        default=DEFAULT_NODE_URL,
        help="the node to bootstrap it on: any waiting node (it first takes a claim at a "
        "majority of its --join list, so that only one node bootstraps)",
    )
    _add_security(init)

    node = commands.add_parser("node", help="the nodes of a cluster")
    node_commands = node.add_subparsers(dest="node_command", required=True, metavar="COMMAND")
    status = node_commands.add_parser(
        "status", help="each node: address, SQL address, epoch, liveness, ranges held, clock offset"
    )
    status.add_argument(
        "node_ids", type=int, nargs="*", metavar="NODE_ID", help="these nodes only (default: all)"
    )
    status.add_argument("--url", type=_node_url, default=DEFAULT_NODE_URL, help="any node")
    status.add_argument("--format", choices=("table", "csv", "json"), default="table")
    status.add_argument(
        "--decommission",
        action="store_true",
        help="also the nodes decommissioned and gone, with is_decommissioning and is_draining",
    )
    _add_security(status)
    ls = node_commands.add_parser(
        "ls", help="the id of each node (not those decommissioned and gone)"
    )
    ls.add_argument("--url", type=_node_url, default=DEFAULT_NODE_URL, help="any node")
    ls.add_argument("--format", choices=("table", "csv", "json"), default="table")
    _add_security(ls)
    decommission = node_commands.add_parser(
        "decommission",
        help="move every replica off the nodes, then remove them from the cluster for good",
    )
    decommission.add_argument("node_ids", type=int, nargs="+", metavar="NODE_ID")
    decommission.add_argument("--url", type=_node_url, default=DEFAULT_NODE_URL, help="any node")
    decommission.add_argument(
        "--wait",
        choices=("all", "none"),
        default="all",
        help="all: until the nodes hold no replica, then mark them decommissioned (the "
        "default); none: mark them decommissioning and return",
    )
    decommission.add_argument("--format", choices=("table", "csv", "json"), default="table")
    _add_security(decommission)
    drain = node_commands.add_parser(
        "drain",
        help="move the node's leases away and end its SQL connections, leaving it up and "
        "draining until restarted (or stopping it: --shutdown)",
    )
    drain.add_argument(
        "node_id", type=int, nargs="?", metavar="NODE_ID", help="default: the node at --url"
    )
    drain.add_argument("--url", type=_node_url, default=DEFAULT_NODE_URL, help="any node")
    drain.add_argument("--shutdown", action="store_true", help="stop the node once it is drained")
    drain.add_argument(
        "--drain-wait",
        default="10m",
        help="how long to wait for the drain to complete (10m, as cockroach node drain's)",
    )
    _add_security(drain)
    recommission = node_commands.add_parser(
        "recommission", help="take back nodes that are decommissioning (not decommissioned)"
    )
    recommission.add_argument("node_ids", type=int, nargs="+", metavar="NODE_ID")
    recommission.add_argument("--url", type=_node_url, default=DEFAULT_NODE_URL, help="any node")
    _add_security(recommission)

    debug = commands.add_parser("debug", help="tools for looking inside a running node")
    debug_commands = debug.add_subparsers(dest="debug_command", required=True, metavar="TOOL")
    feed = debug_commands.add_parser(
        "rangefeed", help="print a span's changes and checkpoints as they arrive"
    )
    feed.add_argument("--url", type=_node_url, default=DEFAULT_NODE_URL, help="the node to watch")
    _add_security(feed)
    feed.add_argument("--since", help="replay changes after this timestamp (default: now)")
    feed.add_argument("--with-diff", action="store_true", help="show each change's old value")
    feed.add_argument(
        "--timestamp-order",
        action="store_true",
        help="replay history in timestamp order across keys (default: each key's changes "
        "in order, keys in the order cheapest to read)",
    )
    feed.add_argument("--format", choices=("text", "json"), default="text")
    feed.add_argument("start", help="first key (\\xNN escapes allowed; '' for everything)")
    feed.add_argument(
        "end", nargs="?", help="end key, exclusive (default: every key with START as prefix)"
    )

    cert = commands.add_parser("cert", help="create the CA, node and client certificates")
    cert_commands = cert.add_subparsers(dest="cert_command", required=True, metavar="ACTION")
    for action, what in (
        (
            "create-ca",
            "create the CA: CERTS_DIR/ca.crt, its key at --ca-key, and CERTS_DIR/secrets.key "
            "(the key that seals changefeed secrets; copy both files to every node)",
        ),
        ("create-node", "create node.crt/node.key for the node's HOSTs"),
        ("create-client", "create client.USER.crt/.key (CN=USER)"),
        (
            "create-secrets-key",
            "create CERTS_DIR/secrets.key in a certs dir made without one (never replaces one)",
        ),
        (
            "revoke",
            "revoke a certificate: add it to CERTS_DIR/ca.crl, signed by the CA (copy the "
            "file to every node's certs directory; nodes read it again when it changes)",
        ),
    ):
        sub = cert_commands.add_parser(action, help=what)
        if action == "create-node":
            sub.add_argument("hosts", nargs="+", metavar="HOST", help="a name or IP address")
        if action == "create-client":
            sub.add_argument("user", metavar="USER")
            sub.add_argument(
                "--also-generate-pkcs8-key",
                action="store_true",
                help="also write client.USER.key.pk8, the key in PKCS#8 DER as Java's "
                "PostgreSQL driver (pgJDBC) reads it",
            )
        if action == "revoke":
            sub.add_argument(
                "target",
                metavar="CERT_OR_SERIAL",
                help="a certificate file (client.USER.crt, node.crt) or its serial number "
                "(decimal, 0x-hex, or hex bytes with colons as openssl prints it)",
            )
        sub.add_argument("--certs-dir", required=True, help="the certs directory")
        if action == "create-secrets-key":
            continue
        sub.add_argument(
            "--ca-key", required=True, help="the CA's key file (keep it out of the certs dir)"
        )
        if action != "revoke":
            sub.add_argument("--overwrite", action="store_true", help="replace existing files")

    bench = commands.add_parser("bench", help="run a benchmark and print its JSON record")
    bench.add_argument("name", help="benchmark name: " + (", ".join(_bench_names()) or "none"))
    bench.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the benchmark")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # NB: gRPC's core logs each failed TLS handshake (a client of another CA, a
    # PostgreSQL port dialled as gRPC) at INFO on stderr, in its own format, before the
    # command's one clear error; it reads the variable when grpc is first imported,
    # which no command has done yet. GRPC_VERBOSITY=info in the environment brings them back.
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    args = _parser().parse_args(_negative_values(sys.argv[1:] if argv is None else argv))
    try:
        if args.command == "demo":
            from feedkv.cli.demo import run_demo

            return run_demo(Path(args.store), seconds=args.seconds, nodes=args.nodes)
        if args.command == "start":
            from feedkv.changefeed.node_buffers import NodeBuffers
            from feedkv.cli.start import cluster_config, run_node, store_config

            config = store_config(args.closed_ts_target, args.txn_liveness, args.range_max_bytes)
            membership = cluster_config(
                args.rebalance_interval,
                args.max_offset,
                args.replicas,
                args.locality,
                lease_transfer_wait=args.lease_transfer_wait,
                raft_addr=args.raft_addr,
            )
            if args.batch_addr is not None:
                parse_listen(args.batch_addr)  # NB: refused here, as a bad --raft-addr is
            if args.certs_dir is None and not args.insecure:
                print(
                    "feedkv: error: a node is secure by default: give --certs-dir DIR (make one "
                    "with `feedkv cert`) or, to run without TLS or authentication, --insecure",
                    file=sys.stderr,
                )
                return 1
            return run_node(
                Path(args.store),
                args.listen,
                config,
                sql_addr=args.sql_addr,
                http_addr=args.http_addr,
                log_level=args.log_level,
                changefeed_runner=args.changefeed_runner,
                spark_master=args.spark_master,
                join=[a.strip() for a in args.join.split(",") if a.strip()],
                cluster_config=membership,
                certs_dir=Path(args.certs_dir) if args.certs_dir else None,
                external_io_dir=Path(args.external_io_dir or Path(args.store) / "extern"),
                changefeed_buffers=NodeBuffers.of(
                    args.max_changefeed_memory, args.max_disk_changefeed_storage
                ),
                batch_addr=args.batch_addr,
            )
        if args.command == "init":
            from feedkv.cli.init import run_init

            login = _login(args, args.url)
            if login.certs_dir is None and not args.insecure:
                raise InvalidArgumentError(
                    "feedkv init needs --certs-dir DIR (root's client certificate) or, "
                    "for nodes started with --insecure, --insecure"
                )
            return run_init(login)
        if args.command == "node":
            from feedkv.cli import node as node_cli

            login = _login(args, args.url)
            if args.node_command == "decommission":
                return node_cli.run_node_decommission(
                    login.url,
                    args.node_ids,
                    wait=args.wait == "all",
                    output=args.format,
                    login=login,
                )
            if args.node_command == "recommission":
                return node_cli.run_node_recommission(login.url, args.node_ids, login=login)
            if args.node_command == "drain":
                from feedkv.util.units import parse_duration_ns

                wait_ns = parse_duration_ns(args.drain_wait)
                if wait_ns <= 0:
                    raise InvalidArgumentError(
                        f"--drain-wait {args.drain_wait!r} must be more than zero, such as 10m"
                    )
                return node_cli.run_node_drain(
                    login, args.node_id, shutdown=args.shutdown, drain_wait_s=wait_ns / 1e9
                )
            if args.node_command == "ls":
                return node_cli.run_node_ls(login.url, args.format, login=login)
            return node_cli.run_node_status(
                login.url,
                args.format,
                login=login,
                node_ids=args.node_ids,
                decommission=args.decommission,
            )
        if args.command == "sql":
            from feedkv.cli.credentials import login_user
            from feedkv.cli.pg_session import PG_SCHEMES
            from feedkv.cli.sql import run_sql, take_ctrl_c
            from feedkv.sql.catalog import ROOT

            take_ctrl_c()
            if args.insecure:
                if args.certs_dir is not None:
                    raise InvalidArgumentError("--insecure and --certs-dir say opposite things")
                if args.store is not None:
                    raise InvalidArgumentError("--insecure dials a node; --store opens a store")
                if args.url is None and not args.host:
                    args.host = "127.0.0.1"  # NB: cockroach sql --insecure's, its SQL port
                elif args.url is not None and args.url.startswith(PG_SCHEMES):
                    args.url = insecure_sql_url(args.url)
                # NB: a feedkv:// URL without --certs-dir dials without TLS already
            if args.host:
                if not args.insecure and args.certs_dir is None:
                    raise InvalidArgumentError(
                        "--host needs --certs-dir DIR (the cluster's ca.crt, and "
                        "client.USER.crt to log in by certificate) or, for a node started "
                        "with --insecure, --insecure"
                    )
                args.url = sql_url(args.host, args.user or "root", args.database, args.insecure)
            args.url = args.url or DEFAULT_NODE_URL
            if args.store or args.url.startswith(PG_SCHEMES):
                return run_sql(
                    args.store or args.url,
                    args.execute,
                    output=args.format,
                    user=args.user or "root",
                    database=args.database,
                    certs_dir=args.certs_dir,
                )
            # NB: refused before a password is asked for: none would let it in
            who = login_user(args.url, certs_dir=args.certs_dir, user=args.user)
            if who.certs_dir is not None and who.user != ROOT:
                raise PermissionDeniedError(
                    f"user {who.user}: feedkv sql --url feedkv://... runs SQL in this "
                    "process over the raw KV API, which is for root alone on a secure node; "
                    "connect to the node's SQL port instead: feedkv sql --url "
                    f"postgresql://{who.user}@HOST:26257/defaultdb --certs-dir DIR"
                )
            login = _login(args, args.url)
            return run_sql(
                login.url,
                args.execute,
                output=args.format,
                user=login.user,
                database=args.database,
                certs_dir=login.certs_dir,
                password=login.password,
            )
        if args.command == "debug":
            from feedkv.cli.debug_rangefeed import run_debug_rangefeed

            login = _login(args, args.url)
            return run_debug_rangefeed(
                login.url,
                args.start,
                args.end,
                args.since,
                args.with_diff,
                args.format,
                timestamp_order=args.timestamp_order,
                login=login,
            )
        if args.command == "cert":
            from feedkv.cli.cert import run_cert

            return run_cert(args)
        if args.command == "bench":
            return _run_bench(args.name, list(args.args))
    except FeedKVError as exc:
        print(f"feedkv: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 2


if __name__ == "__main__":
    sys.exit(main())
