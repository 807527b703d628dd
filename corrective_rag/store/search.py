"""The outline every hybrid store's ``retrieve`` and ``search`` follow, written once.

A store brings two things: ``run_legs``, each leg's best ``(id, score)`` pairs to a depth (or
``None`` when a ``where`` filter matches nothing), and ``fetch``, the stored documents among some
ids. What is the same for every store lives here: the checks, how deep each leg searches, the
fusion, the empty answer for a filter that matches nothing, and the hits, which keep every leg's
rank and score (:func:`~corrective_rag.store.hits.assemble_hits`).
"""

from __future__ import annotations

import threading
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
    "SearchMemo",
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
    memo: SearchMemo | None = None,
) -> list[Hit]:
    """A store's ``retrieve``: both legs to ``max(candidates, top_k)``, fused, cut to ``top_k``.

    With a ``memo``, a search the store answered before since its last write takes the legs'
    runs and the hits' documents from it.
    """
    check_search(query, top_k, where)
    if memo is not None:
        run_legs, fetch = memo.remembering(run_legs), memo.fetching(fetch)
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


class SearchMemo:
    """The legs' runs of a store's recent searches and its recently fetched documents.

    The loop searches the question again at each iteration for more hits (``top_k`` 4, then 8,
    then 12 by default); each leg is searched ``max(candidates, top_k)`` deep, 100 each time, so
    the runs are the same and only the cut differs. A memo answers such a search without the
    BM25 scoring, the dense index's query and the documents' fetch.

    It holds only while the store is its backend's one writer: the store calls :meth:`forget`
    after each of its writes, and a search that overlapped a write keeps nothing it read. A
    search with a ``where`` filter is not remembered. The query's embedding is not part of the
    key: a store embeds a query text the same way each time.

    Args:
        searches: how many searches' runs are kept (the oldest is forgotten first).
        documents: how many fetched documents are kept.
    """

    def __init__(self, *, searches: int = 256, documents: int = 4096) -> None:
        self._runs: dict[tuple[str, int, tuple[str, ...]], Runs] = {}
        self._documents: dict[str, Document] = {}
        self._sizes = (searches, documents)
        self._generation = 0  # one more at each write: what was read before it is not kept
        self._lock = threading.Lock()

    def forget(self) -> None:
        """Drop everything: the store has been written to."""
        with self._lock:
            self._generation += 1
            self._runs.clear()
            self._documents.clear()

    def remembering(self, run_legs: RunLegs) -> RunLegs:
        """``run_legs`` answering the searches it answered before from the memo."""

        def remembered(
            query: str, depth: int, where: Mapping[str, Any] | None, legs: Sequence[str]
        ) -> Runs | None:
            if where is not None:
                return run_legs(query, depth, where, legs)
            key = (query, depth, tuple(legs))
            with self._lock:
                known, generation = self._runs.get(key), self._generation
            if known is not None:
                return known
            runs = run_legs(query, depth, where, legs)
            if runs is not None:
                self._keep(self._runs, {key: runs}, generation, self._sizes[0])
            return runs

        return remembered

    def fetching(self, fetch: Fetch) -> Fetch:
        """``fetch`` answering the documents it fetched before from the memo."""

        def fetched(ids: list[str]) -> Mapping[str, Document]:
            with self._lock:
                known = {i: self._documents[i] for i in ids if i in self._documents}
                generation = self._generation
            missing = [i for i in ids if i not in known]
            if not missing:
                return known
            found = fetch(missing)
            self._keep(self._documents, found, generation, self._sizes[1])
            return {**known, **found}

        return fetched

    def _keep(
        self, into: dict[Any, Any], new: Mapping[Any, Any], generation: int, size: int
    ) -> None:
        """Remember ``new`` in ``into`` unless a write came since ``generation`` (oldest out)."""
        with self._lock:
            if generation != self._generation:
                return
            into.update(new)
            while len(into) > size:
                del into[next(iter(into))]
