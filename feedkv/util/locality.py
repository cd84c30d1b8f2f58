"""A node's locality: ordered ``key=value`` tiers, as CockroachDB's ``--locality``.

``feedkv start --locality region=us-east1,zone=a`` gives a node its tiers, most
general first; the node's descriptor carries them to every other node (heartbeats),
and the nodes' lists show them in CockroachDB's text form (``region=us-east1,zone=a``).

A *filter* is a locality too (a changefeed's ``execution_locality``): a node matches
it when, for every tier of the filter, the node has a tier with that key and that value,
whatever its other tiers and their order (CockroachDB's ``Locality.Matches``). The
empty filter matches every node.
"""

from __future__ import annotations

from dataclasses import dataclass

from feedkv.errors import InvalidArgumentError

__all__ = ["NO_LOCALITY", "Locality"]


@dataclass(frozen=True, slots=True)
class Locality:
    tiers: tuple[tuple[str, str], ...] = ()  # (key, value), most general first

    @classmethod
    def parse(cls, text: str, *, what: str = "--locality") -> Locality:
        """The tiers of ``text`` (``key=value`` pairs separated by commas; ``""``: none).
        :class:`~feedkv.errors.InvalidArgumentError` names ``what`` and the bad tier: an
        empty key or value, a tier without ``=``, or a key given twice."""
        if not text.strip():
            return cls()
        tiers: list[tuple[str, str]] = []
        for tier in text.split(","):
            key, sep, value = tier.strip().partition("=")
            if not sep or not key.strip() or not value.strip():
                raise InvalidArgumentError(
                    f"{what}: {tier.strip()!r} is not a locality tier; write key=value pairs "
                    "separated by commas, such as 'region=us-east1,zone=a'"
                )
            tiers.append((key.strip(), value.strip()))
        keys = [k for k, _ in tiers]
        for i, key in enumerate(keys):
            if key in keys[:i]:
                raise InvalidArgumentError(
                    f"{what}: {text.strip()!r} names the locality tier {key!r} more than once"
                )
        return cls(tuple(tiers))

    def find(self, key: str) -> str | None:
        """The value of tier ``key`` (``None``: the locality has no such tier)."""
        for k, v in self.tiers:
            if k == key:
                return v
        return None

    def matches(self, wanted: Locality) -> bool:
        """Whether this locality has every tier of the filter ``wanted``."""
        return all(self.find(key) == value for key, value in wanted.tiers)

    def __bool__(self) -> bool:
        return bool(self.tiers)

    def __str__(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.tiers)


NO_LOCALITY = Locality()  # a node started without --locality; the filter every node matches
