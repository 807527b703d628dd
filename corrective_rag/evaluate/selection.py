"""Where to cut a question's judged documents: the cut that maximises the expected F1.

Given each document's probability of being relevant, keeping the ``k`` most probable gives an
expected F1 of about ``2 * (sum of their probabilities) / (k + sum of all probabilities)``
(true positives over the mean of kept and relevant). The best ``k`` adapts to the question: one
or two stand-out documents among weak ones keep one or two, many middling ones keep many. A
fixed threshold cannot do that, and it is what a judge fitted on some collections most needs on
another, whose share of relevant documents differs (about 2 of 10 in a multi-hop QA collection,
about half in some classic ones).
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["expected_f1_cut", "keep_from"]


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


def keep_from(probabilities: Sequence[float], floor: float, keep_at: float = 1.0) -> float:
    """The least probability a document judged for the question needs to be kept.

    The expected-F1 cut of the question's judged documents (:func:`expected_f1_cut`), never
    above ``keep_at`` nor below ``floor``.
    """
    return max(min(expected_f1_cut(probabilities), keep_at), floor)
