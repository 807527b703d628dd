import __future__

import importlib
import pkgutil
import subprocess
import sys
import types

import pytest

import corrective_rag

SUBPACKAGES = sorted(
    m.name for m in pkgutil.iter_modules(corrective_rag.__path__, "corrective_rag.") if m.ispkg
)


def _exporters() -> list[types.ModuleType]:
    modules = [importlib.import_module(name) for name in SUBPACKAGES]
    return [corrective_rag, *(m for m in modules if hasattr(m, "__all__"))]


def _public(module: types.ModuleType) -> set[str]:
    """Every name a user could import from ``module``, less submodules and ``__future__``."""
    return {
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType | __future__._Feature)
    }


@pytest.mark.parametrize("module", _exporters(), ids=lambda m: m.__name__)
def test_all_is_sorted_and_names_every_public_name(module):
    """__all__ is sorted, each name in it exists, and every public name (any case) is in it.

    A face may also carry a name the root exports (``corrective_rag.types.Verdict``, the path it
    had before types/ was a package): the very same object, whose address is the root.
    """
    exported = list(module.__all__)
    assert sorted(exported) == exported
    for name in exported:
        assert hasattr(module, name), name
    rooted = {
        name
        for name in corrective_rag.__all__
        if module is not corrective_rag
        and name in vars(module)
        and vars(module)[name] is getattr(corrective_rag, name)
    }
    assert set() == _public(module) - set(exported) - rooted


def test_the_root_is_the_names_a_user_needs():
    """The root exports the loop, its parts, the store, the batch runner, the base error and the
    values an evaluator or a rewriter takes and returns and a result is read through."""
    assert [
        "Budget",
        "CorrectiveRAGError",
        "CorrectiveRAGOrchestrator",
        "Document",
        "Evaluation",
        "HybridStore",
        "IterationRecord",
        "LLMEvaluator",
        "LLMGenerator",
        "LLMRewriter",
        "LearnedEvaluator",
        "LocalEvaluator",
        "LocalRewriter",
        "OpenAIChatClient",
        "Relevance",
        "Rewrite",
        "RewriteRequest",
        "RunResult",
        "StopReason",
        "Verdict",
        "__version__",
        "load_documents",
        "run_batch",
    ] == corrective_rag.__all__


def test_every_part_but_the_cli_declares_what_it_exports():
    """Each subpackage a user imports from (all but cli) has an __all__."""
    missing = [n for n in SUBPACKAGES if not hasattr(importlib.import_module(n), "__all__")]
    assert ["corrective_rag.cli"] == missing


def test_import_touches_no_model_and_no_heavy_library():
    """Importing the package and its parts loads neither torch, chromadb, models, tiktoken nor
    a RAG framework (the integrations load theirs only when their own module is imported)."""
    code = (
        "import sys, corrective_rag; "
        + "".join(f"import {name}; " for name in SUBPACKAGES)
        + "print(sorted(m for m in ('torch', 'chromadb', 'sentence_transformers', 'tiktoken', "
        "'matplotlib', 'xllamacpp', 'langchain_core', 'llama_index') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "[]" == out.stdout.strip()


def test_importing_one_part_does_not_import_the_loop():
    """The root's names load on first use: the web client alone does not pull the loop in."""
    code = (
        "import sys, corrective_rag.web.http; "
        "print(sorted(m for m in sys.modules if m.startswith('corrective_rag.loop')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "[]" == out.stdout.strip()
    assert hasattr(corrective_rag, "CorrectiveRAGOrchestrator")
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        corrective_rag.Nope  # noqa: B018
