"""An embedder that keeps every vector in an ``.npz`` on disk, so benchmark reruns skip the model.

Vectors are keyed by the package's ``text_key`` (a hash of the text), so a document or sentence
is embedded once per machine however often the benchmarks run. ``embed_spans`` results (a
document's vector and its sentences' pooled vectors, what the local judge asks for) are kept
the same way, per document text, spans and precision.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from corrective_rag.evaluate.local import judged_sentence_spans
from corrective_rag.models.embeddings import SentenceTransformerEmbedder, text_key
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

    def embed_spans(
        self, texts: Sequence[str], spans: Sequence[Sequence[tuple[int, int]]]
    ) -> tuple[npt.NDArray[np.float32], list[npt.NDArray[np.float32]]]:
        """The inner embedder's ``embed_spans``, answering documents seen before from the cache."""
        if not self.caching:
            return self.inner.embed_spans(texts, spans)
        precision = self.inner.span_precision
        keys = [
            f"spans:{precision}:{text_key(t)}:{text_key(repr([tuple(x) for x in s]))}"
            for t, s in zip(texts, spans, strict=True)
        ]
        todo = {
            k: (t, s)
            for k, t, s in zip(keys, texts, spans, strict=True)
            if f"{k}:text" not in self.vectors
        }
        if todo:
            vectors, pooled = self.inner.embed_spans(
                [t for t, _ in todo.values()], [s for _, s in todo.values()]
            )
            for key, vector, rows in zip(todo, vectors, pooled, strict=True):
                self.vectors[f"{key}:text"] = vector
                self.vectors.update((f"{key}:{i}", row) for i, row in enumerate(rows))
            self.texts_embedded += len(todo)
            self.dirty = True
        if not keys:
            return np.zeros((0, self.inner.dimension), dtype=np.float32), []
        return (
            np.vstack([self.vectors[f"{k}:text"] for k in keys]),
            [
                np.vstack([self.vectors[f"{k}:{i}"] for i in range(len(s))])
                if len(s)
                else np.zeros((0, self.inner.dimension), dtype=np.float32)
                for k, s in zip(keys, spans, strict=True)
            ],
        )

    def prefetch_sentences(self, documents: Sequence[Document], limit: int = 20) -> None:
        """Compute what the local evaluator will ask of ``documents``, and save it.

        That is each document's vector and its sentences' pooled vectors (``embed_spans``, one
        forward pass per document), for the sentences the judge compares.
        """
        self.embed_spans(
            [d.text for d in documents], [judged_sentence_spans(d.text, limit) for d in documents]
        )
        self.save()

    def save(self) -> None:
        """Write the cache back if anything was added, merged with what is on disk now.

        Benchmarks run side by side share one file: each saves under an exclusive lock, after
        reading back what the others saved since it loaded, so no process drops another's
        vectors (the last writer used to win).
        """
        if self.path is None or not self.dirty:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(f"{self.path}.lock", "a", encoding="utf-8") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            if self.path.exists():
                with np.load(self.path) as data:
                    for key, vector in zip(data["keys"].tolist(), data["vectors"], strict=True):
                        self.vectors.setdefault(key, vector)
            keys = list(self.vectors)
            # one temporary name per process: two benchmarks saving at once must not collide
            tmp = Path(f"{self.path}.{os.getpid()}.tmp.npz")
            vectors = np.vstack([self.vectors[k] for k in keys])
            np.savez(tmp, keys=np.array(keys), vectors=vectors)
            tmp.replace(self.path)
        self.dirty = False
