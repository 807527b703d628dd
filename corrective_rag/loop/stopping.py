"""When the corrective loop has found enough: a pure function over the kept verdicts.

The stop rule reads verdict fields only (the verdict contract, :class:`~corrective_rag.types.
Verdict`), with its two thresholds in one place, the filter policy: ``min_relevant`` and
``stop_confidence``. A kept document counts toward ``min_relevant`` when its verdict is relevant
and confident (``confidence >= stop_confidence``); any evaluator whose confidence is a
probability of being right reaches it the same way, none is special-cased.

* ``enough_relevant``: ``min_relevant`` kept documents are relevant and confident. This is the
  only stop reason that means success.
* ``kept_unconfident``: ``min_relevant`` documents are kept but fewer of them confidently, and
  the iteration just judged kept nothing new (``stalled``): another rewrite of the same judged
  documents seldom finds what two searches did not, so the run stops, and says that what it
  kept is unconfirmed. A weak judge's unsure keeps stay kept; the loop goes on searching while
  searching pays instead of stopping on its false positives.

Neither holds while every kept document's verdict lists the same item in
:attr:`~corrective_rag.types.Verdict.missing`: that part of the question is still unanswered (a
comparison whose second side no kept document covers). The items are compared as the evaluator
wrote them (case aside); nothing is parsed.
"""

from __future__ import annotations

from collections.abc import Collection

from corrective_rag.evaluate.policy import FilterPolicy
from corrective_rag.types import StopReason, Verdict

__all__ = ["confident", "enough_relevant", "stop_rule"]


def confident(verdict: Verdict, policy: FilterPolicy) -> bool:
    """Whether a kept verdict counts toward ``min_relevant``: relevant and confident."""
    return bool(verdict.relevant) and (verdict.confidence or 0.0) >= policy.stop_confidence


def stop_rule(
    kept: Collection[Verdict], policy: FilterPolicy, *, stalled: bool = False
) -> tuple[StopReason, str] | None:
    """The stop reason the kept verdicts give and why, or ``None`` while the loop goes on.

    Args:
        kept: the verdicts of every document kept so far.
        policy: gives ``min_relevant`` and ``stop_confidence``.
        stalled: the iteration just judged kept nothing new (a later iteration only).
    """
    if _still_missing(kept):
        return None
    sure = sum(confident(v, policy) for v in kept)
    if sure >= policy.min_relevant:
        why = f"{sure} kept confidently >= min_relevant {policy.min_relevant}"
        return StopReason.ENOUGH_RELEVANT, why
    if stalled and len(kept) >= policy.min_relevant:
        why = (
            f"{len(kept)} kept >= min_relevant {policy.min_relevant}, only {sure} of them "
            f"confidently (confidence >= {policy.stop_confidence}), and the last iteration "
            "kept nothing new"
        )
        return StopReason.KEPT_UNCONFIDENT, why
    return None


def enough_relevant(
    kept: Collection[Verdict], policy: FilterPolicy, *, stalled: bool = False
) -> str | None:
    """Why the run may stop (either stop reason of :func:`stop_rule`), or ``None``."""
    rule = stop_rule(kept, policy, stalled=stalled)
    return rule[1] if rule else None


def _still_missing(kept: Collection[Verdict]) -> frozenset[str]:
    """The ``missing`` items every kept verdict lists (empty if one lists none)."""
    found: frozenset[str] | None = None
    for verdict in kept:
        items = frozenset(item.casefold() for item in verdict.missing)
        found = items if found is None else found & items
        if not found:
            return frozenset()
    return found or frozenset()
