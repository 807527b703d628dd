"""An on-disk embedding cache for benchmarks, so reruns (fusion settings) skip the model."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from corrective_rag.models.embeddings import text_key
from corrective_rag.protocols import Embedder


class DiskCachedEmbedder:
    """Wraps an embedder; vectors are looked up by text hash in an ``.npz`` file first.

    Only texts embedded while ``caching`` is true are kept (documents); queries embedded after
    ``caching = False`` always go through the model, so query timings include embedding.
    """

    def __init__(self, inner: Embedder, path: str | None) -> None:
        self.inner = inner
        self.path = path
        self.vectors: dict[str, npt.NDArray[np.float32]] = {}
        self.texts_embedded = 0
        self.caching = True
        if path and os.path.exists(path):
            data = np.load(path)
            self.vectors = dict(zip(data["keys"].tolist(), data["vectors"], strict=True))

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if not self.caching:
            return self.inner.embed(texts)
        keys = [text_key(t) for t in texts]
        missing = list(
            {k: t for k, t in zip(keys, texts, strict=True) if k not in self.vectors}.items()
        )
        if missing:
            fresh = self.inner.embed([t for _, t in missing])
            self.texts_embedded += len(missing)
            for (key, _), vec in zip(missing, fresh, strict=True):
                self.vectors[key] = vec
        return np.vstack([self.vectors[k] for k in keys]).astype(np.float32, copy=False)

    def save(self) -> None:
        if not self.path or not self.vectors:
            return
        keys = np.array(list(self.vectors))
        tmp = f"{self.path}.tmp.npz"
        np.savez(tmp, keys=keys, vectors=np.vstack(list(self.vectors.values())))
        os.replace(tmp, self.path)
