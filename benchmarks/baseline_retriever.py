"""A stand-in hybrid retriever for benchmarks: rank_bm25 + dense cosine, fused with RRF.

Corpus embeddings are cached in a .npy under the temp folder, keyed by collection and model, so a
collection is embedded once per machine. ``corrective_rag.store.hybrid.HybridStore`` replaces this
once it is available; this class keeps the same ``retrieve`` / ``idf`` surface.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rank_bm25 import BM25Okapi

from corrective_rag.store.embeddings import SentenceTransformerEmbedder
from corrective_rag.store.fusion import reciprocal_rank_fusion
from corrective_rag.text import tokenize
from corrective_rag.types import Document, Hit, LegScore

CACHE_DIR = Path(tempfile.gettempdir()) / "corrective_rag_bench"
POOL = 100  # candidates per leg before fusion


def cached_embeddings(
    name: str, documents: Sequence[Document], embedder: SentenceTransformerEmbedder
) -> np.ndarray:
    """Embeddings of ``documents`` from the cache, computing and saving them on a miss."""
    digest = hashlib.blake2b(
        "\x00".join(d.id + "\x01" + d.text for d in documents).encode(), digest_size=8
    ).hexdigest()
    model = embedder.name.replace("/", "_")
    path = CACHE_DIR / f"{name}-{model}-{digest}.npy"
    if path.exists():
        return np.load(path)
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    vectors = embedder.embed([d.text for d in documents])
    np.save(path, vectors)
    return vectors


class BaselineRetriever:
    """BM25 (rank_bm25) and dense cosine over precomputed vectors, fused with RRF k=60."""

    def __init__(
        self, name: str, documents: Sequence[Document], embedder: SentenceTransformerEmbedder
    ) -> None:
        self.documents = list(documents)
        self.embedder: Any = embedder
        self.vectors = cached_embeddings(name, self.documents, embedder)
        self.bm25 = BM25Okapi([tokenize(d.text) or [""] for d in self.documents])

    def idf(self, term: str) -> float:
        """BM25 idf of one token; unseen tokens get the largest idf in the collection."""
        idf: dict[str, float] = self.bm25.idf
        return float(idf.get(term, max(idf.values())))

    def retrieve(
        self, query: str, *, top_k: int = 10, where: Mapping[str, Any] | None = None
    ) -> list[Hit]:
        """Top ``top_k`` hits for ``query`` (``where`` is not supported here)."""
        bm25 = self.bm25.get_scores(tokenize(query))
        dense = self.vectors @ self.embedder.embed([query])[0]
        legs = {}
        rankings = []
        for leg, scores in (("bm25", bm25), ("dense", dense)):
            order = np.argsort(-scores, kind="stable")[:POOL]
            rankings.append([self.documents[i].id for i in order])
            for rank, i in enumerate(order, start=1):
                legs.setdefault(self.documents[i].id, []).append(
                    LegScore(leg, rank, float(scores[i]))
                )
        by_id = {d.id: d for d in self.documents}
        fused = reciprocal_rank_fusion(rankings)[:top_k]
        return [
            Hit(by_id[doc_id], score, rank, tuple(legs[doc_id]))
            for rank, (doc_id, score) in enumerate(fused, start=1)
        ]
