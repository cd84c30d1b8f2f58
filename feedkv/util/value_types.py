"""Value types made on every request's path: frozen to the type checker, plain at run
time.

A frozen dataclass sets each field in ``__init__`` through ``object.__setattr__`` (its
own ``__setattr__`` refuses), a call per field: for the header and the batch of every
KV request, and each conditional put a write sends, that was about a tenth of an
embedded INSERT's bytecodes. A :func:`value_type` is a slotted dataclass whose
``__init__`` stores its fields directly; mypy (strict, on all of ``feedkv``) checks it as
frozen, so no code of ours assigns a field after construction, and it compares and
hashes by its fields as a frozen dataclass does.

NB: nothing refuses an assignment at run time. The three value types made this way
(:mod:`feedkv.kv.api`'s ``Header``, ``BatchRequest`` and ``ConditionalPut``) are
public, and code outside ``feedkv`` that builds them must treat them as frozen, as a
type checker tells it to: one changed after it was hashed is lost to the dict or set
that holds it. A type subclassed by a frozen dataclass (``Result``) cannot be made
this way and stays a frozen :func:`~dataclasses.dataclass`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeVar, dataclass_transform

__all__ = ["value_type"]

_T = TypeVar("_T")


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def value_type(cls: type[_T]) -> type[_T]:
    """``cls`` as a slotted dataclass that compares and hashes by its fields, and that
    the type checker holds frozen (see the module docstring)."""
    return dataclass(slots=True, unsafe_hash=True)(cls)
