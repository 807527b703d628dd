"""Turn fused ``(id, score)`` pairs into :class:`Hit` values that keep each leg's rank and score.

Pure: the caller fetches the documents; ids it could not fetch (deleted by another client
between the search and the fetch) are dropped and the ranks closed up.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from corrective_rag.types import Document, Hit, LegScore

__all__ = ["assemble_hits"]


def assemble_hits(
    ranked: Sequence[tuple[str, float]],
    runs: Mapping[str, Sequence[tuple[str, float]]],
    documents: Mapping[str, Document],
) -> list[Hit]:
    """Hits for ``ranked`` ids found in ``documents``, ranked 1..n, with every leg's placing."""
    legs: dict[str, list[LegScore]] = {}
    for name, run in runs.items():
        for rank, (doc_id, score) in enumerate(run, start=1):
            legs.setdefault(doc_id, []).append(LegScore(name, rank, score))
    found = [(doc_id, score) for doc_id, score in ranked if doc_id in documents]
    return [
        Hit(documents[doc_id], score, rank, tuple(legs.get(doc_id, ())))
        for rank, (doc_id, score) in enumerate(found, start=1)
    ]
