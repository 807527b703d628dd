"""BM25 as sparse vectors, for engines that score sparse dot products with a server-side IDF.

A document's vector holds, for each of its terms, BM25's term-frequency part::

    tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avgdl))

and a query's vector holds each query term's count. An engine that multiplies each matching
term by its corpus idf (Qdrant's ``Modifier.IDF``: ``ln(1 + (N - n + 0.5) / (n + 0.5))``) then
returns BM25. Terms are the package's own tokens (:func:`corrective_rag.text.tokenize`), so both
backends see the same words; each is mapped to a 32-bit index by CRC-32, and the rare terms that
share an index add up (a collision merges two rare words, it never drops one).

Pure functions, no I/O.
"""

from __future__ import annotations

import math
import zlib
from collections import Counter
from collections.abc import Sequence

__all__ = ["K1", "B", "bm25_idf", "document_vector", "query_vector", "term_index"]

# rank_bm25's BM25Okapi defaults, so both backends weigh term frequency and length alike.
K1 = 1.5
B = 0.75


def term_index(term: str) -> int:
    """The sparse index of ``term``: CRC-32 of its UTF-8 bytes (stable across processes)."""
    return zlib.crc32(term.encode("utf-8"))


def _merge(weights: dict[int, float]) -> tuple[list[int], list[float]]:
    indices = sorted(weights)
    return indices, [weights[i] for i in indices]


def document_vector(
    tokens: Sequence[str], avgdl: float, *, k1: float = K1, b: float = B
) -> tuple[list[int], list[float]]:
    """``(indices, values)``: each term's BM25 term-frequency weight in a document of ``tokens``."""
    if avgdl <= 0:
        raise ValueError(f"avgdl must be positive, got {avgdl}")
    norm = k1 * (1 - b + b * len(tokens) / avgdl)
    weights: dict[int, float] = {}
    for term, tf in Counter(tokens).items():
        index = term_index(term)
        weights[index] = weights.get(index, 0.0) + tf * (k1 + 1) / (tf + norm)
    return _merge(weights)


def query_vector(tokens: Sequence[str]) -> tuple[list[int], list[float]]:
    """``(indices, values)``: each query term's count (a repeated term counts twice, as in BM25)."""
    weights: dict[int, float] = {}
    for term, count in Counter(tokens).items():
        index = term_index(term)
        weights[index] = weights.get(index, 0.0) + float(count)
    return _merge(weights)


def bm25_idf(documents: int, containing: int) -> float:
    """Qdrant's IDF modifier: ``ln(1 + (N - n + 0.5) / (n + 0.5))``, never negative."""
    return math.log(1 + (documents - containing + 0.5) / (containing + 0.5))
