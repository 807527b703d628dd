"""The loop's shape, read from the source with ast: short functions, one home per decision.

Nothing is imported or run (except the drawing script, which reads the source too).
"""

from __future__ import annotations

import ast
import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "corrective_rag"
LOOP = sorted((PACKAGE / "loop").glob("*.py"))
MOST_LINES = 50  # a function a reader takes in at once
ITERATE_LINES = 15  # the iteration reads as its stages, one line each


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def _lines(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The function's lines from ``def`` to its end, its docstring left out."""
    lines = (function.end_lineno or function.lineno) - function.lineno + 1
    first = function.body[0]
    docstring = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
    if docstring and isinstance(first.value.value, str):  # type: ignore[attr-defined]
        lines -= (first.end_lineno or first.lineno) - first.lineno + 1
    return lines


def _functions(path: Path) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [
        node
        for node in ast.walk(_tree(path))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    ]


@pytest.mark.parametrize("path", LOOP, ids=lambda p: p.name)
def test_no_function_in_the_loop_is_longer_than_fifty_lines(path: Path) -> None:
    """Every function in corrective_rag/loop/ fits 50 lines, its docstring aside."""
    long = {f.name: _lines(f) for f in _functions(path) if _lines(f) > MOST_LINES}
    assert {} == long


def test_the_iteration_is_a_handful_of_lines() -> None:
    """loop/iteration.py's iterate() names its stages in at most 15 lines."""
    iterate = [f for f in _functions(PACKAGE / "loop" / "iteration.py") if f.name == "iterate"]
    assert 1 == len(iterate)
    assert _lines(iterate[0]) <= ITERATE_LINES


def _imported(path: Path) -> set[str]:
    """Every module ``path`` imports, anywhere in it (TYPE_CHECKING and function bodies too)."""
    found: set[str] = set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_the_loops_modules_import_each_other_in_no_circle() -> None:
    """loop/ has no import circle (aio and orchestrator made one), counting every import."""
    names = {p.stem: p for p in LOOP if p.stem != "__init__"}
    edges = {
        name: {n for n in names if f"corrective_rag.loop.{n}" in _imported(path) and n != name}
        for name, path in names.items()
    }

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(
            n == goal or (n not in seen and reaches(n, goal, seen | {n})) for n in edges[start]
        )

    assert [] == sorted(name for name in names if reaches(name, name, {name}))


STOP_HOMES = {PACKAGE / "types" / "runs.py", PACKAGE / "loop" / "stopping.py"}  # defined; decided


def _annotations(tree: ast.AST) -> set[ast.AST]:
    """Every node in an annotation or under ``if TYPE_CHECKING:``: no use of what it names."""
    roots: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.arg | ast.AnnAssign) and node.annotation is not None:
            roots.append(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns:
            roots.append(node.returns)
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            roots.extend(node.body)
    return {inner for root in roots for inner in ast.walk(root)}


def stop_reason_uses(path: Path) -> list[str]:
    """Where ``path`` uses ``StopReason`` at run time, however the name reaches it.

    A use is any reference but an annotation or an import: ``StopReason.X``, ``StopReason("x")``
    and ``StopReason["X"]`` through any alias (``from corrective_rag.types import StopReason as
    S``, ``from corrective_rag import StopReason``), through a module (``t.StopReason`` after
    ``import corrective_rag.types as t``), through ``getattr(module, "StopReason")``, or bound to
    another name (``S = StopReason``, itself a use).
    """
    tree = _tree(path)
    aliases = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.name == "StopReason"
    }
    skip = _annotations(tree)
    uses = []
    for node in ast.walk(tree):
        if node in skip:
            continue
        named = isinstance(node, ast.Name) and node.id in aliases
        attribute = isinstance(node, ast.Attribute) and node.attr == "StopReason"
        looked_up = (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "getattr"
            and any(isinstance(a, ast.Constant) and a.value == "StopReason" for a in node.args)
        )
        if named or attribute or looked_up:
            uses.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")  # type: ignore[attr-defined]
    return uses


