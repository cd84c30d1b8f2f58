"""Avro schema compatibility as a Confluent schema registry judges it.

Avro's schema resolution decides whether data written with one schema (the *writer*) can
be read with another (the *reader*). :func:`read_problems` answers that for two parsed
JSON schemas and lists what stands in the way, each naming where it is
(``t_envelope.after.t.qty``). The registry's levels are built on it
(:func:`compatibility_problems`):

- ``BACKWARD`` (the registry's default): the new schema reads data written with the
  latest one; ``BACKWARD_TRANSITIVE``: with every earlier one.
- ``FORWARD``: the latest schema reads data written with the new one;
  ``FORWARD_TRANSITIVE``: every earlier one does.
- ``FULL``: both; ``FULL_TRANSITIVE``: both, against every earlier one.
- ``NONE``: anything goes.

The rules (the Avro specification's "Schema Resolution"): equal primitives match, and a
writer's ``int`` is read as ``long``, ``float`` or ``double``, ``long`` as ``float`` or
``double``, ``float`` as ``double``, ``string`` and ``bytes`` as each other. Records match
by unqualified name (or an alias of the reader's); each reader field is read from the
writer's field of that name (or alias), or takes its ``default`` when the writer has
none: a reader field with neither makes the schemas incompatible. An enum reader needs
every writer symbol (or a ``default``); arrays and maps compare their items and values;
fixed types need the same name and size. A writer's union is readable when each of its
branches is; a reader's union reads a writer's non-union when one of its branches does.
Logical types do not matter, only the types under them.

Pure: no I/O, the same answers for the same schemas.
"""

from __future__ import annotations

from typing import Any

__all__ = ["LEVELS", "compatibility_problems", "read_problems"]

LEVELS = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)

_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
_NAMED = frozenset({"record", "error", "enum", "fixed"})
_PROMOTIONS = {
    "int": {"long", "float", "double"},
    "long": {"float", "double"},
    "float": {"double"},
    "string": {"bytes"},
    "bytes": {"string"},
}


def compatibility_problems(level: str, new: Any, earlier: list[Any]) -> list[str]:
    """What makes schema ``new`` break ``level`` against the ``earlier`` schemas of a
    subject (oldest first); empty when it is compatible."""
    if level == "NONE" or not earlier:
        return []
    against = earlier if level.endswith("_TRANSITIVE") else earlier[-1:]
    base = level.removesuffix("_TRANSITIVE")
    problems: list[str] = []
    for old in reversed(against):
        if base in ("BACKWARD", "FULL"):
            problems += [
                f"the new schema cannot read older data: {p}" for p in read_problems(new, old)
            ]
        if base in ("FORWARD", "FULL"):
            problems += [
                f"an older schema cannot read new data: {p}" for p in read_problems(old, new)
            ]
    return problems


def read_problems(reader: Any, writer: Any) -> list[str]:
    """Why data written with ``writer`` cannot be read with ``reader`` (two schemas as
    parsed JSON); empty when it can."""
    return _Resolver(_names(reader), _names(writer)).check(reader, writer, "", set())


def _full_name(schema: dict[str, Any], namespace: str) -> str:
    name = str(schema.get("name", ""))
    if "." in name:
        return name
    space = schema.get("namespace", namespace) or ""
    return f"{space}.{name}" if space else name


def _names(schema: Any) -> dict[str, dict[str, Any]]:
    """Every named type defined in ``schema``, by full name (and by short name, for
    references written without their namespace)."""
    found: dict[str, dict[str, Any]] = {}

    def walk(node: Any, namespace: str) -> None:
        if isinstance(node, list):
            for branch in node:
                walk(branch, namespace)
            return
        if not isinstance(node, dict):
            return
        kind = node.get("type")
        if kind in _NAMED:
            full = _full_name(node, namespace)
            found[full] = node
            found.setdefault(full.rsplit(".", 1)[-1], node)
            namespace = full.rsplit(".", 1)[0] if "." in full else ""
            for field in node.get("fields", []):
                walk(field.get("type"), namespace)
        elif kind == "array":
            walk(node.get("items"), namespace)
        elif kind == "map":
            walk(node.get("values"), namespace)
        elif isinstance(kind, dict | list):
            walk(kind, namespace)

    walk(schema, "")
    return found


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


