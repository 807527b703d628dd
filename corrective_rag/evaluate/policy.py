"""The filter policy: verdict score and confidence together decide keep, drop or ungraded.

Pure functions over frozen values, so they can be property-tested:

* :func:`decide` turns one verdict into a :class:`Decision` under a :class:`FilterPolicy`:
  a verdict that says not relevant is dropped whatever its score (the verdict contract,
  :class:`~corrective_rag.types.Verdict`); of the relevant ones, a high score is kept (unless
  the evaluator is almost unsure), a medium score only with high confidence, a low score is
  dropped; an ungraded verdict is neither kept nor dropped.
* :func:`crag_action` turns one iteration's verdicts into CRAG's correct / ambiguous / incorrect.

Named presets (:data:`PRESETS`, :func:`get_policy`) tune the thresholds per domain.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from corrective_rag.errors import ConfigError
from corrective_rag.inputs import check_int, is_number
from corrective_rag.types import HIGH_FROM, RELEVANT_FROM, CragAction, Verdict

# FilterPolicy, get_policy: their home is corrective_rag.evaluate
__all__ = ["PRESETS", "Decision", "crag_action", "decide"]


class Decision(str, enum.Enum):
    """What the policy does with one verdict."""

    KEEP = "keep"
    DROP = "drop"
    UNGRADED = "ungraded"


def _check_unit(name: str, value: object) -> None:
    if not is_number(value) or math.isnan(value):
        raise ConfigError(f"{name} must be a number in 0..1, got {value!r}")
    if not 0.0 <= value <= 1.0:
        raise ConfigError(f"{name} must be in 0..1, got {value}")


@dataclass(frozen=True, slots=True)
class FilterPolicy:
    """Thresholds that turn verdicts into keep / drop and iterations into CRAG actions.

    Attributes:
        name: a label recorded on every run (``"custom"`` unless a preset).
        high_score: a score at or above this is high relevance: kept when the confidence is at
            least ``high_confidence``.
        high_confidence: the least confidence for keeping a high-relevance document (0.3 by
            default and in ``general``: a high score with almost no confidence is a guess).
            The offline judge says relevant from its fitted threshold
            (``LocalWeights.threshold``, 0.22, fitted for the judge alone) with its probability
            as confidence, so inside the loop this floor keeps its verdicts from 0.30 on. On
            purpose: without the floor the loop fell behind single shot at the same documents
            judged on Cranfield (recall -0.018 [-0.030, -0.008]; with it -0.001 [-0.009,
            +0.004]); docs/offline-judge.md has the figures.
        medium_score: a score at or above this (but below ``high_score``) is medium relevance:
            kept only when the confidence is at least ``medium_confidence``; below it: dropped.
            A document passing either rule is kept, so keeping is monotone in both numbers.
        medium_confidence: the confidence a medium-relevance document needs to be kept.
        min_relevant: how many kept documents are enough to stop the loop.
        stop_confidence: how sure each of ``min_relevant`` keeps must be, on average, to stop
            the loop: the kept relevant verdicts' confidences must sum to
            ``min_relevant * stop_confidence`` (``loop.stopping.stop_rule``). A document kept on
            a weak verdict is still kept, but the loop goes on searching until the keeps are
            that sure together, so a noisy judge does not stop early on a few false positives
            while a confident one stops at once.
        correct_at: CRAG's upper threshold: an iteration with any graded score at or above it
            is *correct*.
        incorrect_below: CRAG's lower threshold: an iteration whose graded scores are all below
            it is *incorrect*; anything between is *ambiguous*.
    """

    name: str = "custom"
    high_score: float = HIGH_FROM
    high_confidence: float = 0.3
    medium_score: float = RELEVANT_FROM
    medium_confidence: float = 0.7
    min_relevant: int = 3
    stop_confidence: float = 0.7
    correct_at: float = 0.7
    incorrect_below: float = 0.3

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ConfigError(f"policy name must be a non-empty string, got {self.name!r}")
        for f in dataclasses.fields(self):
            if f.name not in ("name", "min_relevant"):
                _check_unit(f"policy {f.name}", getattr(self, f.name))
        if self.medium_score > self.high_score:
            raise ConfigError(
                f"policy medium_score {self.medium_score} above high_score {self.high_score}"
            )
        if self.incorrect_below > self.correct_at:
            raise ConfigError(
                f"policy incorrect_below {self.incorrect_below} above correct_at {self.correct_at}"
            )
        check_int(self.min_relevant, "policy min_relevant", minimum=1, maximum=1000)

    def to_dict(self) -> dict[str, Any]:
        """The policy as a flat JSON-ready dict (what ``RunResult.policy`` records)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FilterPolicy:
        """Rebuild a policy from :meth:`to_dict` output (unknown keys are refused)."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown policy keys: {', '.join(unknown)}")
        return cls(**dict(data))


# Presets. Their numbers are judgement calls, not measurements: no collection here has graded
# relevance for these domains to fit them on. What they encode is a direction: medical and
# legal answers are costly when wrong, so they demand higher scores and more confident medium
# verdicts; e-commerce tolerates loose matches (a near product is useful). ``general`` puts its
# bands on the verdict contract's own boundaries (types.RELEVANT_FROM, types.HIGH_FROM). An
# evaluator whose relevant verdicts carry low confidence (a calibrated probability near 0.3) is
# dropped more under the stricter presets: that is the presets' intent, not a bug; measure your
# own judge against them (benchmarks/loop.py --policy) before choosing one.
PRESETS: Mapping[str, FilterPolicy] = {
    "general": FilterPolicy(name="general"),
    "medical": FilterPolicy(
        name="medical",
        high_score=0.8,
        high_confidence=0.6,
        medium_score=0.65,
        medium_confidence=0.85,
        min_relevant=3,
        correct_at=0.8,
        incorrect_below=0.4,
    ),
    "legal": FilterPolicy(
        name="legal",
        high_score=0.8,
        high_confidence=0.5,
        medium_score=0.6,
        medium_confidence=0.8,
        min_relevant=2,
        correct_at=0.8,
        incorrect_below=0.35,
    ),
    "ecommerce": FilterPolicy(
        name="ecommerce",
        high_score=0.6,
        high_confidence=0.2,
        medium_score=0.4,
        medium_confidence=0.6,
        min_relevant=3,
        correct_at=0.6,
        incorrect_below=0.25,
    ),
}


def get_policy(name: str) -> FilterPolicy:
    """Return the preset called ``name`` (``general``, ``medical``, ``legal``, ``ecommerce``)."""
    if not isinstance(name, str) or name not in PRESETS:
        raise ConfigError(f"unknown policy preset {name!r}; choose one of {', '.join(PRESETS)}")
    return PRESETS[name]


def decide(verdict: Verdict, policy: FilterPolicy) -> Decision:
    """Keep, drop or leave ungraded one verdict under ``policy``.

    A verdict that says not relevant is dropped whatever its score and confidence: the fields
    disagree, and the contract resolves every disagreement toward dropping. A verdict decided
    by a probability P at threshold t (``score_source="logprob"``) is kept from the P that
    :func:`~corrective_rag.evaluate.scoring.kept_from` says: under ``general``, exactly when
    P >= max(t, ``high_confidence``) (:mod:`~corrective_rag.evaluate.scoring`).
    """
    if not verdict.graded or verdict.score is None or verdict.confidence is None:
        return Decision.UNGRADED
    if not verdict.relevant:
        return Decision.DROP
    score, confidence = verdict.score, verdict.confidence
    # Two rules joined by "or", so that a higher score or confidence can never lose a document.
    high = score >= policy.high_score and confidence >= policy.high_confidence
    medium = score >= policy.medium_score and confidence >= policy.medium_confidence
    return Decision.KEEP if high or medium else Decision.DROP


def crag_action(verdicts: Sequence[Verdict], policy: FilterPolicy) -> CragAction:
    """CRAG's action for one iteration's verdicts (Yan et al. 2024, thresholds from ``policy``).

    *Correct* when any graded score reaches ``correct_at``; *incorrect* when every graded score
    is below ``incorrect_below``; otherwise *ambiguous*. A verdict that says not relevant
    counts as below ``incorrect_below`` whatever its score (the verdict contract). With
    verdicts but none graded, the evaluator could not tell: *ambiguous*. With no verdicts at
    all nothing usable was found: *incorrect*, so that a fallback source replaces the empty
    local results.
    """
    scores = [v.score if v.relevant else 0.0 for v in verdicts if v.graded and v.score is not None]
    if not scores:
        return CragAction.AMBIGUOUS if verdicts else CragAction.INCORRECT
    if max(scores) >= policy.correct_at:
        return CragAction.CORRECT
    if max(scores) < policy.incorrect_below:
        return CragAction.INCORRECT
    return CragAction.AMBIGUOUS
