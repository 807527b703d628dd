"""Why a run stops: every stop reason, decided in one function (:func:`decide_stop`).

The loop asks :func:`decide_stop` at three moments, with the :class:`Facts` it has then:

* before an iteration: ``budget_exhausted`` when a budget limit is reached;
* once the iteration's documents are judged and kept (:attr:`Moment.JUDGED`), in this order:
  ``enough_relevant``, ``kept_unconfident``, ``no_progress`` of a capped judge,
  ``rewrite_failed`` (a rewrite was rejected and the question has no unjudged hits left),
  ``no_progress`` (nothing new to judge), ``iteration_cap``, ``budget_exhausted`` before the
  rewrite;
* after the rewrite (:attr:`Moment.REWRITTEN`): ``rewrite_failed`` when the model answered
  neither the grading calls nor the rewrite (another iteration would only wait on it again).

A new stop rule is a branch of :func:`decide_stop` and, if it needs one, a field of :class:`Facts`.

The kept-verdict rules read verdict fields only (the verdict contract, :class:`~corrective_rag.
types.Verdict`), with their two thresholds in one place, the filter policy: ``min_relevant`` and
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
* An evaluator that keeps at most ``keeps_at_most`` documents a question (a capped offline
  judge) and has judged that many relevant keeps nothing more (``full``): the run stops whatever
  else holds: ``enough_relevant`` when sure enough, else ``kept_unconfident``, or
  ``no_progress`` with fewer than ``min_relevant`` kept.

Neither holds while every kept document's verdict lists the same item in
:attr:`~corrective_rag.types.Verdict.missing`: that part of the question is still unanswered (a
comparison whose second side no kept document covers). The items are compared as the evaluator
wrote them (case aside); nothing is parsed.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Iterable
from dataclasses import dataclass, replace

from corrective_rag.errors import ConfigError
from corrective_rag.evaluate.policy import FilterPolicy
from corrective_rag.types import Rewrite, StopReason, Verdict

__all__ = [
    "Facts",
    "Moment",
    "confident",
    "decide_stop",
    "full_at",
    "stop_rule",
    "sureness",
    "within_cap",
]

Stop = tuple[StopReason, str]  # a stop reason and its detail (RunResult.stop_detail)


class Moment(str, enum.Enum):
    """When in an iteration the loop asks :func:`decide_stop`."""

    BEFORE_ITERATION = "before_iteration"
    JUDGED = "judged"  # the iteration's documents are judged and kept; no rewrite yet
    REWRITTEN = "rewritten"  # the rewriter has answered


@dataclass(frozen=True, slots=True)
class Facts:
    """What :func:`decide_stop` knows at one moment of an iteration (later fields: ``JUDGED`` on).

    Attributes:
        moment: when it is asked.
        index: the iteration, from 1.
        spent: the budget limit reached, if any.
        kept: the verdicts of every document kept so far.
        new: documents judged in this iteration.
        kept_new: of them, kept (after the CRAG fallback).
        full: :func:`full_at`: the evaluator's cap, once it has judged that many relevant.
        rejected: why the last rewrite was rejected, while the loop pages the question's hits.
        retrieved: the ids the main retriever returned in this iteration.
        earlier: the ids it returned in each earlier iteration.
        last: this is the last iteration (``max_iterations``).
        rewrite: the rewriter's answer (``REWRITTEN``).
        grading_failed: every grading call of this iteration failed (``REWRITTEN``).
    """

    moment: Moment
    index: int
    spent: str | None = None
    kept: tuple[Verdict, ...] = ()
    new: int = 0
    kept_new: int = 0
    full: int | None = None
    rejected: str | None = None
    retrieved: frozenset[str] = frozenset()
    earlier: tuple[frozenset[str], ...] = ()
    last: bool = False
    rewrite: Rewrite | None = None
    grading_failed: bool = False


def decide_stop(facts: Facts, policy: FilterPolicy) -> Stop | None:
    """Why the run stops at this moment, and the detail it records; ``None``: it goes on.

    Every stop reason is a branch here, in the order they are tried (see the module docstring).
    """
    f = facts
    if f.moment is Moment.BEFORE_ITERATION:
        if f.spent:
            return StopReason.BUDGET_EXHAUSTED, f"before iteration {f.index}: {f.spent}"
        return None
    if f.moment is Moment.REWRITTEN:
        # the model answered neither the grading calls nor the rewrite (a deadline, an HTTP
        # error): another iteration would only wait on it again, so the run ends with what it has
        failed = f.rewrite is not None and f.rewrite.query is None and f.rewrite.usage.failed_calls
        if failed and f.grading_failed and f.rewrite is not None:
            return StopReason.REWRITE_FAILED, f.rewrite.rejected or "rewriter failed"
        return None
    missing = _still_missing(f.kept)
    relevant, total = sureness(f.kept)
    capped = _capped(f.full)
    if not missing and relevant >= policy.min_relevant and total >= _needed(policy) - 1e-9:
        return StopReason.ENOUGH_RELEVANT, _enough(f.kept, policy, relevant, total) + capped
    # judged new documents and kept none (with none to judge, no_progress below says more)
    stalled = f.index > 1 and f.new > 0 and f.kept_new == 0
    if (f.full is not None or (stalled and not missing)) and len(f.kept) >= policy.min_relevant:
        why = _unconfident(f.kept, policy, missing, total, full=f.full is not None)
        return StopReason.KEPT_UNCONFIDENT, why + capped
    if f.full is not None:
        why = f"{len(f.kept)} kept < min_relevant {policy.min_relevant}"
        return StopReason.NO_PROGRESS, why + capped
    if f.new == 0 and f.rejected is not None:
        why = f"rewrite rejected ({f.rejected}) and the question has no unjudged hits left"
        return StopReason.REWRITE_FAILED, why
    if f.new == 0:
        return StopReason.NO_PROGRESS, f"no new documents to judge ({_unchanged(f)})"
    if f.last:
        return StopReason.ITERATION_CAP, f"reached max_iterations={f.index}"
    if f.spent:
        return StopReason.BUDGET_EXHAUSTED, f"before rewrite {f.index}: {f.spent}"
    return None


def stop_rule(
    kept: Collection[Verdict],
    policy: FilterPolicy,
    *,
    stalled: bool = False,
    full: int | None = None,
) -> Stop | None:
    """The kept verdicts' part of :func:`decide_stop`, alone.

    Its answer for a later iteration that judged new documents (and kept none when
    ``stalled``), with iterations and budget left.

    Args:
        kept: the verdicts of every document kept so far.
        policy: gives ``min_relevant`` and ``stop_confidence``.
        stalled: the iteration just judged kept nothing new (a later iteration only).
        full: the evaluator's ``keeps_at_most``, once it has judged that many of the
            question's documents relevant (:func:`full_at`); ``None``: it may keep more.
    """
    facts = Facts(
        Moment.JUDGED, 2, kept=tuple(kept), new=1, kept_new=0 if stalled else 1, full=full
    )
    return decide_stop(facts, policy)


def confident(verdict: Verdict, policy: FilterPolicy) -> bool:
    """Whether a kept verdict is relevant and reaches ``stop_confidence`` on its own."""
    return bool(verdict.relevant) and (verdict.confidence or 0.0) >= policy.stop_confidence


def sureness(kept: Collection[Verdict]) -> tuple[int, float]:
    """How many kept verdicts say relevant, and the sum of their confidences."""
    relevant = [v for v in kept if v.relevant]
    return len(relevant), sum(min(max(v.confidence or 0.0, 0.0), 1.0) for v in relevant)


def _needed(policy: FilterPolicy) -> float:
    """The confidence sum that is enough: ``min_relevant`` keeps at ``stop_confidence``."""
    return policy.min_relevant * policy.stop_confidence


def _enough(kept: Collection[Verdict], policy: FilterPolicy, relevant: int, total: float) -> str:
    sure = sum(confident(v, policy) for v in kept)
    return (
        f"{relevant} kept relevant >= min_relevant {policy.min_relevant}, confidences "
        f"summing to {total:.2f} >= {policy.min_relevant} x {policy.stop_confidence} "
        f"({sure} of them at {policy.stop_confidence} or more)"
    )


def _unconfident(
    kept: Collection[Verdict],
    policy: FilterPolicy,
    missing: frozenset[str],
    total: float,
    *,
    full: bool,
) -> str:
    relevant = sum(bool(v.relevant) for v in kept)
    if missing:
        why = f"{len(kept)} kept, every one missing {', '.join(sorted(missing))}"
    elif relevant < policy.min_relevant:  # kept verdicts that do not say relevant
        why = (
            f"{len(kept)} kept >= min_relevant {policy.min_relevant}, but only {relevant} of "
            "them say relevant"
        )
    else:
        why = (
            f"{len(kept)} kept >= min_relevant {policy.min_relevant}, but their confidences "
            f"sum to only {total:.2f} < {policy.min_relevant} x {policy.stop_confidence}"
        )
    return why if full else why + ", and the last iteration kept nothing new"


def _capped(full: int | None) -> str:
    if full is None:
        return ""
    return (
        f"; the evaluator keeps at most {full} documents a question and has judged {full} relevant"
    )


def _unchanged(facts: Facts) -> str:
    """Why an iteration had nothing new to judge: a repeated retrieved set, or which kind."""
    repeat = [i for i, ids in enumerate(facts.earlier, start=1) if ids == facts.retrieved]
    if repeat:
        return f"same retrieved set as iteration {repeat[0]}"
    return "every retrieved document already judged" if facts.retrieved else "nothing retrieved"


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
