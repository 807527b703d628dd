"""corrective_rag: RAG that checks its documents and corrects its own queries.

The loop: retrieve (hybrid BM25 + dense) -> evaluate (JSON verdicts) -> filter -> rewrite -> repeat,
with every iteration recorded in the result's history.
"""

from corrective_rag.errors import (
    ConfigError,
    CorrectiveRAGError,
    InputError,
    LLMError,
    StoreError,
    VerdictParseError,
)
from corrective_rag.evaluate.llm import LLMEvaluator
from corrective_rag.evaluate.local import LocalEvaluator
from corrective_rag.evaluate.policy import FilterPolicy, get_policy
from corrective_rag.generate.llm import LLMGenerator
from corrective_rag.llm.client import OpenAIChatClient
from corrective_rag.llm.settings import Pricing, Retries, Timeouts
from corrective_rag.loop.budget import Budget
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.models.embeddings import SentenceTransformerEmbedder
from corrective_rag.rewrite.llm import LLMRewriter
from corrective_rag.rewrite.local import LocalRewriter
from corrective_rag.runs.batch import run_batch
from corrective_rag.runs.history import HistoryStore, render_table, result_from_json, result_to_json
from corrective_rag.store.fusion import ConvexFusion, RRFusion
from corrective_rag.store.hybrid import HybridStore
from corrective_rag.store.loaders import load_documents
from corrective_rag.types import (
    Answer,
    CragAction,
    Document,
    Hit,
    IterationRecord,
    RunResult,
    StopReason,
    Usage,
    Verdict,
)

__version__ = "0.1.0"

__all__ = [
    "Answer",
    "Budget",
    "ConfigError",
    "ConvexFusion",
    "CorrectiveRAGError",
    "CorrectiveRAGOrchestrator",
    "CragAction",
    "Document",
    "FilterPolicy",
    "HistoryStore",
    "Hit",
    "HybridStore",
    "InputError",
    "IterationRecord",
    "LLMError",
    "LLMEvaluator",
    "LLMGenerator",
    "LLMRewriter",
    "LocalEvaluator",
    "LocalRewriter",
    "OpenAIChatClient",
    "Pricing",
    "RRFusion",
    "Retries",
    "RunResult",
    "SentenceTransformerEmbedder",
    "StopReason",
    "StoreError",
    "Timeouts",
    "Usage",
    "Verdict",
    "VerdictParseError",
    "__version__",
    "get_policy",
    "load_documents",
    "render_table",
    "result_from_json",
    "result_to_json",
    "run_batch",
]
