"""INET values: an IPv4 or IPv6 host address with an optional network prefix length.

Ordered as PostgreSQL orders them: IPv4 before IPv6; then by the bits both prefixes
cover, then by prefix length, then by the whole address. That is the order of
(family, network address, prefix length, address), which :meth:`Inet.to_primitive`
lays out as bytes. Printed as PostgreSQL prints them: the address alone when the prefix covers it
all (``10.0.0.1``), else ``address/prefix`` (``10.0.0.0/8``).
"""

from __future__ import annotations

import functools
import ipaddress
from dataclasses import dataclass

from feedkv.errors import SQLError

__all__ = ["Inet"]


@functools.total_ordering
@dataclass(frozen=True, slots=True, eq=False)
class Inet:
    interface: ipaddress.IPv4Interface | ipaddress.IPv6Interface

    @classmethod
    def parse(cls, text: str) -> Inet:
        try:
            return cls(ipaddress.ip_interface(text.strip()))
        except ValueError:
            raise SQLError("22P02", f"invalid input syntax for type inet: {text!r}") from None

    def key(self) -> tuple[int, bytes, int, bytes]:
        network = self.interface.network
        return (
            self.interface.version,
            network.network_address.packed,
            network.prefixlen,
            self.interface.ip.packed,
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Inet) and self.key() == other.key()

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Inet):
            return NotImplemented
        return self.key() < other.key()

    def __hash__(self) -> int:
        return hash(self.key())

    def __str__(self) -> str:
        full = self.interface.ip.max_prefixlen
        if self.interface.network.prefixlen == full:
            return str(self.interface.ip)
        return f"{self.interface.ip}/{self.interface.network.prefixlen}"

    def to_primitive(self) -> bytes:
        """Bytes whose order is the order above (each part has one width per family)."""
        version, network, prefix, address = self.key()
        return bytes([version]) + network + bytes([prefix]) + address

    @classmethod
    def from_primitive(cls, raw: bytes) -> Inet:
        size = (len(raw) - 2) // 2
        address = ipaddress.ip_address(raw[2 + size :])
        return cls(ipaddress.ip_interface((address, raw[1 + size])))
