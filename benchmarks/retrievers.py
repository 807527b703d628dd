"""What the benchmarks share: the retriever over a collection and an embedder cached on disk.

The retriever is the package's ``HybridStore``, in memory. ``DiskCachedEmbedder`` keeps every
text embedding in a .npz under the temp folder, so repeated benchmark runs never embed a document
or a sentence twice.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from benchmarks.beir_data import Collection
from benchmarks.embedding_cache import CACHE_DIR, cached_embeddings
from corrective_rag.models.embeddings import SentenceTransformerEmbedder, text_key
from corrective_rag.store.hybrid import HybridStore
from corrective_rag.text.lexical import split_sentences
from corrective_rag.types import Document


class DiskCachedEmbedder:
    """An ``Embedder`` that answers known texts from a disk cache and embeds the rest at once."""

    def __init__(self, embedder: SentenceTransformerEmbedder) -> None:
        self.inner = embedder
        self.name = embedder.name
        self.path = CACHE_DIR / f"texts-{embedder.name.replace('/', '_')}.npz"
        self.vectors: dict[str, np.ndarray] = {}
        self.dirty = False
        if self.path.exists():
            with np.load(self.path) as data:
                self.vectors = dict(zip(data["keys"].tolist(), data["vectors"], strict=True))

    def add(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        """Remember precomputed vectors of ``texts`` (for example a corpus embedded earlier)."""
        for text, vector in zip(texts, vectors, strict=True):
            self.vectors.setdefault(text_key(text), vector)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors of ``texts``, embedding only those never seen, in one batch."""
        keys = [text_key(t) for t in texts]
        todo = {k: t for k, t in zip(keys, texts, strict=True) if k not in self.vectors}
        if todo:
            fresh = self.inner.embed(list(todo.values()))
            self.vectors.update(zip(todo, fresh, strict=True))
            self.dirty = True
        if not keys:
            return np.zeros((0, 384), dtype=np.float32)
        return np.vstack([self.vectors[k] for k in keys]).astype(np.float32)

    def prefetch_sentences(self, documents: Sequence[Document], limit: int = 20) -> None:
        """Embed every sentence the local evaluator will split ``documents`` into, in one batch.

        One large call lets sentence-transformers sort texts by length, which is several times
        faster than many small per-query calls; the evaluator then finds them all cached.
        """
        sentences = [s for d in documents for s in split_sentences(d.text, limit=limit)]
        self.embed(list(dict.fromkeys(sentences)))
        self.save()

    def save(self) -> None:
        """Write the cache back if anything was added."""
        if not self.dirty:
            return
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        keys = list(self.vectors)
        # one temporary name per process: two benchmarks saving at once must not collide
        tmp = Path(f"{self.path}.{os.getpid()}.tmp.npz")
        np.savez(tmp, keys=np.array(keys), vectors=np.vstack([self.vectors[k] for k in keys]))
        tmp.replace(self.path)
        self.dirty = False


def build_retriever(collection: Collection, embedder: DiskCachedEmbedder) -> HybridStore:
    """An in-memory ``HybridStore`` over ``collection``, embedding from the disk cache."""
    embedder.add(
        [d.text for d in collection.documents],
        cached_embeddings(collection.name, collection.documents, embedder.inner),
    )
    embedder.prefetch_sentences(collection.documents)
    store = HybridStore.in_memory(embedder=embedder)
    store.add(collection.documents)
    return store
