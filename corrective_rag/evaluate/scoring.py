"""What a verdict decided by a probability means: one meaning per field, whatever the threshold.

A judge that reads the probability ``p`` the model put on ``relevant: true`` (the JSON verdict's
value token, or the pointwise judge's ``yes``) decides with a threshold ``t`` (``judge-check``
fits it; 0.5 unless measured):

* ``relevant`` is ``p >= t``;
* ``confidence`` is the probability that this verdict is right, as the model's own token mass
  says it: ``p`` for a relevant verdict, ``1 - p`` for an irrelevant one. So the stop rule's sum
  of the kept verdicts' confidences is the expected number of relevant keeps, as for any judge;
* ``score`` places the decision on the verdict scale every policy reads. Such a judge has a
  yes/no decision and no middle grade, so it scores as the offline judge does
  (:class:`~corrective_rag.types.Verdict`): a relevant verdict from ``HIGH_FROM`` (0.7) up to 1
  as ``p`` goes from ``t`` to 1, an irrelevant one from 0 up to below ``RELEVANT_FROM`` (0.5) as
  ``p`` goes from 0 to ``t``; the label follows the score (``HIGH`` or ``LOW``, never
  ``MEDIUM``);
* ``probability`` keeps ``p`` itself.

Under a filter policy (:func:`~corrective_rag.evaluate.policy.decide`) such a verdict is kept
from the least ``p`` that :func:`kept_from` computes. Under ``general`` that is ``max(t, 0.3)``:
every relevant verdict sits in the high band, where the policy asks a confidence of at least
``high_confidence`` (0.3), so a document the model itself gives under 0.3 is a guess and is not
kept, whatever ``t``; the medium band's rule (score from 0.5 with confidence 0.7) adds nothing.
The stricter presets ask more (``medical``: ``p`` from ``t + (1 - t) / 3`` and 0.6, or from
0.85). ``judge-check`` fits and reports under the run's policy, so the threshold it writes and
the F1 it prints are those of the documents the run keeps. CRAG's action reads the score too:
a relevant probability verdict scores from 0.7, ``general``'s ``correct_at``, so an iteration
with one is *correct*; one whose verdicts all fall under 0.6 t is *incorrect*.

Without a threshold (a judge left to its written verdicts) :func:`recorded` keeps the verdict
as written and records ``p`` beside it, for inspection and for ``judge-check``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING

from corrective_rag.errors import ConfigError
from corrective_rag.evaluate.policy import FilterPolicy
from corrective_rag.types import HIGH_FROM, RELEVANT_FROM, Relevance, Verdict

__all__ = [
    "SCORE_BY",
    "asked_logprobs",
    "calibrated",
    "check_threshold",
    "kept_from",
    "kept_from_each",
    "recorded",
    "with_probability",
]

if TYPE_CHECKING:  # numpy loads when a threshold is fitted (judge-check), not with the judge
    import numpy as np
    import numpy.typing as npt

    Floats = npt.NDArray[np.float64]

# A threshold is kept this far inside (0, 1): the score's two pieces divide by t and by 1 - t.
_EDGE = 1e-6


def _inside(threshold: float) -> float:
    return min(max(threshold, _EDGE), 1 - _EDGE)


def _readable(p: object) -> bool:
    """A probability a verdict can carry: a real number in 0..1 (not a bool, not NaN)."""
    return (
        isinstance(p, int | float)
        and not isinstance(p, bool)
        and math.isfinite(p)
        and 0.0 <= p <= 1.0
    )


def calibrated(p: float, threshold: float = 0.5) -> tuple[bool, float, float]:
    """``(relevant, score, confidence)`` of a verdict decided by P(relevant) ``p`` at ``threshold``.

    Relevant from ``threshold`` on; the confidence is ``p`` or ``1 - p`` (the chance the verdict
    is right); the score runs from ``HIGH_FROM`` to 1 over the relevant side and from 0 to
    ``RELEVANT_FROM`` over the other (module docstring).
    """
    t = _inside(threshold)
    if p >= t:
        score = HIGH_FROM + (1.0 - HIGH_FROM) * (p - t) / (1.0 - t)
        return True, min(score, 1.0), p
    # p < t: strictly below RELEVANT_FROM, so the score band says irrelevant as the verdict does
    score = RELEVANT_FROM * p / t
    return False, max(score, 0.0), 1.0 - p


def with_probability(verdict: Verdict, p: float, threshold: float = 0.5) -> Verdict:
    """``verdict`` decided by P(relevant) ``p`` at ``threshold`` (``score_source="logprob"``).

    Its relevant, label, score and confidence are replaced (:func:`calibrated`), ``p`` is kept
    as ``probability``; its reasoning and missing stay. An ungraded verdict, or a ``p`` that is
    not a probability (NaN, out of 0..1), leaves the verdict as it was: a probability that
    cannot be read never decides.
    """
    if not verdict.graded or not _readable(p):
        return verdict
    relevant, score, confidence = calibrated(float(p), threshold)
    return dataclasses.replace(
        verdict,
        relevant=relevant,
        label=Relevance.HIGH if relevant else Relevance.LOW,
        score=score,
        confidence=confidence,
        score_source="logprob",
        probability=float(p),
    )


def recorded(verdict: Verdict, p: float) -> Verdict:
    """``verdict`` as written, with P(relevant) ``p`` recorded beside it (``probability``).

    Nothing that decides changes (relevant, score, confidence, ``score_source="verbal"``); an
    ungraded verdict or an unreadable ``p`` leaves the verdict as it was.
    """
    if not verdict.graded or not _readable(p):
        return verdict
    return dataclasses.replace(verdict, probability=float(p))


def kept_from(threshold: float, policy: FilterPolicy) -> float:
    """The least P(relevant) from which ``policy`` keeps a probability verdict at ``threshold``.

    The policy keeps a relevant verdict whose score and confidence pass either of its two rules
    (:func:`~corrective_rag.evaluate.policy.decide`); a probability verdict's score and
    confidence both grow with ``p`` (module docstring), so each rule holds from one ``p`` on
    and the verdict is kept from the lower of the two. Above 1: never kept.
    """
    import numpy as np

    return float(kept_from_each(np.array([threshold], dtype=np.float64), policy)[0])


def kept_from_each(thresholds: Floats, policy: FilterPolicy) -> Floats:
    """:func:`kept_from` of every threshold at once (``judge-check`` asks it of each candidate)."""
    import numpy as np

    t = np.clip(thresholds, _EDGE, 1 - _EDGE)
    # the score reaches s at p = t + (s - HIGH_FROM)(1 - t)/(1 - HIGH_FROM)
    per_score = (1.0 - t) / (1.0 - HIGH_FROM)
    high = np.maximum(
        t + max(0.0, policy.high_score - HIGH_FROM) * per_score, policy.high_confidence
    )
    medium = np.maximum(
        t + max(0.0, policy.medium_score - HIGH_FROM) * per_score, policy.medium_confidence
    )
    kept: Floats = np.maximum(t, np.minimum(high, medium))
    return kept


SCORE_BY = ("verbal", "probability")  # LLMEvaluator(score_by=...): the written verdict, or P(true)
_TOP_LOGPROBS = 5  # alternatives asked with logprobs=True: enough for true/false to be listed


def asked_logprobs(logprobs: object) -> int | None:
    """The ``top_logprobs`` count to ask for, from OpenAI's convention; None: not asked.

    ``True`` asks with 5 alternatives, an int 0..20 with that many, ``None`` / ``False`` not at
    all (``LLMEvaluator(logprobs=...)``).

    Raises:
        ConfigError: anything else.
    """
    if logprobs is None or logprobs is False:
        return None
    if logprobs is True:
        return _TOP_LOGPROBS
    if isinstance(logprobs, int) and 0 <= logprobs <= 20:
        return logprobs
    raise ConfigError(
        f"logprobs must be True/False, None or an int in 0..20 (top_logprobs), got {logprobs!r}"
    )


def check_threshold(threshold: object) -> None:
    """Refuse a decision threshold that is not a number strictly inside (0, 1)."""
    if isinstance(threshold, bool) or not isinstance(threshold, int | float):
        raise ConfigError(f"threshold must be a number in (0, 1), got {threshold!r}")
    if not 0.0 < threshold < 1.0:  # NaN fails this too
        raise ConfigError(f"threshold must be in (0, 1), got {threshold!r}")
