"""Rank fusion: pure functions over ranked lists, no I/O, and the two strategies built on them.

A *run* is one leg's result: ``(id, score)`` pairs, best first. :class:`RRFusion` (the default)
looks at ranks only; :class:`ConvexFusion` min-max normalises each leg's scores and mixes them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from corrective_rag.errors import ConfigError

# ConvexFusion, Fusion, RRFusion: their home is corrective_rag.store
__all__ = ["RRF_K", "convex_combination", "min_max", "reciprocal_rank_fusion"]

Run = Sequence[tuple[str, float]]

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


def min_max(scores: Sequence[float]) -> list[float]:
    """Rescale scores to 0..1 (min -> 0, max -> 1); equal scores all become 1.0.

    A leg whose candidates all score the same still ranked them as its best, so they get the
    top value rather than 0 (which would make the leg vanish from the mix).
    """
    if not scores:
        return []
    low, high = min(scores), max(scores)
    if high - low <= 0.0 or not math.isfinite(high - low):
        return [1.0] * len(scores)
    return [(s - low) / (high - low) for s in scores]


def convex_combination(runs: Sequence[Run], weights: Sequence[float]) -> list[tuple[str, float]]:
    """Fuse scored runs: ``score(d) = sum_i w_i * minmax_i(d)``, best first.

    Each run's scores are min-max normalised over that run's own candidates (``min_max``), so
    BM25's unbounded scores and cosine similarities share one 0..1 scale; a document missing
    from a run gets 0 there, i.e. it counts as no better than that run's weakest candidate.
    Min-max (rather than z-scores) keeps every contribution in 0..1 and needs no distribution
    assumption about a handful of candidates. Weights must be >= 0 and sum to 1. Ties keep the
    order of first appearance (earlier runs, then earlier positions). An id repeated within one
    run counts at its highest score.
    """
    if len(weights) != len(runs):
        raise ConfigError(f"{len(weights)} weights for {len(runs)} runs")
    if any(w < 0 for w in weights) or not math.isclose(sum(weights), 1.0, abs_tol=1e-9):
        raise ConfigError(f"convex weights must be >= 0 and sum to 1, got {list(weights)}")
    fused: dict[str, float] = {}
    for run, weight in zip(runs, weights, strict=True):
        best: dict[str, float] = {}
        for doc_id, score in run:
            if doc_id not in best or score > best[doc_id]:
                best[doc_id] = score
        for doc_id in best:
            fused.setdefault(doc_id, 0.0)
        for doc_id, norm in zip(best, min_max(list(best.values())), strict=True):
            fused[doc_id] += weight * norm
    order = {doc_id: i for i, doc_id in enumerate(fused)}
    return sorted(fused.items(), key=lambda item: (-item[1], order[item[0]]))


class Fusion(Protocol):
    """Fuses the legs' runs, given in the order (bm25, dense), into one ``(id, score)`` list."""

    def fuse(self, runs: Sequence[Run]) -> list[tuple[str, float]]:
        """Return fused ``(id, score)`` pairs, best first."""
        ...


@dataclass(frozen=True, slots=True)
class RRFusion:
    """Reciprocal rank fusion over the legs' ranks (scores are ignored).

    Args:
        k: the RRF constant (60 by default, see ``RRF_K``).
        weights: one weight per leg, (bm25, dense); equal by default.
    """

    k: int = RRF_K
    weights: tuple[float, ...] = (1.0, 1.0)

    def __post_init__(self) -> None:
        if self.k < 0:
            raise ConfigError(f"RRF k must be >= 0, got {self.k}")
        if any(w < 0 for w in self.weights) or not any(w > 0 for w in self.weights):
            raise ConfigError(f"RRF weights must be >= 0, not all 0, got {self.weights}")

    def fuse(self, runs: Sequence[Run]) -> list[tuple[str, float]]:
        """Fuse the runs by rank."""
        rankings = [[doc_id for doc_id, _ in run] for run in runs]
        return reciprocal_rank_fusion(rankings, k=self.k, weights=self.weights)


@dataclass(frozen=True, slots=True)
class ConvexFusion:
    """Convex combination of min-max normalised scores: ``(1 - alpha) * bm25 + alpha * dense``.

    Args:
        alpha: weight of the dense leg in 0..1 (1.0: dense only, 0.0: BM25 only).
    """

    alpha: float = 0.5

    def __post_init__(self) -> None:
        if not 0.0 <= self.alpha <= 1.0:
            raise ConfigError(f"alpha must be in 0..1, got {self.alpha}")

    def fuse(self, runs: Sequence[Run]) -> list[tuple[str, float]]:
        """Fuse the (bm25, dense) runs by normalised score."""
        if len(runs) != 2:
            raise ConfigError(f"ConvexFusion fuses two runs (bm25, dense), got {len(runs)}")
        return convex_combination(runs, (1.0 - self.alpha, self.alpha))
