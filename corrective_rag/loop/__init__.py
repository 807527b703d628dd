"""The corrective loop: orchestrator, lanes, budget, stop rule, multi-query search, refinement."""

from corrective_rag.loop.budget import Budget
from corrective_rag.loop.lanes import Lanes
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator

__all__ = [
    "Budget",
    "CorrectiveRAGOrchestrator",
    "Lanes",
]
