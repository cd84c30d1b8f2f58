"""Which Kafka partition a key goes to, as CockroachDB's Kafka sink chooses it.

CockroachDB partitions with sarama's hash partitioner over the 32-bit FNV-1a hash of the
encoded message key: the hash read as a signed 32-bit integer, its remainder modulo the
partition count with Go's signed ``%`` (the sign of the dividend), negated when negative.
Choosing the same way keeps every key of a topic moved from CockroachDB in the partition
it was in, so per-key order holds across the switch.

NB: librdkafka's own ``fnv1a`` partitioner takes the remainder of the unsigned hash, which
differs for half of all keys; hence the partition is chosen here and handed to the
producer.

Pure: no I/O.
"""

from __future__ import annotations

__all__ = ["fnv1a_32", "partition_for"]

_FNV_OFFSET = 0x811C9DC5
_FNV_PRIME = 0x01000193
_MASK = 0xFFFFFFFF


def fnv1a_32(data: bytes) -> int:
    """The 32-bit FNV-1a hash of ``data`` (unsigned)."""
    h = _FNV_OFFSET
    for byte in data:
        h = ((h ^ byte) * _FNV_PRIME) & _MASK
    return h


def partition_for(key: bytes, partitions: int) -> int:
    """The partition, from 0 to ``partitions - 1``, of a message with key ``key``."""
    if partitions < 1:
        raise ValueError(f"a Kafka topic has at least one partition, not {partitions}")
    signed = fnv1a_32(key)
    if signed >= 1 << 31:
        signed -= 1 << 32
    # Go's % gives the remainder the dividend's sign and sarama negates a negative one:
    # either way, the remainder of the magnitude.
    return abs(signed) % partitions
