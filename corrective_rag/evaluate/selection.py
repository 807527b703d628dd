"""Where to cut a question's judged documents: the expected-F1 cut, bounded by the question's best.

Given each document's probability of being relevant, keeping the ``k`` most probable gives an
expected F1 of about ``2 * (sum of their probabilities) / (k + sum of all probabilities)``
(true positives over the mean of kept and relevant). The best ``k`` adapts to the question: one
or two stand-out documents among weak ones keep one or two, many middling ones keep many.

That cut reads the level of the probabilities, which does not travel: on a held-out single-hop
collection whose probabilities ran higher than on the collections the weights were fitted on, it
(with "any document 0.3 likely is kept") kept about four irrelevant documents for each relevant
one. Two bounds relative to the question's own evidence can hold it back: a kept document's logit
within ``margin`` of the best judged document's, and at most ``cap`` documents (the most
probable; ties kept together). Differences and counts do not depend on the level.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["expected_f1_cut", "keep_from"]

_EDGE = 1e-9  # keeps the logit finite at probabilities of exactly 0 or 1


def expected_f1_cut(probabilities: Sequence[float]) -> float:
    """The least probability among the documents whose keeping maximises the expected F1.

    Keep a document when its probability reaches the cut (ties are kept together). Empty input
    gives ``1.0``: nothing to keep. Pure and deterministic (ties between cuts go to fewer kept).
    """
    ranked = sorted((float(p) for p in probabilities), reverse=True)
    if not ranked:
        return 1.0
    total = sum(ranked)
    best, cut, running = -1.0, ranked[0], 0.0
    for k, p in enumerate(ranked, start=1):
        running += p
        value = 2.0 * running / (k + total)
        if value > best + 1e-12:
            best, cut = value, p
    return cut


def keep_from(
    probabilities: Sequence[float],
    floor: float,
    keep_at: float = 1.0,
    *,
    margin: float = math.inf,
    cap: int | None = None,
) -> float:
    """The least probability a document judged for the question needs to be kept.

    The expected-F1 cut of the question's judged documents (:func:`expected_f1_cut`), never
    above ``keep_at`` nor below ``floor``; and never below the best document's logit less
    ``margin``, nor below the ``cap``-th highest probability (``None``: no cap). The last two
    bounds hold even against ``keep_at``. Pure, and independent of the order of
    ``probabilities``; documents with equal probabilities are kept or dropped together.
    """
    ranked = sorted((float(p) for p in probabilities), reverse=True)
    if not ranked:
        return 1.0
    # no higher than the best itself, which rounding through the logit could otherwise exceed
    within = min(ranked[0], _probability(_logit(ranked[0]) - margin))
    capped = ranked[min(cap, len(ranked)) - 1] if cap is not None else 0.0
    return max(min(expected_f1_cut(ranked), keep_at), floor, within, capped)


def _logit(p: float) -> float:
    p = min(max(p, _EDGE), 1.0 - _EDGE)
    return math.log(p / (1.0 - p))


def _probability(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z)) if z > -700 else 0.0
