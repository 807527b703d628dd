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


def test_every_stop_reason_is_decided_in_stopping() -> None:
    """Only loop/stopping.py names a StopReason member: one home for why a run stops."""
    naming = [
        path.name
        for path in LOOP
        if path.name != "stopping.py"
        for node in ast.walk(_tree(path))
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "StopReason"
    ]
    assert [] == naming


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
