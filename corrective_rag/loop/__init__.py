"""The corrective loop: orchestrator, budget, stop rule, multi-query search, refinement."""

from corrective_rag.loop.budget import Budget
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator

__all__ = [
    "Budget",
    "CorrectiveRAGOrchestrator",
]
