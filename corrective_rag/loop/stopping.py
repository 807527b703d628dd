"""When the corrective loop has found enough: a pure function over the kept verdicts.

The stop rule reads verdict fields only (the verdict contract, :class:`~corrective_rag.types.
Verdict`), with its two thresholds in one place, the filter policy: ``min_relevant`` and
``stop_confidence``. A kept document counts toward ``min_relevant`` when its verdict says
relevant, and the kept relevant verdicts' confidences are summed; any evaluator whose confidence
is a probability of being right reaches the rule the same way, none is special-cased.

* ``enough_relevant``: at least ``min_relevant`` kept documents are relevant, and together they
  are as sure as ``min_relevant`` documents at ``stop_confidence`` each: their confidences sum
  to ``min_relevant * stop_confidence`` or more. ``min_relevant`` keeps that each reach
  ``stop_confidence`` always qualify; so do more keeps that are each less sure, because a
  confidence that is a probability of being right sums to the expected number of relevant
  documents among the keeps (the offline judge's confidences are such probabilities, fitted on
  qrels, and seldom reach 0.7 one by one: five keeps at 0.45 are as good as three at 0.75).
  This is the only stop reason that means success.
* ``kept_unconfident``: ``min_relevant`` documents are kept but not that surely, and
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
from dataclasses import replace

from corrective_rag.errors import ConfigError
from corrective_rag.evaluate.policy import FilterPolicy
from corrective_rag.types import StopReason, Verdict

__all__ = ["confident", "enough_relevant", "stop_rule", "sureness", "within_cap"]


def confident(verdict: Verdict, policy: FilterPolicy) -> bool:
    """Whether a kept verdict is relevant and reaches ``stop_confidence`` on its own."""
    return bool(verdict.relevant) and (verdict.confidence or 0.0) >= policy.stop_confidence


def sureness(kept: Collection[Verdict]) -> tuple[int, float]:
    """How many kept verdicts say relevant, and the sum of their confidences."""
    relevant = [v for v in kept if v.relevant]
    return len(relevant), sum(min(max(v.confidence or 0.0, 0.0), 1.0) for v in relevant)


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
    relevant, total = sureness(kept)
    need = policy.min_relevant * policy.stop_confidence
    if relevant >= policy.min_relevant and total >= need - 1e-9:
        sure = sum(confident(v, policy) for v in kept)
        why = (
            f"{relevant} kept relevant >= min_relevant {policy.min_relevant}, confidences "
            f"summing to {total:.2f} >= {policy.min_relevant} x {policy.stop_confidence} "
            f"({sure} of them at {policy.stop_confidence} or more)"
        )
        return StopReason.ENOUGH_RELEVANT, why
    if stalled and len(kept) >= policy.min_relevant:
        why = (
            f"{len(kept)} kept >= min_relevant {policy.min_relevant}, but their confidences "
            f"sum to only {total:.2f} < {policy.min_relevant} x {policy.stop_confidence}, "
            "and the last iteration kept nothing new"
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


def within_cap(policy: FilterPolicy, evaluator: object, *, given: bool) -> FilterPolicy:
    """``policy`` with ``min_relevant`` no more than the evaluator's ``keeps_at_most``.

    A judge held to two documents a question (``LocalWeights.cap``) would leave a run asking
    for the policy's three running to the cap every time: a default is lowered to the cap, a
    number the caller gave is refused.
    """
    most = getattr(evaluator, "keeps_at_most", None)
    if not isinstance(most, int) or isinstance(most, bool) or policy.min_relevant <= most:
        return policy
    if given:
        raise ConfigError(
            f"min_relevant {policy.min_relevant} is more than the evaluator keeps of a "
            f"question's documents ({most}): the run would never stop on enough of them"
        )
    return replace(policy, min_relevant=most)
