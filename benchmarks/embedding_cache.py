"""Corpus embeddings cached in a .npy under the temp folder, keyed by collection and model.

A collection is embedded once per machine, however often the benchmarks run.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from corrective_rag.models.embeddings import SentenceTransformerEmbedder
from corrective_rag.types import Document

CACHE_DIR = Path(tempfile.gettempdir()) / "corrective_rag_bench"


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
