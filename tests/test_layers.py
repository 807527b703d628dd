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
    "observe": 1,
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


def _modules(package: Path = PACKAGE) -> Iterator[tuple[str, Path]]:
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        yield name, path


IMPORTERS = {"import_module", "__import__"}  # importlib.import_module and the builtin


def _imports(name: str, path: Path, known: frozenset[str] = frozenset()) -> set[str]:
    """Every module of ours that ``path`` imports or names for import.

    Import statements (relative ones resolved), ``importlib.import_module("...")`` and
    ``__import__("...")``, and any other string that names one of our modules (``known``) as
    ``"corrective_rag.a.b"`` or ``"corrective_rag.a.b:function"``: a registry of such strings
    (``store/engines.py``, the root's lazy names) imports them when it is used. A string that is
    the package's bare name is a logger's or a tracer's, not an import.
    """
    found: set[str] = set()
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = _docstrings(tree)
    for node in _runtime_nodes(tree):
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
        elif _is_importer(node) and isinstance(node.args[0], ast.Constant):  # type: ignore[attr-defined]
            module = str(node.args[0].value)  # type: ignore[attr-defined]
            if module.split(".", maxsplit=1)[0] == "corrective_rag":
                found.add(module)
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node not in docstrings
        ):
            module = node.value.partition(":")[0]
            if "." in module and module in known:
                found.add(module)
    return found


def _is_importer(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call) or not node.args:
        return False
    func = node.func
    called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    return called in IMPORTERS


def _docstrings(tree: ast.AST) -> set[ast.AST]:
    return {
        node.body[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }


def _computed_imports(path: Path) -> list[str]:
    """Imports of one of our modules by a name built at run time (no checker can place them)."""
    return [
        ast.unparse(node)
        for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8")))
        if _is_importer(node)
        and not isinstance(node.args[0], ast.Constant)  # type: ignore[attr-defined]
        and any(
            isinstance(c, ast.Constant) and str(c.value).startswith("corrective_rag")
            for c in ast.walk(node.args[0])  # type: ignore[attr-defined]
        )
    ]


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


def graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Each module of the package, with the modules of ours it imports."""
    modules = dict(_modules(package))
    known = frozenset(modules)
    return {name: _imports(name, path, known) for name, path in modules.items()}


def upward(imports: dict[str, set[str]], module: str) -> list[str]:
    """What ``module`` imports from a layer above its own."""
    mine = LAYERS[_part(module)]
    return sorted(t for t in imports[module] if LAYERS.get(_part(t), -1) > mine)


GRAPH = graph()


# The top level: the package's face and the vocabulary every part speaks (issue 49: at most
# eight top-level modules, the two packages every part uses, inputs/ and observe/, counted).
TOP_LEVEL = {"__init__", "__main__", "_version", "errors", "protocols", "types"}


def test_the_top_level_holds_the_vocabulary_only() -> None:
    """The top-level modules are the face and the vocabulary; a concern of its own (what the
    package reads, what it tells the outside world) is a subpackage, placed here on purpose."""
    assert TOP_LEVEL == {p.stem for p in PACKAGE.glob("*.py")}
    assert len(TOP_LEVEL | {"inputs", "observe"}) <= 8


def test_every_part_has_a_layer() -> None:
    """A new subpackage or top-level module is placed in a layer on purpose."""
    assert set() == {_part(m) for m in GRAPH} - set(LAYERS)


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_no_module_imports_a_higher_layer(module: str) -> None:
    """Imports run down the layers (cli -> loop/runs -> parts -> models/text -> types/errors)."""
    assert [] == upward(GRAPH, module)


def test_no_module_imports_one_of_ours_by_a_computed_name() -> None:
    """importlib.import_module(f"corrective_rag.{x}") could reach any layer: name it in full."""
    assert [] == [f"{p}: {c}" for _, p in _modules() for c in _computed_imports(p)]


UPWARD = {
    "an import inside a function": "def f():\n    from corrective_rag.cli import main\n",
    "a relative import": "from .cli import main\n",
    "import_module": 'import importlib\nimportlib.import_module("corrective_rag.cli.main")\n',
    "an alias": 'from importlib import import_module as im\nim("corrective_rag.cli")\n',
    "__import__": '__import__("corrective_rag.cli.main")\n',
    "a registry string": 'ENGINES = {"x": "corrective_rag.cli.main:entry"}\n',
}


@pytest.mark.parametrize("source", list(UPWARD.values()), ids=list(UPWARD))
def test_the_checker_finds_an_upward_import_however_it_is_spelled(
    tmp_path: Path, source: str
) -> None:
    """Control: types (layer 2) reaching cli (layer 10) is flagged, however it gets there."""
    package = tmp_path / "corrective_rag"
    (package / "cli").mkdir(parents=True)
    for empty in ("__init__.py", "cli/__init__.py", "cli/main.py"):
        (package / empty).write_text("", encoding="utf-8")
    (package / "types.py").write_text(source, encoding="utf-8")
    imports = graph(package)
    assert upward(imports, "corrective_rag.types") in (
        ["corrective_rag.cli"],
        ["corrective_rag.cli", "corrective_rag.cli.main"],
        ["corrective_rag.cli.main"],
    )


def test_the_checker_leaves_docstrings_logger_names_and_type_checking_alone(tmp_path: Path) -> None:
    """Control: docstrings, the bare package name and TYPE_CHECKING imports are no imports."""
    package = tmp_path / "corrective_rag"
    (package / "cli").mkdir(parents=True)
    for empty in ("__init__.py", "cli/__init__.py", "cli/main.py"):
        (package / empty).write_text("", encoding="utf-8")
    (package / "types.py").write_text(
        '"""See corrective_rag.cli.main."""\nfrom typing import TYPE_CHECKING\n'
        'log = "corrective_rag"\nif TYPE_CHECKING:\n    from corrective_rag.cli import main\n',
        encoding="utf-8",
    )
    assert [] == upward(graph(package), "corrective_rag.types")


def test_the_checker_finds_a_computed_import(tmp_path: Path) -> None:
    """Control: a module name put together at run time is reported."""
    path = tmp_path / "m.py"
    path.write_text('import importlib\nimportlib.import_module(f"corrective_rag.{x}")\n')
    assert ["importlib.import_module(f'corrective_rag.{x}')"] == _computed_imports(path)


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