class _Resolver:
    def __init__(
        self, reader_names: dict[str, dict[str, Any]], writer_names: dict[str, dict[str, Any]]
    ) -> None:
        self._names = (reader_names, writer_names)

    def _deref(self, schema: Any, side: int) -> Any:
        """``schema`` with a reference to a named type replaced by its definition, and
        ``{"type": "long", "logicalType": ...}`` by ``"long"``."""
        if isinstance(schema, str) and schema not in _PRIMITIVES:
            return self._names[side].get(schema, self._names[side].get(_short(schema), schema))
        if isinstance(schema, dict):
            kind = schema.get("type")
            if isinstance(kind, str) and kind in _PRIMITIVES:
                return kind
            if isinstance(kind, dict | list):
                return self._deref(kind, side)
            if isinstance(kind, str) and kind not in _NAMED and kind not in ("array", "map"):
                return self._deref(kind, side)
        return schema

    @staticmethod
    def _kind(schema: Any) -> str:
        if isinstance(schema, list):
            return "union"
        if isinstance(schema, dict):
            kind = str(schema.get("type"))
            return "record" if kind == "error" else kind
        return str(schema)

    def check(self, reader: Any, writer: Any, where: str, seen: set[tuple[int, int]]) -> list[str]:
        reader, writer = self._deref(reader, 0), self._deref(writer, 1)
        r_kind, w_kind = self._kind(reader), self._kind(writer)
        if w_kind == "union":
            problems: list[str] = []
            for branch in writer:
                problems += self.check(reader, branch, where, seen)
            return problems
        if r_kind == "union":
            for branch in reader:
                if not self.check(branch, writer, where, seen):
                    return []
            return [
                f"{where or 'the schema'}: no branch of the reader's union reads "
                f"the writer's {w_kind}"
            ]
        if r_kind != w_kind:
            if w_kind in _PROMOTIONS and r_kind in _PROMOTIONS[w_kind]:
                return []
            return [
                f"{where or 'the schema'}: the reader's {r_kind} cannot read the writer's {w_kind}"
            ]
        if r_kind == "record":
            return self._record(reader, writer, where, seen)
        if r_kind == "enum":
            return self._enum(reader, writer, where)
        if r_kind == "fixed":
            if _short(reader["name"]) != _short(writer["name"]) or reader.get("size") != writer.get(
                "size"
            ):
                return [f"{where or 'the schema'}: fixed {reader['name']} differs in name or size"]
            return []
        if r_kind == "array":
            return self.check(reader["items"], writer["items"], f"{where}[]", seen)
        if r_kind == "map":
            return self.check(reader["values"], writer["values"], f"{where}{{}}", seen)
        return []

    def _record(
        self, reader: dict[str, Any], writer: dict[str, Any], where: str, seen: set[tuple[int, int]]
    ) -> list[str]:
        r_name, w_name = _short(str(reader.get("name"))), _short(str(writer.get("name")))
        here = f"{where}.{r_name}" if where else r_name
        aliases = {_short(str(a)) for a in reader.get("aliases", [])}
        if r_name != w_name and w_name not in aliases:
            return [
                f"{where or 'the schema'}: the reader's record {r_name} does not read "
                f"record {w_name}"
            ]
        pair = (id(reader), id(writer))
        if pair in seen:  # a recursive type, being checked further up
            return []
        seen = seen | {pair}
        by_name = {f["name"]: f for f in writer.get("fields", [])}
        problems: list[str] = []
        for field in reader.get("fields", []):
            names = [field["name"], *field.get("aliases", [])]
            source = next((by_name[n] for n in names if n in by_name), None)
            if source is None:
                if "default" not in field:
                    problems.append(
                        f"{here}.{field['name']}: the reader's field is not in the writer's "
                        "record and has no default"
                    )
                continue
            problems += self.check(field["type"], source["type"], f"{here}.{field['name']}", seen)
        return problems

    @staticmethod
    def _enum(reader: dict[str, Any], writer: dict[str, Any], where: str) -> list[str]:
        if _short(str(reader.get("name"))) != _short(str(writer.get("name"))):
            return [
                f"{where or 'the schema'}: enum {reader.get('name')} is not {writer.get('name')}"
            ]
        if "default" in reader:
            return []
        missing = [s for s in writer.get("symbols", []) if s not in reader.get("symbols", [])]
        if missing:
            return [f"{where or 'the schema'}: the reader's enum lacks the symbols {missing}"]
        return []
