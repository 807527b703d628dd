"""Evaluators (LLM and local), the filter policy that turns verdicts into keep/drop, judge profiles.

The evaluators are :class:`corrective_rag.LLMEvaluator` and :class:`corrective_rag.LocalEvaluator`
(their home is the root); here: the filter policy, the verdict cache and :class:`JudgeProfile`,
the judge ``judge-check`` measured and chose, which every entry point runs. What checks the
judges is in :mod:`corrective_rag.evaluate.check`. ``JudgeProfile`` loads on first use (PEP
562): the loop imports the policy from here, and needs none of the profile's machinery.
"""

import typing

from corrective_rag.evaluate.cache import VerdictCache
from corrective_rag.evaluate.policy import FilterPolicy, get_policy

if typing.TYPE_CHECKING:
    from corrective_rag.evaluate.profile import JudgeProfile

__all__ = [
    "FilterPolicy",
    "JudgeProfile",
    "VerdictCache",
    "get_policy",
]


def __getattr__(name: str) -> typing.Any:
    if name == "JudgeProfile":
        from corrective_rag.evaluate.profile import JudgeProfile

        return JudgeProfile
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
