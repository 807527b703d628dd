"""Evaluators (LLM and local) and the filter policy that turns verdicts into keep/drop."""

from corrective_rag.evaluate.cache import VerdictCache
from corrective_rag.evaluate.llm import LLMEvaluator
from corrective_rag.evaluate.local import LocalEvaluator
from corrective_rag.evaluate.policy import FilterPolicy, get_policy

__all__ = [
    "FilterPolicy",
    "LLMEvaluator",
    "LocalEvaluator",
    "VerdictCache",
    "get_policy",
]
