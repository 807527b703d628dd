"""The retriever the loop benchmarks share: the package's ``HybridStore`` over a collection."""

from __future__ import annotations

from benchmarks.beir import Collection
from benchmarks.cache import DiskCachedEmbedder
from corrective_rag.store.hybrid import HybridStore


def build_retriever(collection: Collection, embedder: DiskCachedEmbedder) -> HybridStore:
    """An in-memory ``HybridStore`` over ``collection``, embedding from the disk cache."""
    embedder.embed([d.text for d in collection.documents])
    embedder.prefetch_sentences(collection.documents)
    store = HybridStore.in_memory(embedder=embedder)
    store.add(collection.documents)
    return store
