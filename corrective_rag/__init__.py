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
    "ConfigError",
    "CorrectiveRAGError",
    "CragAction",
    "Document",
    "Hit",
    "InputError",
    "IterationRecord",
    "LLMError",
    "RunResult",
    "StopReason",
    "StoreError",
    "Usage",
    "Verdict",
    "VerdictParseError",
    "__version__",
]
