"""Offline retrieval metrics: pure functions over a ranked id list and relevance judgements.

``qrels`` maps document ids to a relevance grade; grades > 0 are relevant. Binary judgements are
grades of 1. nDCG uses linear gain (``grade / log2(rank + 1)``), as trec_eval and BEIR's
pytrec_eval do, with the ideal ranking built from all judged documents. An id repeated in a
ranking counts at its first position only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from corrective_rag.errors import InputError
from corrective_rag.inputs import check_int

__all__ = ["dcg", "ndcg_at_k", "recall_at_k"]


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
