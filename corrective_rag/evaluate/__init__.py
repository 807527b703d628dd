"""Evaluators (LLM and local) and the filter policy that turns verdicts into keep/drop.

The evaluators are :class:`corrective_rag.LLMEvaluator` and :class:`corrective_rag.LocalEvaluator`
(their home is the root); here: the filter policy and the verdict cache.
"""

from corrective_rag.evaluate.cache import VerdictCache
from corrective_rag.evaluate.policy import FilterPolicy, get_policy

__all__ = [
    "FilterPolicy",
    "VerdictCache",
    "get_policy",
]