def test_every_stop_reason_is_decided_in_stopping() -> None:
    """Only loop/stopping.py uses StopReason (types/runs.py defines it): one home for a stop."""
    others = sorted(set(PACKAGE.rglob("*.py")) - STOP_HOMES)
    assert [] == [use for path in others for use in stop_reason_uses(path)]


STOP_ELSEWHERE = {
    "a member": "from corrective_rag.types import StopReason\nr = StopReason.NO_PROGRESS\n",
    "a call": 'from corrective_rag.types import StopReason\nr = StopReason("no_progress")\n',
    "an alias": "from corrective_rag.types import StopReason as S\nr = S.NO_PROGRESS\n",
    "the root": 'from corrective_rag import StopReason as S\nr = S["NO_PROGRESS"]\n',
    "a module": 'import corrective_rag.types as t\nr = t.StopReason("no_progress")\n',
    "a full path": 'import corrective_rag.types\nr = corrective_rag.types.StopReason("x")\n',
    "getattr": 'import corrective_rag.types as t\nr = getattr(t, "StopReason")("x")\n',
    "a new name": "from corrective_rag.types import StopReason\nS = StopReason\n",
    "in a function": 'def f():\n    from .types import StopReason\n    return StopReason("x")\n',
}


@pytest.mark.parametrize("source", list(STOP_ELSEWHERE.values()), ids=list(STOP_ELSEWHERE))
def test_the_checker_finds_a_stop_reason_made_elsewhere(tmp_path: Path, source: str) -> None:
    """Control: a stop reason made outside stopping.py, spelled any of these ways, is flagged."""
    path = tmp_path / "orchestrator.py"
    path.write_text(source, encoding="utf-8")
    assert 1 == len(stop_reason_uses(path))


def test_the_checker_lets_annotations_and_type_checking_imports_be(tmp_path: Path) -> None:
    """Control: StopReason in annotations, imports and under TYPE_CHECKING is no use."""
    path = tmp_path / "orchestrator.py"
    path.write_text(
        "from typing import TYPE_CHECKING\nfrom corrective_rag.types import StopReason\n"
        "if TYPE_CHECKING:\n    X = StopReason\n"
        "def f(r: StopReason) -> StopReason:\n    s: StopReason = r\n    return s\n",
        encoding="utf-8",
    )
    assert [] == stop_reason_uses(path)


def test_the_llm_rewriter_only_rewrites() -> None:
    """rewrite/llm.py neither imports nor uses LocalRewriter: the feedback lane is the loop's."""
    path = PACKAGE / "rewrite" / "llm.py"
    assert not any("LocalRewriter" in name or "rewrite.local" in name for name in _imported(path))
    names = {n.id for n in ast.walk(_tree(path)) if isinstance(n, ast.Name)}
    assert "LocalRewriter" not in names


def test_the_llm_evaluator_knows_no_rewriter() -> None:
    """evaluate/llm.py names no rewriter: the call mode is the loop's decision."""
    found = set()
    for node in ast.walk(_tree(PACKAGE / "evaluate" / "llm.py")):
        for name in (
            getattr(node, "id", None),
            getattr(node, "attr", None),
            getattr(node, "arg", None),
            node.name if isinstance(node, ast.FunctionDef | ast.ClassDef) else None,
        ):
            if isinstance(name, str) and "rewriter" in name.lower():
                found.add(name)
    assert set() == found


def test_the_loop_page_opens_with_the_drawing_the_script_makes_now() -> None:
    """docs/loop.md's iteration code and flowchart are what scripts/draw_loop.py draws today."""
    script = runpy.run_path(str(ROOT / "scripts" / "draw_loop.py"))
    page = (ROOT / "docs" / "loop.md").read_text(encoding="utf-8")
    assert script["render"]() == script["current"](page)
    assert page.index(script["BEGIN"]) < page.index("\n## ")  # it opens the page
