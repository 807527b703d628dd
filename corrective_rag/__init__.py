"""corrective_rag: RAG that checks its documents and corrects its own queries.

The loop: retrieve (hybrid BM25 + dense) -> evaluate (JSON verdicts) -> filter -> rewrite -> repeat,
with every iteration recorded in the result's history.

The root holds what a user needs to build and run the loop; everything else is importable from
its subpackage: ``corrective_rag.store`` (fusion), ``corrective_rag.evaluate`` (filter policies),
``corrective_rag.llm`` (timeouts, retries, pricing), ``corrective_rag.runs`` (history, reports),
``corrective_rag.types`` and ``corrective_rag.errors`` (values and the exception tree).
"""

from corrective_rag._version import __version__
from corrective_rag.errors import CorrectiveRAGError
from corrective_rag.evaluate.llm import LLMEvaluator
from corrective_rag.evaluate.local import LocalEvaluator
from corrective_rag.generate.llm import LLMGenerator
from corrective_rag.llm.client import OpenAIChatClient
from corrective_rag.loop.budget import Budget
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.rewrite.llm import LLMRewriter
from corrective_rag.rewrite.local import LocalRewriter
from corrective_rag.runs.batch import run_batch
from corrective_rag.store.hybrid import HybridStore
from corrective_rag.store.loaders import load_documents
from corrective_rag.types import Document, RunResult

__all__ = [
    "Budget",
    "CorrectiveRAGError",
    "CorrectiveRAGOrchestrator",
    "Document",
    "HybridStore",
    "LLMEvaluator",
    "LLMGenerator",
    "LLMRewriter",
    "LocalEvaluator",
    "LocalRewriter",
    "OpenAIChatClient",
    "RunResult",
    "__version__",
    "load_documents",
    "run_batch",
]
