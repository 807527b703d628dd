"""One home per public name: where a user imports a name from is the one ``__all__`` listing it.

The rule (httpx's: ``Timeout`` is defined in ``_config.py`` and the root re-exports it once):

- A public name is listed in the ``__all__`` of exactly one module, the address a user imports
  it from.
- Where a face (the root ``corrective_rag/__init__.py`` or a subpackage's ``__init__.py``)
  re-exports a name, the face is that address: the module defining the name leaves it out of its
  own ``__all__`` (code inside the package still imports it from where it is defined).
- A name the root re-exports is not listed by its subpackage's face as well.
- A module that merely imports a name never lists it; two different things are not given one
  public name.

``integrations/`` is counted apart (each adapter module is a face of its own framework).
"""

from __future__ import annotations

import ast
import collections
from pathlib import Path

import corrective_rag

PACKAGE = Path(corrective_rag.__file__).resolve().parent
MOST_OFFENDERS = 2  # issue 33: at most two names exported from more than one module


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _exported(path: Path) -> list[str]:
    """The names of a module's literal ``__all__`` (none where it has no such list)."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            value = node.value
            assert isinstance(value, ast.List | ast.Tuple), f"{path}: __all__ is not a literal"
            return [ast.literal_eval(e) for e in value.elts]
    return []


def exporters() -> dict[str, list[str]]:
    """Each name in an ``__all__`` outside ``integrations/``, with the modules listing it."""
    homes: dict[str, list[str]] = collections.defaultdict(list)
    for path in sorted(PACKAGE.rglob("*.py")):
        if "integrations" in path.relative_to(PACKAGE).parts:
            continue
        for name in _exported(path):
            homes[name].append(_module_name(path))
    return homes


def offenders() -> dict[str, list[str]]:
    """The names listed in the ``__all__`` of two or more modules."""
    return {name: mods for name, mods in sorted(exporters().items()) if len(mods) > 1}


def test_at_most_two_names_have_more_than_one_home() -> None:
    """Outside integrations/, at most two public names are in more than one module's __all__."""
    found = offenders()
    for name, mods in found.items():
        print(f"{name}: {', '.join(mods)}")
    assert len(found) <= MOST_OFFENDERS, found


def test_the_root_exports_the_types_of_its_extension_points() -> None:
    """A user writing an evaluator or a rewriter, or reading a result, imports from the root."""
    from corrective_rag import Evaluation, Relevance, StopReason, Verdict

    assert {"Evaluation", "Relevance", "StopReason", "Verdict"} <= set(corrective_rag.__all__)
    assert "corrective_rag.types" == StopReason.__module__ == Verdict.__module__
    assert Evaluation is not None and Relevance is not None


def test_every_root_name_resolves() -> None:
    """Each name in the root's __all__ imports, and from the module _HOMES gives for it."""
    for name in corrective_rag.__all__:
        value = getattr(corrective_rag, name)
        if name != "__version__":
            assert corrective_rag._HOMES[name] == value.__module__, name
