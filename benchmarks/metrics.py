"""Offline retrieval metrics: pure functions over a ranked id list and relevance judgements.

``qrels`` maps document ids to a relevance grade; grades > 0 are relevant. Binary judgements are
grades of 1. nDCG uses linear gain (``grade / log2(rank + 1)``), as trec_eval and BEIR's
pytrec_eval do, with the ideal ranking built from all judged documents. An id repeated in a
ranking counts at its first position only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from corrective_rag.errors import ConfigError, InputError
from corrective_rag.inputs import check_int

__all__ = ["bootstrap_interval", "dcg", "ndcg_at_k", "recall_at_k"]


def _check(qrels: Mapping[str, float], k: int) -> None:
    check_int(k, "k", minimum=1)
    if not any(grade > 0 for grade in qrels.values()):
        raise InputError("qrels hold no relevant document (no grade > 0)")


def _first_k(ranked: Sequence[str], k: int) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for doc_id in ranked:
        if doc_id not in seen:
            seen.add(doc_id)
            out.append(doc_id)
            if len(out) == k:
                break
    return out


def dcg(grades: Sequence[float]) -> float:
    """Discounted cumulative gain of grades in rank order: ``sum g_i / log2(i + 1)``, i from 1."""
    return sum(g / math.log2(i + 1) for i, g in enumerate(grades, start=1))


def ndcg_at_k(ranked: Sequence[str], qrels: Mapping[str, float], k: int = 10) -> float:
    """Normalised DCG of the first ``k`` ids of ``ranked`` against ``qrels`` (0..1).

    Raises:
        InputError: ``qrels`` has no relevant document (the ideal DCG would be 0).
    """
    _check(qrels, k)
    gains = [max(float(qrels.get(doc_id, 0.0)), 0.0) for doc_id in _first_k(ranked, k)]
    ideal = sorted((float(g) for g in qrels.values() if g > 0), reverse=True)[:k]
    return dcg(gains) / dcg(ideal)


def recall_at_k(ranked: Sequence[str], qrels: Mapping[str, float], k: int = 10) -> float:
    """Share of the relevant documents (grade > 0) found among the first ``k`` ids.

    Raises:
        InputError: ``qrels`` has no relevant document.
    """
    _check(qrels, k)
    relevant = {doc_id for doc_id, grade in qrels.items() if grade > 0}
    return len(relevant.intersection(_first_k(ranked, k))) / len(relevant)


def bootstrap_interval(
    statistic: Callable[[np.ndarray], float],
    n: int,
    *,
    resamples: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """A percentile bootstrap interval of ``statistic`` over ``n`` queries.

    ``statistic`` takes an array of query indices (drawn with replacement) and returns the figure
    for those queries; resampling whole queries keeps a query's documents together, and a paired
    comparison (one arm minus another, computed inside ``statistic``) keeps each query's two
    arms together. The same ``seed`` draws the same resamples.
    """
    check_int(n, "n", minimum=1)
    check_int(resamples, "resamples", minimum=1)
    if not 0.0 < level < 1.0:
        raise ConfigError(f"level must be in (0, 1), got {level}")
    rng = np.random.default_rng(seed)
    found = [statistic(rng.integers(0, n, n)) for _ in range(resamples)]
    tail = (1.0 - level) / 2 * 100
    low, high = np.percentile(found, [tail, 100 - tail])
    return float(low), float(high)
