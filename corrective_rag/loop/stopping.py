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

from collections.abc import Collection, Iterable
from dataclasses import replace

from corrective_rag.errors import ConfigError
from corrective_rag.evaluate.policy import FilterPolicy
from corrective_rag.types import StopReason, Verdict

__all__ = ["confident", "full_at", "stop_rule", "sureness", "within_cap"]


def confident(verdict: Verdict, policy: FilterPolicy) -> bool:
    """Whether a kept verdict is relevant and reaches ``stop_confidence`` on its own."""
    return bool(verdict.relevant) and (verdict.confidence or 0.0) >= policy.stop_confidence


def sureness(kept: Collection[Verdict]) -> tuple[int, float]:
    """How many kept verdicts say relevant, and the sum of their confidences."""
    relevant = [v for v in kept if v.relevant]
    return len(relevant), sum(min(max(v.confidence or 0.0, 0.0), 1.0) for v in relevant)


def stop_rule(
    kept: Collection[Verdict],
    policy: FilterPolicy,
    *,
    stalled: bool = False,
    full: int | None = None,
) -> tuple[StopReason, str] | None:
    """The stop reason the kept verdicts give and why, or ``None`` while the loop goes on.

    Args:
        kept: the verdicts of every document kept so far.
        policy: gives ``min_relevant`` and ``stop_confidence``.
        stalled: the iteration just judged kept nothing new (a later iteration only).
        full: the evaluator's ``keeps_at_most``, once it has judged that many of the
            question's documents relevant (:func:`full_at`): it keeps nothing more, so the run
            stops whatever else holds: ``enough_relevant`` when sure enough, else
            ``kept_unconfident``, or ``no_progress`` with fewer than ``min_relevant`` kept.
            ``None``: the evaluator may keep more.
    """
    missing = _still_missing(kept)
    relevant, total = sureness(kept)
    need = policy.min_relevant * policy.stop_confidence
    capped = (
        f"; the evaluator keeps at most {full} documents a question and has judged {full} relevant"
        if full is not None
        else ""
    )
    if not missing and relevant >= policy.min_relevant and total >= need - 1e-9:
        sure = sum(confident(v, policy) for v in kept)
        why = (
            f"{relevant} kept relevant >= min_relevant {policy.min_relevant}, confidences "
            f"summing to {total:.2f} >= {policy.min_relevant} x {policy.stop_confidence} "
            f"({sure} of them at {policy.stop_confidence} or more)"
        )
        return StopReason.ENOUGH_RELEVANT, why + capped
    ended = full is not None or (stalled and not missing)
    if ended and len(kept) >= policy.min_relevant:
        if missing:
            why = f"{len(kept)} kept, every one missing {', '.join(sorted(missing))}"
        else:
            why = (
                f"{len(kept)} kept >= min_relevant {policy.min_relevant}, but their confidences "
                f"sum to only {total:.2f} < {policy.min_relevant} x {policy.stop_confidence}"
            )
        if full is None:
            why += ", and the last iteration kept nothing new"
        return StopReason.KEPT_UNCONFIDENT, why + capped
    if full is not None:
        why = f"{len(kept)} kept < min_relevant {policy.min_relevant}"
        return StopReason.NO_PROGRESS, why + capped
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


def full_at(evaluator: object, verdicts: Iterable[Verdict]) -> int | None:
    """The evaluator's ``keeps_at_most`` once ``verdicts`` (the run's) say relevant that often.

    ``None`` while it may still keep more, or when it has no such cap.
    """
    most = getattr(evaluator, "keeps_at_most", None)
    if not isinstance(most, int) or isinstance(most, bool):
        return None
    return most if sum(v.relevant is True for v in verdicts) >= most else None


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
