"""When the corrective loop has found enough: a pure function over the kept verdicts.

Kept documents count toward the policy's ``min_relevant`` when kept on a confident verdict
(``FilterPolicy.stop_confidence``): a weak judge's unsure keeps stay kept, but the loop goes on
searching instead of stopping on its false positives. It goes on only while searching pays:
once ``min_relevant`` documents are kept, confidently or not, an iteration that keeps nothing
new ends the run too (``stalled``), since another rewrite of the same judged documents seldom
finds what two searches did not. Nor is it enough while every kept document's verdict lists
the same item in :attr:`~corrective_rag.types.Verdict.missing`: that part of the question is
still unanswered (a comparison whose second side no kept document covers). The items are
compared as the evaluator wrote them (case aside); nothing is parsed.
"""

from __future__ import annotations

from collections.abc import Collection

from corrective_rag.evaluate.policy import FilterPolicy
from corrective_rag.types import Verdict

__all__ = ["enough_relevant"]


def enough_relevant(
    kept: Collection[Verdict], policy: FilterPolicy, *, stalled: bool = False
) -> str | None:
    """Why the verdicts of the kept documents are enough to stop, or ``None`` while they are not.

    Args:
        kept: the verdicts of every document kept so far.
        policy: gives ``min_relevant`` and ``stop_confidence``.
        stalled: the iteration just judged kept nothing new (a later iteration only).
    """
    if _still_missing(kept):
        return None
    sure = sum((v.confidence or 0.0) >= policy.stop_confidence for v in kept)
    if sure >= policy.min_relevant:
        return f"{sure} kept >= min_relevant {policy.min_relevant}"
    if stalled and len(kept) >= policy.min_relevant:
        return (
            f"{len(kept)} kept >= min_relevant {policy.min_relevant}, {sure} of them "
            "confidently, and the last iteration kept nothing new"
        )
    return None


def _still_missing(kept: Collection[Verdict]) -> frozenset[str]:
    """The ``missing`` items every kept verdict lists (empty if one lists none)."""
    found: frozenset[str] | None = None
    for verdict in kept:
        items = frozenset(item.casefold() for item in verdict.missing)
        found = items if found is None else found & items
        if not found:
            return frozenset()
    return found or frozenset()
