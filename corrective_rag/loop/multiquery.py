"""Search several queries at once and fuse their rankings (reciprocal rank fusion).

The loop searches the user's original question in every iteration, and from the second on also
the current rewrite; fusing the two keeps the question's best hits in play while the rewrite
brings new ones.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from corrective_rag.observe.spans import lane
from corrective_rag.protocols import ManyRetriever, Retriever
from corrective_rag.store.fusion import reciprocal_rank_fusion
from corrective_rag.store.hybrid import HybridStore
from corrective_rag.types import Document, Hit, LegScore

__all__ = ["FEEDBACK_LEG", "QUERY_LEGS", "search_queries"]

QUERY_LEGS = ("question", "rewrite")  # leg names recorded on fused hits, in query order
FEEDBACK_LEG = "feedback"  # the free feedback query from the kept documents (Rewrite.feedback)


def search_queries(
    retriever: Retriever,
    queries: Sequence[str],
    *,
    top_k: int,
    where: Mapping[str, Any] | None = None,
    names: Sequence[str] | None = None,
) -> list[Hit]:
    """Search each query for ``top_k`` hits and fuse the lists, best first.

    With one query its hits come back unchanged. With more, each fused hit carries the RRF
    score, its fused rank, and one :class:`LegScore` per query that found it, named by
    ``names`` (default ``question``, ``rewrite``, ``query3``, ...), with the retriever's own
    rank and score for that query.
    """
    if names is None:
        names = [*QUERY_LEGS, *(f"query{i}" for i in range(len(QUERY_LEGS) + 1, len(queries) + 1))]
    lists = _search_each(retriever, queries, names, top_k, where)
    if len(lists) == 1:
        return list(lists[0])
    docs: dict[str, Document] = {}
    legs: dict[str, list[LegScore]] = {}
    for name, hits in zip(names, lists, strict=False):
        for hit in hits:
            docs.setdefault(hit.document.id, hit.document)
            legs.setdefault(hit.document.id, []).append(LegScore(name, hit.rank, hit.score))
    fused = reciprocal_rank_fusion([[h.document.id for h in hits] for hits in lists])
    return [
        Hit(docs[doc_id], score, rank, tuple(legs[doc_id]))
        for rank, (doc_id, score) in enumerate(fused, start=1)
    ]


def _search_each(
    retriever: Retriever,
    queries: Sequence[str],
    names: Sequence[str],
    top_k: int,
    where: Mapping[str, Any] | None,
) -> list[list[Hit]]:
    """Each query's hits; a ``retrieve_many`` (the hybrid store's) embeds the queries at once.

    ``names`` are the queries' lanes, for a traced search
    (:func:`corrective_rag.observe.spans.lane`).
    """
    if len(queries) > 1 and isinstance(retriever, HybridStore):  # lanes named on its spans
        many = retriever.retrieve_many(queries, top_k=top_k, where=where, lanes=names)
        return [list(hits) for hits in many]
    if len(queries) > 1 and isinstance(retriever, ManyRetriever):  # the protocol's keywords only
        return [list(hits) for hits in retriever.retrieve_many(queries, top_k=top_k, where=where)]
    lists = []
    for i, q in enumerate(queries):
        with lane(names[i] if i < len(names) else f"query{i + 1}"):
            lists.append(list(retriever.retrieve(q, top_k=top_k, where=where)))
    return lists
