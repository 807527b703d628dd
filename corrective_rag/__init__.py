"""corrective_rag: RAG that checks its documents and corrects its own queries.

The loop: retrieve (hybrid BM25 + dense) -> evaluate (JSON verdicts) -> filter -> rewrite -> repeat,
with every iteration recorded in the result's history.

The root holds what a user needs to build and run the loop, to write an evaluator or a rewriter
(the values they take and return) and to read a result; everything else is importable from its
subpackage: ``corrective_rag.store`` (fusion), ``corrective_rag.evaluate`` (filter policies),
``corrective_rag.calls`` (timeouts, retries), ``corrective_rag.llm`` (pricing, a local server),
``corrective_rag.runs`` (history, reports), ``corrective_rag.protocols`` (the seams),
``corrective_rag.types`` and ``corrective_rag.errors`` (values and the exception tree). Each name
is listed in one ``__all__`` only, the one it is imported from (tests/test_public_names.py).

The names load on first use (PEP 562): ``import corrective_rag.web`` or any other part imports
that part, not the loop and every backend behind this list.
"""

import typing

from corrective_rag._version import __version__

if typing.TYPE_CHECKING:
    from corrective_rag.errors import CorrectiveRAGError
    from corrective_rag.evaluate.learned import LearnedEvaluator
    from corrective_rag.evaluate.llm import LLMEvaluator
    from corrective_rag.evaluate.local import LocalEvaluator
    from corrective_rag.generate.llm import LLMGenerator
    from corrective_rag.llm.client import OpenAIChatClient
    from corrective_rag.loop.budget import Budget
    from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
    from corrective_rag.rewrite.llm import LLMRewriter
    from corrective_rag.rewrite.local import LocalRewriter
    from corrective_rag.runs.execution.batch import run_batch
    from corrective_rag.store.hybrid import HybridStore
    from corrective_rag.store.loaders import load_documents
    from corrective_rag.types import (
        Document,
        Evaluation,
        IterationRecord,
        Relevance,
        Rewrite,
        RewriteRequest,
        RunResult,
        StopReason,
        Verdict,
    )

# where each name lives: imported when first asked for
_HOMES = {
    "Budget": "corrective_rag.loop.budget",
    "CorrectiveRAGError": "corrective_rag.errors",
    "CorrectiveRAGOrchestrator": "corrective_rag.loop.orchestrator",
    "Document": "corrective_rag.types.documents",
    "Evaluation": "corrective_rag.types.verdicts",
    "HybridStore": "corrective_rag.store.hybrid",
    "IterationRecord": "corrective_rag.types.runs",
    "LLMEvaluator": "corrective_rag.evaluate.llm",
    "LearnedEvaluator": "corrective_rag.evaluate.learned",
    "LLMGenerator": "corrective_rag.generate.llm",
    "LLMRewriter": "corrective_rag.rewrite.llm",
    "LocalEvaluator": "corrective_rag.evaluate.local",
    "LocalRewriter": "corrective_rag.rewrite.local",
    "OpenAIChatClient": "corrective_rag.llm.client",
    "Relevance": "corrective_rag.types.verdicts",
    "Rewrite": "corrective_rag.types.rewrites",
    "RewriteRequest": "corrective_rag.types.rewrites",
    "RunResult": "corrective_rag.types.runs",
    "StopReason": "corrective_rag.types.runs",
    "Verdict": "corrective_rag.types.verdicts",
    "load_documents": "corrective_rag.store.loaders",
    "run_batch": "corrective_rag.runs.execution.batch",
}

__all__ = [
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
]


def __getattr__(name: str) -> typing.Any:
    """Import a root name from its part the first time it is asked for."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'corrective_rag' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
