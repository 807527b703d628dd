"""The retriever benchmarks use: the package's HybridStore when present, else the baseline."""

from __future__ import annotations

from typing import Any

from benchmarks.baseline_retriever import BaselineRetriever
from benchmarks.beir_data import Collection
from corrective_rag.store.embeddings import SentenceTransformerEmbedder


def build_retriever(collection: Collection, embedder: SentenceTransformerEmbedder) -> Any:
    """A retriever with ``retrieve(query, top_k=)`` and ``idf(term)`` over ``collection``."""
    return BaselineRetriever(collection.name, collection.documents, embedder)
