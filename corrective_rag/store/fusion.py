"""Rank fusion: pure functions over ranked id lists, no I/O."""

from __future__ import annotations

from collections.abc import Sequence

from corrective_rag.errors import ConfigError

__all__ = ["RRF_K", "reciprocal_rank_fusion"]

# k=60 damps the weight of top ranks so that one leg's first place cannot outvote consistent
# agreement lower down; Cormack, Clarke & Buettcher (SIGIR 2009) found 60 robust across collections.
RRF_K = 60


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[str]],
    *,
    k: int = RRF_K,
    weights: Sequence[float] | None = None,
) -> list[tuple[str, float]]:
    """Fuse ranked id lists: ``score(d) = sum_i w_i / (k + rank_i(d))`` with 1-based ranks.

    Returns ``(id, score)`` pairs, best first; ties keep the order in which ids first appear
    (earlier lists, then earlier ranks), so the result is deterministic. An id repeated within
    one list counts at its best rank only.
    """
    if k < 0:
        raise ConfigError(f"RRF k must be >= 0, got {k}")
    if weights is None:
        weights = [1.0] * len(rankings)
    if len(weights) != len(rankings):
        raise ConfigError(f"{len(weights)} weights for {len(rankings)} rankings")
    if any(w < 0 for w in weights):
        raise ConfigError("RRF weights must be >= 0")
    scores: dict[str, float] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        seen: set[str] = set()
        for rank, doc_id in enumerate(ranking, start=1):
            if doc_id in seen:
                continue
            seen.add(doc_id)
            scores[doc_id] = scores.get(doc_id, 0.0) + weight / (k + rank)
    order = {doc_id: i for i, doc_id in enumerate(scores)}
    return sorted(scores.items(), key=lambda item: (-item[1], order[item[0]]))
