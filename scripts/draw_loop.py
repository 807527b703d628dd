"""Draw one iteration of the corrective loop from its code, into docs/loop.md.

Reads ``iterate`` in ``corrective_rag/loop/iteration.py`` with :mod:`ast` (nothing is imported or
run) and writes, between the two markers at the top of ``docs/loop.md``, the function's lines
and a Mermaid flowchart of its stages: one box per stage call, in the order of the code, named
by the line that calls it and the module that defines it; a branch of the code is a branch of
the picture. ``tests/test_loop_shape.py`` checks that the page holds what this script draws
now, so the picture cannot drift from the code.

    python scripts/draw_loop.py          # rewrite the block in docs/loop.md
    python scripts/draw_loop.py --check  # exit 1 when the block is out of date
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "corrective_rag" / "loop" / "iteration.py"
PAGE = ROOT / "docs" / "loop.md"
BEGIN = "<!-- drawn by scripts/draw_loop.py from corrective_rag/loop/iteration.py; do not edit -->"
END = "<!-- end of the drawing -->"
FUNCTION = "iterate"
SKIPPED = {"time.perf_counter"}  # the iteration's clock is no stage


def _function(tree: ast.Module) -> ast.FunctionDef:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == FUNCTION:
            return node
    raise SystemExit(f"{SOURCE.relative_to(ROOT)} defines no {FUNCTION}()")


def _homes(tree: ast.Module, function: ast.FunctionDef) -> dict[str, tuple[str, str]]:
    """Name -> (shown name, module file) for what ``function`` can call or hold."""
    homes: dict[str, tuple[str, str]] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            path = node.module.replace(".", "/").removeprefix("corrective_rag/") + ".py"
            for alias in node.names:
                homes[alias.asname or alias.name] = (alias.name, path)
        elif isinstance(node, ast.FunctionDef):
            homes[node.name] = (node.name, SOURCE.relative_to(ROOT / "corrective_rag").as_posix())
    for arg in function.args.args:  # a parameter's methods live where its type does
        if isinstance(arg.annotation, ast.Name) and arg.annotation.id in homes:
            homes[arg.arg] = homes[arg.annotation.id]
    return homes


def _call(statement: ast.stmt) -> ast.Call | None:
    value = getattr(statement, "value", None)
    if isinstance(value, ast.Tuple) and value.elts:
        value = value.elts[0]  # return record, ended
    return value if isinstance(value, ast.Call) else None


def _label(statement: ast.stmt, call: ast.Call, homes: dict[str, tuple[str, str]]) -> str:
    func = call.func
    name = ast.unparse(func)
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        shown, path = homes.get(func.value.id, (func.value.id, "?"))
        path = f"{path}: {shown}.{func.attr}"
    else:
        path = homes.get(name, (name, "?"))[1]
    head = ""
    if isinstance(statement, ast.Assign):
        target = statement.targets[0]
        names = target.elts if isinstance(target, ast.Tuple) else [target]
        head = ", ".join(ast.unparse(n) for n in names) + " = "
    elif isinstance(statement, ast.Return):
        head = "return "
    return f"{head}{name}<br/>{path}"


class _Chart:
    """Boxes and arrows, drawn in the order of the code."""

    def __init__(self, homes: dict[str, tuple[str, str]]) -> None:
        self.homes = homes
        self.boxes: list[list[str]] = []  # [id, label, shape]
        self.arrows: list[tuple[str, str, str]] = []

    def walk(self, body: list[ast.stmt], loose: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """Draw ``body``; ``loose`` are the arrows (from, label) waiting for the next box."""
        for statement in body:
            if isinstance(statement, ast.If):
                for box in self.boxes:
                    if any(box[0] == source for source, _ in loose):
                        box[2] = "decision"
                test = ast.unparse(statement.test)
                taken = self.walk(statement.body, [(s, test) for s, _ in loose])
                other = self.walk(statement.orelse, [(s, "else") for s, _ in loose])
                loose = taken + other
                continue
            call = _call(statement)
            if call is None or ast.unparse(call.func) in SKIPPED:
                continue
            box = f"s{len(self.boxes) + 1}"
            self.boxes.append([box, _label(statement, call, self.homes), "box"])
            self.arrows += [(source, box, label) for source, label in loose]
            loose = [(box, "")]
        return loose

    def mermaid(self) -> str:
        lines = ["flowchart TD"]
        for box, label, shape in self.boxes:
            lines.append(
                f'    {box}{{"{label}"}}' if shape == "decision" else f'    {box}["{label}"]'
            )
        for source, target, label in self.arrows:
            lines.append(
                f'    {source} -- "{label}" --> {target}' if label else f"    {source} --> {target}"
            )
        return "\n".join(lines)


def render() -> str:
    """The block docs/loop.md opens with: the markers, the function's lines, the flowchart."""
    text = SOURCE.read_text(encoding="utf-8")
    tree = ast.parse(text)
    function = _function(tree)
    first = min([function.lineno, *(d.lineno for d in function.decorator_list)])
    code = "\n".join(text.splitlines()[first - 1 : function.end_lineno])
    chart = _Chart(_homes(tree, function))
    chart.walk(function.body, [])
    return f"{BEGIN}\n```python\n{code}\n```\n\n```mermaid\n{chart.mermaid()}\n```\n{END}"


def current(page: str) -> str:
    """The drawing block docs/loop.md holds now (empty when it has none)."""
    if BEGIN not in page or END not in page:
        return ""
    return BEGIN + page.split(BEGIN, 1)[1].split(END, 1)[0] + END


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/loop.md is stale")
    args = parser.parse_args(argv)
    page = PAGE.read_text(encoding="utf-8")
    drawn, held = render(), current(page)
    if args.check:
        if drawn != held:
            print("docs/loop.md's drawing is out of date: run python scripts/draw_loop.py")
            return 1
        return 0
    if not held:
        raise SystemExit(f"docs/loop.md has no drawing markers ({BEGIN!r} ... {END!r})")
    PAGE.write_text(page.replace(held, drawn), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
