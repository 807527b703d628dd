"""Engines are chosen by name and imported when chosen: the store facade imports none of them."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from corrective_rag.errors import ConfigError
from corrective_rag.store.engines import ENGINES, open_engine

STORE = Path(__file__).resolve().parents[2] / "corrective_rag" / "store"


def test_importing_the_store_facade_imports_no_engine() -> None:
    """A fresh interpreter that imports the store facade has loaded neither engine module."""
    code = (
        "import sys, corrective_rag.store.hybrid\n"
        "print(sorted(m for m in sys.modules if m in "
        "('corrective_rag.store.qdrant', 'corrective_rag.store.chroma',"
        " 'corrective_rag.store.chroma_open')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "[]" == done.stdout.strip()


def _store_imports(path: Path) -> set[str]:
    """The ``corrective_rag.store`` modules ``path`` imports, lazy imports included.

    ``from corrective_rag.store import qdrant`` names the module ``qdrant``, not the package.
    """
    modules = {p.stem for p in STORE.glob("*.py")}
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            if node.module == "corrective_rag.store":
                found |= {f"corrective_rag.store.{a.name}" for a in node.names}
    return {
        name.split(".")[2]
        for name in found
        if name.startswith("corrective_rag.store.") and name.split(".")[2] in modules
    } - {path.stem}


def test_no_import_circle_among_store_modules() -> None:
    """No store module reaches itself through the imports of other store modules."""
    graph = {p.stem: _store_imports(p) for p in STORE.glob("*.py") if p.stem != "__init__"}
    circles = []
    for start in sorted(graph):
        todo, seen = list(graph[start]), set()
        while todo:
            module = todo.pop()
            if module == start:
                circles.append(start)
                break
            if module not in seen:
                seen.add(module)
                todo.extend(graph.get(module, ()))
    assert [] == circles


@pytest.mark.parametrize("name", sorted(ENGINES))
def test_every_engine_entry_names_a_function(name: str) -> None:
    """Each entry is ``module:function`` and the function exists (a typo fails here, not later)."""
    module, _, function = ENGINES[name].partition(":")
    assert callable(getattr(importlib.import_module(module), function))


def test_an_unknown_engine_is_a_config_error_naming_the_engines() -> None:
    """A name that is not in the table raises ConfigError listing the names that are."""
    with pytest.raises(ConfigError, match=r"unknown store engine 'milvus'.*chroma"):
        open_engine("milvus")
