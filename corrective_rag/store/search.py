"""The outline every hybrid store's ``retrieve`` and ``search`` follow, written once.

A store brings two things: ``run_legs``, each leg's best ``(id, score)`` pairs to a depth (or
``None`` when a ``where`` filter matches nothing), and ``make_hits``, which fetches the documents
of ranked ids and turns them into hits. What is the same for every store lives here: the checks,
how deep each leg searches, the fusion, and the empty answer for a filter that matches nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from corrective_rag.errors import ConfigError
from corrective_rag.store.checks import check_search
from corrective_rag.store.fusion import Fusion
from corrective_rag.types import Hit

__all__ = [
    "DEFAULT_ALPHA",
    "DEFAULT_CANDIDATES",
    "LEGS",
    "MakeHits",
    "RunLegs",
    "Runs",
    "fused_search",
    "leg_search",
]

# Each leg hands over its best 100: deep enough that a document one leg ranks ~50th can still be
# lifted by the other, cheap enough (one chroma query, one argpartition) for ~10 ms queries.
DEFAULT_CANDIDATES = 100
# Equal weights on both legs' normalised scores: no leg is trusted more a priori. Measured over
# cisi, cranfield, cacm and hotpotqa-500 (README), it beat RRF k=60 and alpha 0.3-0.7 on average.
DEFAULT_ALPHA = 0.5
# The legs by name, in the order they are fused.
LEGS = ("bm25", "dense")

Runs = dict[str, list[tuple[str, float]]]
# (query, depth, where, legs) -> each named leg's run, or None: the filter matches nothing.
RunLegs = Callable[[str, int, Mapping[str, Any] | None, Sequence[str]], Runs | None]
# (ranked (id, score) pairs, every leg's run) -> hits ranked 1..n.
MakeHits = Callable[
    [Sequence[tuple[str, float]], Mapping[str, Sequence[tuple[str, float]]]], list[Hit]
]


def fused_search(
    query: str,
    top_k: int,
    where: Mapping[str, Any] | None,
    *,
    candidates: int,
    fusion: Fusion,
    run_legs: RunLegs,
    make_hits: MakeHits,
) -> list[Hit]:
    """A store's ``retrieve``: both legs to ``max(candidates, top_k)``, fused, cut to ``top_k``."""
    check_search(query, top_k, where)
    runs = run_legs(query, max(candidates, top_k), where, LEGS)
    if runs is None:
        return []
    fused = fusion.fuse([runs[leg] for leg in LEGS])[:top_k]
    return make_hits(fused, runs)


def leg_search(
    query: str,
    leg: str,
    top_k: int,
    where: Mapping[str, Any] | None,
    *,
    run_legs: RunLegs,
    make_hits: MakeHits,
) -> list[Hit]:
    """A store's ``search``: one leg to ``top_k``, unfused, each hit scored by the leg itself."""
    if leg not in LEGS:
        raise ConfigError(f"leg must be one of {LEGS}, got {leg!r}")
    check_search(query, top_k, where)
    runs = run_legs(query, top_k, where, (leg,))
    if runs is None:
        return []
    return make_hits(runs[leg], runs)
