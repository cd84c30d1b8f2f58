"""Who a CLI command that dials a node (``feedkv sql``, ``node``, ``debug rangefeed``)
connects as, and how it proves it: as ``cockroach sql`` does.

The user is the URL's (``feedkv://pam@host:port``), else ``--user`` where the command
has one, else the URL's ``?user=``, else ``root``. On a secure connection (``--certs-dir``
or the URL's ``?certs_dir=``) the proof is, in this order:

1. the password in the URL, ``feedkv://pam:PASSWORD@host:port`` (percent-encoded as in
   any URL: ``%40`` for ``@``);
2. the user's client certificate, ``client.USER.crt`` in the certs directory;
3. the ``FEEDKV_PASSWORD`` environment variable (used only without a certificate, as
   libpq uses ``PGPASSWORD`` only when the server asks for a password). ``cockroach``
   has no such variable for its client commands (its Docker image's
   ``COCKROACH_PASSWORD`` sets the first user's password when the container starts,
   which is another thing); ``psql`` has ``PGPASSWORD``, which ``feedkv sql --url
   postgresql://...`` honours too, through libpq;
4. a prompt (``getpass``, not echoed) when stdin is a terminal;

and else an :class:`~feedkv.errors.InvalidArgumentError` that says which of these to
give. A plaintext connection (an ``--insecure`` node) needs no proof; a password given
for one is refused by :func:`feedkv.connect` rather than sent in clear.

The password never appears in what the command prints or logs: it is taken out of the
URL here (:attr:`Login.url` has no user information), and :class:`Login`'s ``repr``
hides it.
"""

from __future__ import annotations

import getpass
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TextIO
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from feedkv.errors import InvalidArgumentError, InvalidURLError
from feedkv.kv.address import node_url_params
from feedkv.security.certs import CertsDir

if TYPE_CHECKING:
    import grpc

    from feedkv.db import DB

__all__ = [
    "PASSWORD_ENV",
    "Login",
    "connect",
    "dial",
    "resolve_login",
    "split_userinfo",
    "without_password",
]

PASSWORD_ENV = "FEEDKV_PASSWORD"
CONNECT_TIMEOUT_S = 5.0  # as a feedkv:// client's dial


@dataclass(frozen=True)
class Login:
    """Whom to connect as: ``url`` without user information, ``certs_dir`` (``None``:
    plaintext), ``user``, and ``password`` (``None``: the user's client certificate, or
    none needed)."""

    url: str
    certs_dir: str | None
    user: str
    password: str | None = field(default=None, repr=False)


def split_userinfo(url: str) -> tuple[str, str | None, str | None]:
    """``(url without user:password@, user, password)``, the two percent-decoded
    (``None`` when absent)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None, None
    userinfo, _, hostport = parts.netloc.rpartition("@")
    name, colon, secret = userinfo.partition(":")
    if not name:
        # NB: the URL is not echoed: it holds a password
        raise InvalidURLError("the URL names a password but no user: USER:PASSWORD@HOST:PORT")
    bare = urlunsplit(parts._replace(netloc=hostport))
    return bare, unquote(name), unquote(secret) if colon else None


def without_password(url: str) -> str:
    """``url`` as it may be shown: its user kept, its password left out."""
    bare, user, _ = split_userinfo(url)
    if user is None:
        return bare
    parts = urlsplit(bare)
    return urlunsplit(parts._replace(netloc=f"{quote(user, safe='')}@{parts.netloc}"))


def login_user(url: str, *, certs_dir: str | Path | None, user: str | None = None) -> Login:
    """Whom ``url`` (with ``--user`` ``user`` and ``--certs-dir`` ``certs_dir``) connects
    as, before any password is looked for: its password only if the URL holds one."""
    bare, url_user, password = split_userinfo(url)
    params = node_url_params(bare) if "://" in bare else {}
    if url_user is not None and user is not None and url_user != user:
        raise InvalidArgumentError(
            f"the URL's user {url_user!r} and --user {user!r} differ: give one of them"
        )
    name = url_user or user or params.get("user") or "root"
    certs = str(certs_dir) if certs_dir is not None else params.get("certs_dir")
    return Login(bare, certs, name, password)


def resolve_login(
    url: str,
    *,
    certs_dir: str | Path | None,
    user: str | None = None,
    env: Mapping[str, str] | None = None,
    stdin: TextIO | None = None,
    ask: Callable[[str], str] = getpass.getpass,
) -> Login:
    """The :class:`Login` for ``url`` (see the module docstring); ``user``: the
    command's ``--user`` if it was given. ``ask`` prompts for a password (not echoed)."""
    env = os.environ if env is None else env
    stdin = stdin or sys.stdin
    who = login_user(url, certs_dir=certs_dir, user=user)
    bare, certs, name, password = who.url, who.certs_dir, who.user, who.password
    if certs is not None and not Path(certs).is_dir():
        # NB: said first: "no client certificate for 'root' in DIR" sent users looking
        # for a certificate in a directory that was misspelt
        raise InvalidArgumentError(
            f"the certs directory {str(certs)!r} does not exist: give the one `feedkv cert` "
            "made (it holds ca.crt) or, for nodes started with --insecure, --insecure"
        )
    if certs is None or password is not None:
        return Login(bare, certs, name, password)
    if CertsDir(Path(certs)).has_identity(name):
        return Login(bare, certs, name)
    password = env.get(PASSWORD_ENV) or None
    if password is None and stdin.isatty():
        password = ask(f"Enter password for {name}: ") or None
    if password is None:
        raise InvalidArgumentError(
            f"no client certificate for {name!r} in {certs} (client.{name}.crt) and no "
            f"password: put it in the URL (feedkv://{name}:PASSWORD@HOST:PORT), set "
            f"{PASSWORD_ENV}, or run the command from a terminal to be asked for it"
        )
    return Login(bare, certs, name, password)


def connect(url: str, login: Login | None) -> DB:
    """:func:`feedkv.connect` to ``url`` as ``login`` (``None``: as the URL says)."""
    import feedkv

    if login is None:
        return feedkv.connect(url)
    return feedkv.connect(url, certs_dir=login.certs_dir, user=login.user, password=login.password)


@contextmanager
def dial(login: Login) -> Iterator[grpc.Channel]:
    """A gRPC channel to the one node at ``login.url``, as ``login``, for its msgpack
    methods (:func:`feedkv.kv.dialer.call`): ``feedkv init`` and ``node drain`` call
    that node itself, not a cluster through it. Raises
    :class:`~feedkv.errors.NodeUnavailableError` when it does not answer."""
    # NB: imported here: the commands that never dial a node do not import gRPC
    from feedkv.kv.address import host_port, parse_node_url
    from feedkv.kv.grpc_transport import await_ready, unanswered
    from feedkv.security.tls import ClientTLS, open_channel

    address = host_port(*parse_node_url(login.url))
    tls = (
        ClientTLS.load(login.certs_dir, login.user, password=login.password)
        if login.certs_dir is not None
        else None
    )
    with open_channel(address, [], tls) as channel:
        failed = await_ready(channel, CONNECT_TIMEOUT_S)
        if failed is not None:
            raise unanswered(address, failed, tls)
        yield channel
