"""The outline every hybrid store's ``retrieve`` and ``search`` follow, written once.

A store brings two things: ``run_legs``, each leg's best ``(id, score)`` pairs to a depth (or
``None`` when a ``where`` filter matches nothing), and ``fetch``, the stored documents among some
ids. What is the same for every store lives here: the checks, how deep each leg searches, the
fusion, the empty answer for a filter that matches nothing, and the hits, which keep every leg's
rank and score (:func:`~corrective_rag.store.hits.assemble_hits`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from corrective_rag.errors import ConfigError
from corrective_rag.logs import get_logger
from corrective_rag.store.checks import check_search
from corrective_rag.store.fusion import Fusion
from corrective_rag.store.hits import assemble_hits
from corrective_rag.types import Document, Hit

__all__ = [
    "DEFAULT_ALPHA",
    "DEFAULT_CANDIDATES",
    "LEGS",
    "Fetch",
    "RunLegs",
    "Runs",
    "fetched_hits",
    "fused_search",
    "leg_search",
]

log = get_logger(__name__)

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
# ids -> the stored documents among them, by id.
Fetch = Callable[[list[str]], Mapping[str, Document]]


def fused_search(
    query: str,
    top_k: int,
    where: Mapping[str, Any] | None,
    *,
    candidates: int,
    fusion: Fusion,
    run_legs: RunLegs,
    fetch: Fetch,
) -> list[Hit]:
    """A store's ``retrieve``: both legs to ``max(candidates, top_k)``, fused, cut to ``top_k``."""
    check_search(query, top_k, where)
    runs = run_legs(query, max(candidates, top_k), where, LEGS)
    if runs is None:
        return []
    fused = fusion.fuse([runs[leg] for leg in LEGS])[:top_k]
    return fetched_hits(fused, runs, fetch)


def leg_search(
    query: str,
    leg: str,
    top_k: int,
    where: Mapping[str, Any] | None,
    *,
    run_legs: RunLegs,
    fetch: Fetch,
) -> list[Hit]:
    """A store's ``search``: one leg to ``top_k``, unfused, each hit scored by the leg itself."""
    if leg not in LEGS:
        raise ConfigError(f"leg must be one of {LEGS}, got {leg!r}")
    check_search(query, top_k, where)
    runs = run_legs(query, top_k, where, (leg,))
    if runs is None:
        return []
    return fetched_hits(runs[leg], runs, fetch)


def fetched_hits(
    ranked: Sequence[tuple[str, float]],
    runs: Mapping[str, Sequence[tuple[str, float]]],
    fetch: Fetch,
) -> list[Hit]:
    """Hits for the ``ranked`` ids whose documents ``fetch`` still finds, ranked 1..n."""
    hits = assemble_hits(ranked, runs, fetch([doc_id for doc_id, _ in ranked]))
    if len(hits) < len(ranked):  # another client deleted them between the search and the fetch
        log.warning("hits_vanished", missing=len(ranked) - len(hits))
    return hits
