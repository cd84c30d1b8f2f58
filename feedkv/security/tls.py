"""TLS for every port, from a certs directory (:mod:`feedkv.security.certs`).

A secure node serves with :class:`ServerTLS`: gRPC requires a client certificate signed
by the cluster's CA (nodes present ``node.crt``, admins and tools ``client.root.crt``;
who may call what is decided per call from the certificate's CN, :func:`peer_user`);
the SQL port asks for one but also takes passwords (SCRAM) over TLS; the HTTP port is
https without client certificates. Clients build a :class:`ClientTLS` for one identity:
the CA they trust and the certificate they present.

``None`` in place of either means plaintext: an insecure node (``feedkv start
--insecure``), or an embedded one that serves its own Spark executors on loopback.
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from feedkv.errors import InvalidArgumentError
from feedkv.security.certs import NODE_USER, CertsDir, load_certs_dir

__all__ = ["ClientTLS", "ServerTLS", "open_channel", "peer_user"]


@dataclass(frozen=True)
class ClientTLS:
    """A client's side of TLS: trust ``certs.ca_cert``; present ``user``'s certificate
    when the directory has one (a SQL client may log in with a password instead)."""

    certs: CertsDir
    user: str

    @classmethod
    def load(cls, certs_dir: str | Path, user: str, *, require_cert: bool = True) -> ClientTLS:
        """InvalidArgumentError names a missing or bad file."""
        certs = load_certs_dir(Path(certs_dir))
        if require_cert or certs.has_identity(user):
            load_certs_dir(certs.path, user=user)
        return cls(certs, user)

    @property
    def has_cert(self) -> bool:
        return self.certs.has_identity(self.user)

    def grpc_credentials(self) -> grpc.ChannelCredentials:
        if not self.has_cert:
            raise InvalidArgumentError(
                f"no certificate for {self.user!r} in {self.certs.path} "
                f"(client.{self.user}.crt): make one with `feedkv cert create-client`"
            )
        cert, key = self.certs.identity(self.user)
        return grpc.ssl_channel_credentials(
            root_certificates=self.certs.ca_cert.read_bytes(),
            private_key=key.read_bytes(),
            certificate_chain=cert.read_bytes(),
        )

    def ssl_context(self) -> ssl.SSLContext:
        """Verify the server against the CA and its host name; present the client
        certificate when there is one."""
        context = ssl.create_default_context(cafile=str(self.certs.ca_cert))
        if self.has_cert:
            cert, key = self.certs.identity(self.user)
            context.load_cert_chain(str(cert), str(key))
        return context


@dataclass(frozen=True)
class ServerTLS:
    """A node's side: its ``node.crt`` and the CA its clients' certificates come from."""

    certs: CertsDir

    @classmethod
    def load(cls, certs_dir: str | Path) -> ServerTLS:
        return cls(load_certs_dir(Path(certs_dir), user=NODE_USER))

    def grpc_credentials(self) -> grpc.ServerCredentials:
        """Client certificates required: gRPC is for nodes and admins."""
        return grpc.ssl_server_credentials(
            [(self.certs.node_key.read_bytes(), self.certs.node_cert.read_bytes())],
            root_certificates=self.certs.ca_cert.read_bytes(),
            require_client_auth=True,
        )

    def ssl_context(self, *, client_certs: bool) -> ssl.SSLContext:
        """``client_certs``: ask for (and verify, when given) a client certificate."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(str(self.certs.node_cert), str(self.certs.node_key))
        if client_certs:
            context.load_verify_locations(cafile=str(self.certs.ca_cert))
            context.verify_mode = ssl.CERT_OPTIONAL
        return context

    def client(self) -> ClientTLS:
        """The node's identity when it calls other nodes."""
        return ClientTLS(self.certs, NODE_USER)


def open_channel(
    address: str, options: list[tuple[str, Any]], tls: ClientTLS | None
) -> grpc.Channel:
    """A channel to ``address``: TLS with ``tls``'s identity, plaintext without.

    Proxies: only when ``grpc_proxy`` is set (gRPC's own variable) does the channel go
    through the HTTP proxy it names; a machine's ``http_proxy``, set for the web, must
    not carry calls between nodes. So every channel a node or client opens takes the
    same way (:mod:`feedkv.testing.partition` cuts nodes apart through such proxies)."""
    proxied = 1 if os.environ.get("grpc_proxy") else 0  # noqa: SIM112 (gRPC reads it so)
    options = [*options, ("grpc.enable_http_proxy", proxied)]
    if tls is None:
        return grpc.insecure_channel(address, options=options)
    return grpc.secure_channel(address, tls.grpc_credentials(), options=options)


def peer_user(context: grpc.ServicerContext) -> str | None:
    """The CN of the certificate the caller presented (``None``: plaintext)."""
    names = context.auth_context().get("x509_common_name")
    if not names:
        return None
    name = names[0]
    return name.decode() if isinstance(name, bytes) else str(name)
