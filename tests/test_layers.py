"""The imports of the ``feedkv`` package point down the layers of ARCHITECTURE.md, and
no feedkv module imports itself back through others.

Every module of ``feedkv/`` is read with :mod:`ast` (nothing is imported), and every
``import`` counts: at module level, inside ``if TYPE_CHECKING:`` and inside functions,
since a type-only or lazy import still ties the two modules together. ``from pkg import
name`` is an edge to ``pkg.name`` when that is a module, else to ``pkg`` (its
``__init__``). The implicit import of a parent package is not an edge.

The layers, bottom to top (a module may import its own layer and those below it):

1. ``feedkv.errors`` (the error tree: it imports nothing from feedkv)
2. ``feedkv.util``
3. ``feedkv.security``
4. ``feedkv.storage``
5. ``feedkv.raft``
6. ``feedkv.kv``
7. ``feedkv.rangefeed`` (it defines the ``FeedClient`` protocol the layers above use)
8. ``feedkv.sql``
9. ``feedkv.changefeed``
10. ``feedkv.spark``
11. ``feedkv.pgwire``
12. ``feedkv.server`` (the composition root that wires a node: store, ports, jobs)
13. ``feedkv.db``, ``feedkv.lake`` (reading lake tables a changefeed wrote) and ``feedkv``
    itself (``feedkv/__init__.py``): the public client API. ``feedkv.connect`` opens an
    embedded node, so it sits above the server that wires one; nothing below it may
    import it (a Spark worker or the changefeed core gets a ``FeedClient``, never a
    ``DB``).
14. ``feedkv.testing`` (public test kits: may import anything below the CLI)
15. ``feedkv.cli`` and ``feedkv.__main__`` (``python -m feedkv``): the edge

Packages not yet written (security, raft, pgwire) hold their place so that they land
in it. A module that matches no layer fails the test: place it here first.

Module size (one concept per module; a module over 800 lines says why in its
docstring) is not checked here.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import feedkv

PACKAGE = Path(feedkv.__file__).parent

LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("errors", ("feedkv.errors",)),
    ("util", ("feedkv.util",)),
    ("security", ("feedkv.security",)),
    ("storage", ("feedkv.storage",)),
    ("raft", ("feedkv.raft",)),
    ("kv", ("feedkv.kv",)),
    ("rangefeed", ("feedkv.rangefeed",)),
    ("sql", ("feedkv.sql",)),
    ("changefeed", ("feedkv.changefeed",)),
    ("spark", ("feedkv.spark",)),
    ("pgwire", ("feedkv.pgwire",)),
    ("server", ("feedkv.server",)),
    ("client API", ("feedkv.db", "feedkv.lake", "feedkv")),
    ("testing", ("feedkv.testing",)),
    ("cli", ("feedkv.cli", "feedkv.__main__")),
]


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int

    def __str__(self) -> str:
        return f"{self.source} -> {self.target} (line {self.line})"


def _modules() -> dict[str, Path]:
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


MODULES = _modules()


def _imports(module: str, path: Path) -> Iterator[Edge]:
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in MODULES:
                    yield Edge(module, alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            for alias in node.names:
                if f"{base}.{alias.name}" in MODULES:
                    yield Edge(module, f"{base}.{alias.name}", node.lineno)
                elif base in MODULES:
                    yield Edge(module, base, node.lineno)


def _graph() -> dict[str, list[Edge]]:
    graph = {}
    for module, path in MODULES.items():
        edges: dict[str, Edge] = {}
        for edge in _imports(module, path):
            if edge.target != module:
                edges.setdefault(edge.target, edge)  # NB: the first import names the line
        graph[module] = sorted(edges.values(), key=lambda e: e.target)
    return graph


GRAPH = _graph()


def layer_of(module: str) -> int | None:
    """The index in :data:`LAYERS` of the layer holding ``module`` (the longest prefix
    that matches), or ``None``."""
    best: tuple[int, int] | None = None
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            matches = module == prefix or module.startswith(prefix + ".")
            if matches and (best is None or len(prefix) > best[1]):
                best = (index, len(prefix))
    return None if best is None else best[0]


def _components(graph: dict[str, list[Edge]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan): the modules
    that import each other, directly or through others."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(start: str) -> None:
        # NB: iterative: the import graph is deep enough to strain Python's recursion
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for edge in edges:
                if edge.target not in index:
                    index[edge.target] = low[edge.target] = len(index)
                    stack.append(edge.target)
                    on_stack.add(edge.target)
                    work.append((edge.target, iter(graph[edge.target])))
                    break
                if edge.target in on_stack:
                    low[node] = min(low[node], index[edge.target])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return components


def _one_cycle(graph: dict[str, list[Edge]], component: list[str]) -> list[str]:
    """A shortest path from the component's first module back to itself (breadth first,
    inside the component): one concrete cycle to name in the message."""
    members = set(component)
    start = component[0]
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for edge in graph[node]:
                if edge.target == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if edge.target in members and edge.target not in previous:
                    previous[edge.target] = node
                    following.append(edge.target)
        frontier = following
    return component  # NB: unreachable for a strongly connected component


def test_the_walk_finds_the_package_and_its_imports() -> None:
    # Guards the tests below against passing because they saw nothing.
    assert {"feedkv", "feedkv.db", "feedkv.errors", "feedkv.rangefeed.processor"} <= set(MODULES)
    targets = {edge.target for edge in GRAPH["feedkv.rangefeed.processor"]}
    assert "feedkv.util.hlc" in targets
    assert len(MODULES) > 100


def test_every_module_has_a_layer() -> None:
    unplaced = sorted(module for module in MODULES if layer_of(module) is None)
    assert not unplaced, f"modules in no layer of tests/test_layers.py: {unplaced}"


def test_no_import_cycles() -> None:
    components = _components(GRAPH)
    shown = "\n".join(
        f"  {' -> '.join(_one_cycle(GRAPH, component))}"
        + (f"\n    (one of the cycles among {', '.join(component)})" if len(component) > 2 else "")
        for component in components
    )
    assert not components, f"import cycles among feedkv modules:\n{shown}"


def test_imports_point_down_the_layers() -> None:
    upward = []
    for module, edges in GRAPH.items():
        source = layer_of(module)
        for edge in edges:
            target = layer_of(edge.target)
            if source is not None and target is not None and target > source:
                upward.append(f"{edge} imports {LAYERS[target][0]} from {LAYERS[source][0]}")
    shown = "\n  ".join(sorted(upward))
    assert not upward, f"{len(upward)} upward import(s):\n  {shown}"


def test_the_client_api_leaves_spark_to_the_server() -> None:
    # The node's wiring (feedkv.server) picks the changefeed runner and builds Spark jobs.
    spark = [
        str(edge)
        for module in ("feedkv", "feedkv.db")
        for edge in GRAPH[module]
        if edge.target.startswith("feedkv.spark")
    ]
    assert not spark, f"the client API imports Spark: {spark}"
