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

import pytest

import corrective_rag

PACKAGE = Path(corrective_rag.__file__).resolve().parent
MOST_OFFENDERS = 0  # issue 40: no name is exported from more than one module


def _module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_all(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "__all__"


def _names(value: ast.expr, path: Path) -> list[str]:
    """The strings of a literal list or tuple, or of a sum of them; anything else is refused."""
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add):
        return _names(value.left, path) + _names(value.right, path)
    if isinstance(value, ast.List | ast.Tuple | ast.Set):
        names = [ast.literal_eval(e) for e in value.elts]
        if all(isinstance(n, str) for n in names):
            return names
    raise AssertionError(f"{path}: __all__ gets names that are not a literal: {ast.unparse(value)}")


def _exported(path: Path) -> list[str]:
    """Every name a module puts in ``__all__``, however it is written.

    ``__all__ = [...]`` (or a tuple, or a sum of lists), ``__all__ += [...]``,
    ``__all__.extend([...])``, ``__all__.append("x")`` and ``__all__.insert(i, "x")``, anywhere
    in the module; an ``__all__`` built from anything but literals fails the test.
    """
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Assign) and any(_is_all(t) for t in node.targets):
            names += _names(node.value, path)
        elif isinstance(node, ast.AnnAssign | ast.AugAssign) and _is_all(node.target):
            assert node.value is not None, f"{path}: __all__ declared without names"
            names += _names(node.value, path)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and _is_all(node.func.value)
            and node.func.attr in {"extend", "append", "insert"}
        ):
            added = node.args[-1]
            one = node.func.attr != "extend"
            names += _names(ast.List([added]) if one else added, path)
    return names


def exporters(package: Path = PACKAGE) -> dict[str, list[str]]:
    """Each name in an ``__all__`` outside ``integrations/``, with the modules listing it."""
    homes: dict[str, list[str]] = collections.defaultdict(list)
    for path in sorted(package.rglob("*.py")):
        if "integrations" in path.relative_to(package).parts:
            continue
        for name in _exported(path):
            homes[name].append(_module_name(path, package))
    return homes


def offenders(package: Path = PACKAGE) -> dict[str, list[str]]:
    """The names listed in the ``__all__`` of two or more modules (or twice in one)."""
    return {name: mods for name, mods in sorted(exporters(package).items()) if len(mods) > 1}


def test_no_name_has_more_than_one_home() -> None:
    """Outside integrations/, no public name is in more than one module's __all__."""
    found = offenders()
    for name, mods in found.items():
        print(f"{name}: {', '.join(mods)}")
    assert len(found) <= MOST_OFFENDERS, found


SECOND_HOMES = {
    "augmented": 'from pkg.a import A\n__all__ = ["B"]\n__all__ += ["A"]\n',
    "extended": 'from pkg.a import A\n__all__ = []\n__all__.extend(["A"])\n',
    "appended": 'from pkg.a import A\n__all__: list[str] = []\n__all__.append("A")\n',
    "inserted": 'from pkg.a import A\n__all__ = ["B"]\n__all__.insert(0, "A")\n',
    "summed": 'from pkg.a import A\n__all__ = ["B"] + ["A"]\n',
    "under an if": 'import sys\nif sys.version_info > (3,):\n    __all__ = ("A",)\n',
}


@pytest.mark.parametrize("face", list(SECOND_HOMES.values()), ids=list(SECOND_HOMES))
def test_the_checker_finds_a_second_home_however_all_is_written(tmp_path: Path, face: str) -> None:
    """Control: a name re-listed by another module's __all__, in any spelling, is an offender."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "a.py").write_text('A = 1\n__all__ = ["A"]\n', encoding="utf-8")
    (package / "__init__.py").write_text(face, encoding="utf-8")
    assert {"A": ["pkg", "pkg.a"]} == offenders(package)


def test_the_checker_refuses_an_all_it_cannot_read(tmp_path: Path) -> None:
    """Control: names added to __all__ from a variable are refused, never skipped."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text(
        "from pkg.a import NAMES\n__all__ = []\n", encoding="utf-8"
    )
    (package / "a.py").write_text('NAMES = ["A"]\n__all__ = ["NAMES"]\n', encoding="utf-8")
    assert {} == offenders(package)
    with (package / "__init__.py").open("a", encoding="utf-8") as face:
        face.write("__all__ += NAMES\n")
    with pytest.raises(AssertionError, match="not a literal: NAMES"):
        offenders(package)


def test_the_root_exports_the_types_of_its_extension_points() -> None:
    """A user writing an evaluator or a rewriter, or reading a result, imports from the root."""
    from corrective_rag import Evaluation, Relevance, StopReason, Verdict

    assert {"Evaluation", "Relevance", "StopReason", "Verdict"} <= set(corrective_rag.__all__)
    assert "corrective_rag.types.runs" == StopReason.__module__
    assert "corrective_rag.types.verdicts" == Verdict.__module__
    assert Evaluation is not None and Relevance is not None


def test_every_root_name_resolves() -> None:
    """Each name in the root's __all__ imports, and from the module _HOMES gives for it."""
    for name in corrective_rag.__all__:
        value = getattr(corrective_rag, name)
        if name != "__version__":
            assert corrective_rag._HOMES[name] == value.__module__, name
