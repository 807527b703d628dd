"""The outline every hybrid store's ``retrieve`` and ``search`` follow, written once.

A store brings two things: ``run_legs``, for each of some queries each leg's best ``(id, score)``
pairs to a depth (or ``None`` when a ``where`` filter matches nothing), and ``fetch``, the stored
documents among some ids; a search of several queries (the loop's lanes) calls each once. What
is the same for every store lives here: the checks, how deep each leg searches, the fusion, the
empty answer for a filter that matches nothing, and the hits, which keep every leg's rank and
score (:func:`~corrective_rag.store.hits.assemble_hits`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from corrective_rag.errors import ConfigError
from corrective_rag.observe.logs import get_logger
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
    "found_hits",
    "fused_search_many",
    "hit_documents",
    "leg_search",
]

log: Any = get_logger(__name__)

# Each leg hands over its best 100: deep enough that a document one leg ranks ~50th can still be
# lifted by the other, cheap enough (one chroma query, one argpartition) for ~10 ms queries.
DEFAULT_CANDIDATES = 100
# Equal weights on both legs' normalised scores: no leg is trusted more a priori. Measured over
# cisi, cranfield, cacm and hotpotqa-500 (README), it beat RRF k=60 and alpha 0.3-0.7 on average.
DEFAULT_ALPHA = 0.5
# The legs by name, in the order they are fused.
LEGS = ("bm25", "dense")

Runs = dict[str, list[tuple[str, float]]]
# (queries, depth, where, legs) -> per query, each named leg's run, or None: the filter matches
# nothing. One call for all the queries, so that an engine is asked once for all of them.
RunLegs = Callable[
    [Sequence[str], int, Mapping[str, Any] | None, Sequence[str]], Sequence[Runs | None]
]
# ids -> the stored documents among them, by id.
Fetch = Callable[[list[str]], Mapping[str, Document]]


def fused_search_many(
    queries: Sequence[str],
    top_k: int,
    where: Mapping[str, Any] | None,
    *,
    candidates: int,
    fusion: Fusion,
    run_legs: RunLegs,
    fetch: Fetch,
    memo: SearchMemo | None = None,
) -> list[list[Hit]]:
    """A store's ``retrieve`` of each query: both legs to ``max(candidates, top_k)``, fused, cut.

    The same hits, in the same order, as a search per query, for fewer calls to the engine:
    the legs of all distinct queries are run by one ``run_legs`` call, and the documents of all
    their hits fetched by one ``fetch``. With a ``memo``, a search the store answered before
    since its last write takes the legs' runs and the hits' documents from it.
    """
    for query in queries:
        check_search(query, top_k, where)
    if not queries:
        return []
    if memo is not None:
        memo.check()
        run_legs, fetch = memo.remembering(run_legs), memo.fetching(fetch)
    distinct = list(dict.fromkeys(queries))
    found = run_legs(distinct, max(candidates, top_k), where, LEGS)
    runs = {q: r for q, r in zip(distinct, found, strict=True) if r is not None}
    fused = {q: fusion.fuse([r[leg] for leg in LEGS])[:top_k] for q, r in runs.items()}
    documents = hit_documents(fused.values(), fetch)
    return [found_hits(fused[q], runs[q], documents) if q in runs else [] for q in queries]


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
    [runs] = run_legs([query], top_k, where, (leg,))
    if runs is None:
        return []
    return found_hits(runs[leg], runs, hit_documents([runs[leg]], fetch))


def hit_documents(
    ranked: Iterable[Sequence[tuple[str, float]]], fetch: Fetch
) -> Mapping[str, Document]:
    """The documents of every id in the ``ranked`` lists, in one ``fetch`` (none for no ids)."""
    ids = list(dict.fromkeys(doc_id for run in ranked for doc_id, _ in run))
    return fetch(ids) if ids else {}


def found_hits(
    ranked: Sequence[tuple[str, float]],
    runs: Mapping[str, Sequence[tuple[str, float]]],
    documents: Mapping[str, Document],
) -> list[Hit]:
    """Hits for the ``ranked`` ids whose ``documents`` were still found, ranked 1..n."""
    hits = assemble_hits(ranked, runs, documents)
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
    write from outside the store (chromadb's own client on the store's collection) is seen by
    ``version``, asked at each search (:meth:`check`): a change forgets everything. A search
    with a ``where`` filter is not remembered. The query's embedding is not part of the key: a
    store embeds a query text the same way each time.

    Args:
        searches: how many searches' runs are kept (the oldest is forgotten first).
        documents: how many fetched documents are kept.
        version: a cheap reading of the backend that changes when it is written to (the
            store passes its backend's ``version``, else ``count``); ``None``: only the store's
            own writes count.
    """

    def __init__(
        self,
        *,
        searches: int = 256,
        documents: int = 4096,
        version: Callable[[], object] | None = None,
    ) -> None:
        self._runs: dict[tuple[str, int, tuple[str, ...]], Runs] = {}
        self._documents: dict[str, Document] = {}
        self._sizes = (searches, documents)
        self._generation = 0  # one more at each write: what was read before it is not kept
        self._version = version
        self._seen: object = None  # the version the memo's contents were read at
        self._lock = threading.Lock()

    def check(self) -> None:
        """Forget everything if the backend's version moved since the memo last read it."""
        if self._version is None:
            return
        now = self._version()
        with self._lock:
            seen, self._seen = self._seen, now
        if seen is not None and seen != now:
            self.forget()
            with self._lock:
                self._seen = now

    def forget(self) -> None:
        """Drop everything: the store has been written to."""
        with self._lock:
            self._generation += 1
            self._runs.clear()
            self._documents.clear()

    def remembering(self, run_legs: RunLegs) -> RunLegs:
        """``run_legs`` answering the searches it answered before from the memo.

        The queries not remembered go to ``run_legs`` together, in one call.
        """

        def remembered(
            queries: Sequence[str], depth: int, where: Mapping[str, Any] | None, legs: Sequence[str]
        ) -> Sequence[Runs | None]:
            if where is not None:
                return run_legs(queries, depth, where, legs)
            keys = [(query, depth, tuple(legs)) for query in queries]
            with self._lock:
                known = {k: self._runs[k] for k in keys if k in self._runs}
                generation = self._generation
            todo = [k for k in dict.fromkeys(keys) if k not in known]
            if todo:
                found = run_legs([k[0] for k in todo], depth, where, legs)
                new = {k: runs for k, runs in zip(todo, found, strict=True) if runs is not None}
                self._keep(self._runs, new, generation, self._sizes[0])
                known.update(new)
            return [known.get(k) for k in keys]

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
