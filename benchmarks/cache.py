"""An embedder that keeps every vector in an ``.npz`` on disk, so benchmark reruns skip the model.

Vectors are keyed by the package's ``text_key`` (a hash of the text), so a document or sentence
is embedded once per machine however often the benchmarks run.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from corrective_rag.models.embeddings import SentenceTransformerEmbedder, text_key
from corrective_rag.text.lexical import split_sentences
from corrective_rag.types import Document

CACHE_DIR = Path(tempfile.gettempdir()) / "corrective_rag_bench"


def default_cache_path(embedder: SentenceTransformerEmbedder) -> Path:
    """The shared cache file of ``embedder``'s model under the temp folder."""
    return CACHE_DIR / f"texts-{embedder.name.replace('/', '_')}.npz"


class DiskCachedEmbedder:
    """An ``Embedder`` that answers known texts from a disk cache and embeds the rest at once.

    With ``path=None`` nothing is read or written. Setting ``caching = False`` sends every later
    text (queries, for timings that include embedding) through the model, uncached.
    """

    def __init__(self, inner: SentenceTransformerEmbedder, path: str | Path | None) -> None:
        self.inner = inner
        self.name = inner.name
        self.path = Path(path) if path else None
        self.vectors: dict[str, npt.NDArray[np.float32]] = {}
        self.texts_embedded = 0
        self.caching = True
        self.dirty = False
        if self.path is not None and self.path.exists():
            with np.load(self.path) as data:
                self.vectors = dict(zip(data["keys"].tolist(), data["vectors"], strict=True))

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Unit vectors of ``texts``, embedding only those never seen, in one batch."""
        if not self.caching:
            return self.inner.embed(texts)
        keys = [text_key(t) for t in texts]
        todo = {k: t for k, t in zip(keys, texts, strict=True) if k not in self.vectors}
        if todo:
            fresh = self.inner.embed(list(todo.values()))
            self.vectors.update(zip(todo, fresh, strict=True))
            self.texts_embedded += len(todo)
            self.dirty = True
        if not keys:
            return np.zeros((0, self.inner.dimension), dtype=np.float32)
        return np.vstack([self.vectors[k] for k in keys]).astype(np.float32, copy=False)

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
        if self.path is None or not self.dirty:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        keys = list(self.vectors)
        # one temporary name per process: two benchmarks saving at once must not collide
        tmp = Path(f"{self.path}.{os.getpid()}.tmp.npz")
        np.savez(tmp, keys=np.array(keys), vectors=np.vstack([self.vectors[k] for k in keys]))
        tmp.replace(self.path)
        self.dirty = False
