"""The package's import graph runs one way: no circles, and no import of a higher layer.

Read from the source with :mod:`ast` (imports inside functions count too: a lazy import that
runs back up is still a dependency; imports under ``if TYPE_CHECKING:`` do not, since they never
run), so any reader can run it without importing the package.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "corrective_rag"

# Lower numbers sit lower. A module may import its own layer or any layer below it.
LAYERS: dict[str, int] = {
    # the vocabulary every part speaks: values, seams, errors, checks, logging
    "errors": 0,
    "_version": 0,
    "inputs": 1,
    "logs": 1,
    "tracing": 1,
    "types": 2,
    "protocols": 3,
    # what every outgoing call shares, and the tools every part uses
    "calls": 4,
    "text": 4,
    "models": 5,
    # the parts of the loop
    "llm": 6,
    "store": 6,
    "web": 7,
    "evaluate": 7,
    "rewrite": 7,
    "generate": 7,
    # the loop and what it records
    "loop": 8,
    "runs": 8,
    # what users and applications drive
    "integrations": 9,
    "testing": 9,
    "cli": 10,
    "<root>": 11,
    "__main__": 12,
}


def _modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        yield name, path


def _imports(name: str, path: Path) -> set[str]:
    found: set[str] = set()
    is_package = path.name == "__init__.py"
    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "corrective_rag"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if target.split(".")[0] == "corrective_rag":
                found.add(target)
                # `from corrective_rag.store import chroma` names the module store.chroma
                found |= {f"{target}.{a.name}" for a in node.names}
    return found


def _runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node but those under ``if TYPE_CHECKING:``: annotations are not imports that run."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                todo.extend(child.orelse)
            else:
                todo.append(child)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _part(module: str) -> str:
    bits = module.split(".")
    return bits[1] if len(bits) > 1 else "<root>"


GRAPH = {name: _imports(name, path) for name, path in _modules()}


def test_every_part_has_a_layer() -> None:
    """A new subpackage or top-level module is placed in a layer on purpose."""
    assert set() == {_part(m) for m in GRAPH} - set(LAYERS)


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_no_module_imports_a_higher_layer(module: str) -> None:
    """Imports run down the layers (cli -> loop/runs -> parts -> models/text -> types/errors)."""
    mine = LAYERS[_part(module)]
    upward = sorted(t for t in GRAPH[module] if LAYERS.get(_part(t), -1) > mine)
    assert [] == upward


def _known(target: str) -> str | None:
    """The module of ours that an import names (``from a.b import c`` may name a.b.c)."""
    while target and target not in GRAPH:
        target = target.rpartition(".")[0]
    return target or None


def test_no_import_circles_between_modules() -> None:
    """No module reaches itself through imports, lazy ones included."""
    edges = {
        m: {k for t in ts if (k := _known(t)) and k != m and not m.startswith(k + ".")}
        for m, ts in GRAPH.items()
    }
    state: dict[str, int] = {}
    circles: list[list[str]] = []

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                circles.append([*trail[trail.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt, [*trail, nxt])
        state[node] = 2

    for start in sorted(edges):
        if start not in state:
            visit(start, [start])
    assert [] == circles


def test_no_import_circles_between_parts() -> None:
    """The parts (subpackages) form no circle either: a layer's parts import one way."""
    parts: dict[str, set[str]] = {}
    for module, targets in GRAPH.items():
        here = _part(module)
        parts.setdefault(here, set()).update(
            _part(t) for t in targets if _part(t) != here and _part(t) != "<root>"
        )
    reached_back = sorted((a, b) for a, bs in parts.items() for b in bs if a in _reach(parts, b))
    assert [] == reached_back


def _reach(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for nxt in graph.get(todo.pop(), set()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_the_web_client_shares_call_settings_without_importing_the_llm_part() -> None:
    """Deadlines, retries and cancellation are every call's (corrective_rag.calls), not LLM's."""
    web = {t for m, ts in GRAPH.items() if _part(m) == "web" for t in ts}
    assert set() == {t for t in web if _part(t) == "llm"}
    assert "corrective_rag" not in web  # the package root would pull the loop in
