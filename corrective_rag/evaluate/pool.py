"""Completing the features of a question's judged documents among one another (pure).

The local evaluator's direct features depend on one document and the question; the gaps, the
relative BM25 and the title links depend on the other documents judged for the question.
:func:`pool_features` adds them; the calibration benchmark fits the weights through it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from corrective_rag.errors import InputError
from corrective_rag.evaluate.links import link_features
from corrective_rag.evaluate.local_features import LocalFeatures, LocalWeights
from corrective_rag.text.lexical import bm25_scores, title_phrase
from corrective_rag.types import Document

__all__ = ["pool_features"]

# The gaps are taken from the best document judged for the question, not from the mean of all:
# the mean of all falls as more are judged, so the same document was kept among 15 weak ones and
# dropped among the loop's first 5. The best one hardly moves once the first call is judged, so
# the loop's first batch of 5 is judged as strictly as the same 5 among 15 (the mean of the best
# three kept 31 more false positives in the loop's first batch on HotpotQA-500).
_GAP_REFERENCE = 1


def pool_features(
    weights: LocalWeights,
    question_weights: dict[str, float],
    documents: Sequence[Document],
    direct: Sequence[LocalFeatures],
    *,
    link_titles: bool | None = None,
) -> list[LocalFeatures]:
    """Complete the direct features of the documents judged for a question, among one another.

    A pure function (the calibration benchmark fits the weights through it): the gaps compare
    each document with the best of them, ``bm25`` with their best BM25; the links look for
    namers among them, weighed by their direct scores under ``weights``. With ``link_titles``
    ``None`` the links are looked for only when some document has a title.
    """
    if len(documents) != len(direct):
        raise InputError("documents and direct features must have the same length")
    if not direct:
        return []
    gapped = _relative_bm25(question_weights, _gaps(list(direct)))
    titled = any(title_phrase(d.metadata.get("title")) for d in documents)
    if link_titles is False or (link_titles is None and not titled):
        return gapped
    scores = [weights.score(f) for f in gapped]
    return link_features(question_weights, documents, gapped, scores, [])


def _relative_bm25(
    question_weights: dict[str, float], features: list[LocalFeatures]
) -> list[LocalFeatures]:
    """Each document's BM25 over the best among ``features`` (0.0 when none holds a term)."""
    scores = bm25_scores(
        question_weights, [dict(f.counts) for f in features], [f.length for f in features]
    )
    best = max(scores, default=0.0)
    return [
        replace(f, bm25=score / best if best > 0 else 0.0)
        for f, score in zip(features, scores, strict=True)
    ]


def _gaps(features: list[LocalFeatures]) -> list[LocalFeatures]:
    """Each document's features less the mean of the best ``_GAP_REFERENCE`` values among them.

    How a document compares with the others judged for the same question is evidence that
    travels across collections better than the raw cosines, whose scale depends on the
    question's wording and the collection's style.
    """
    values = np.array([f.vector()[:3] for f in features], dtype=np.float64)
    reference = np.sort(values, axis=0)[-_GAP_REFERENCE:].mean(axis=0)
    return [
        replace(
            f,
            dense_gap=f.dense - float(reference[0]),
            sentence_gap=f.sentence - float(reference[1]),
            coverage_gap=f.coverage - float(reference[2]),
        )
        for f in features
    ]
