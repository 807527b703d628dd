"""The default embedder: the shipped all-MiniLM-L6-v2 run by ONNX Runtime (float32, or int8).

The model is exported from its own folder on first use (see
:mod:`~corrective_rag.models.onnx_export`) and the file is reused from then on. Texts are
tokenized by the model's own tokenizer (``tokenizer.json``, the fast tokenizer's definition),
sorted by length so that a batch pads little, and pooled exactly as sentence-transformers pools
this model: the mean of the token vectors under the attention mask, L2-normalised. The offline
judge's span vectors (:meth:`OnnxEmbedder.embed_spans`) are pooled from the same session's token
vectors, so a process that only reads a store and judges never imports torch.

Measured against torch on a loaded 2-core machine (see ``docs/embeddings.md``): float32 gives
torch's vectors in about 0.6 of its time at one thread; int8 takes about 0.3 and keeps a cosine
of about 0.995, but moved CISI's hybrid nDCG@10 by 0.0084, so it is not the default.
"""

from __future__ import annotations

import copy
import functools
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from corrective_rag.errors import ConfigError, InputError
from corrective_rag.models.embeddings import (
    SentenceTransformerEmbedder,
    Spans,
    _mean_pooled,
    pool_token_spans,
)
from corrective_rag.models.onnx_export import (
    MIN_COSINE,
    ONNX_PRECISIONS,
    REFERENCE_TEXTS,
    check_file,
    default_cache_dir,
    export_key,
    export_onnx,
    read_record,
    reference_vectors,
    shipped_reference,
    unwritable,
)
from corrective_rag.models.source import DEFAULT_MODEL, model_config, model_source
from corrective_rag.models.tokenizer import load_tokenizer
from corrective_rag.observe.logs import get_logger

if TYPE_CHECKING:
    import onnxruntime

# default_embedder, OnnxEmbedder: their home is corrective_rag.models
__all__: list[str] = []

PARALLEL_FROM = 8  # texts in one call from which they are shared out to single-threaded sessions
MOST_SESSIONS = 4  # sessions (each a copy of the weights in memory) for such calls, at most

Vector = npt.NDArray[np.float32]

log: Any = get_logger(__name__)


def default_embedder(model: str | None = None) -> SentenceTransformerEmbedder:
    """The embedder for ``model``: ONNX Runtime for the shipped default, torch for any other.

    Args:
        model: a sentence-transformers model name or folder; ``None`` is the offline default.
    """
    if model is None or model == DEFAULT_MODEL:
        return OnnxEmbedder()
    return SentenceTransformerEmbedder(model)


class OnnxEmbedder(SentenceTransformerEmbedder):
    """A sentence-transformers model whose :meth:`embed` runs in ONNX Runtime.

    It embeds like :class:`~corrective_rag.models.embeddings.SentenceTransformerEmbedder`
    (the same cache by text, the same batching of concurrent callers), loads lazily, and the
    first use exports the model to ``cache_dir`` (seconds; torch is needed only then).
    :meth:`embed_spans` pools the session's token vectors as the torch embedder pools torch's
    (each text alone, in windows of the model's length): the same vectors to within 1e-5, with
    no torch to import (about 5 s before a first question) and no OpenMP threads, which on a
    busy machine made torch's passes up to ten times slower. Only models that mean-pool a
    transformer's tokens can be exported; name other models to the torch embedder.

    Args:
        model: a model name or folder; ``None`` is the shipped all-MiniLM-L6-v2.
        precision: ``"float32"`` (the default: torch's vectors to within 2e-5, about 0.6 of
            torch's time at one thread) or ``"int8"`` (weights quantised per channel: about
            0.3 of torch's time, a cosine of ~0.995 with torch's, but CISI's hybrid nDCG@10
            0.0084 below torch's, outside the 0.005 the default must keep).
        cache_dir: where exported models are kept; by default
            :func:`~corrective_rag.models.onnx_export.default_cache_dir`
            (``$CORRECTIVE_RAG_CACHE/onnx``, ``$XDG_CACHE_HOME/corrective_rag/onnx`` or
            ``~/.cache/corrective_rag/onnx``). A cached export is used only when it matches
            the record written beside it at export and its vectors of three reference texts
            match the source model's, taken from outside the cache: shipped with the package
            for the default model, computed with torch at load for any other (so loading
            another model's export imports torch); otherwise it is exported again (a warning
            says why).
            Where nothing can be written and no verified export is cached, the embedder
            embeds with torch (the same model; a warning says so; see
            :attr:`torch_fallback`).
        threads: ONNX Runtime's threads per forward pass; ``None`` lets it choose (its
            threads do not spin while waiting, so they cost little on a busy machine) and
            shares a call of :data:`PARALLEL_FROM` or more texts (indexing) out to one
            single-threaded session per core, up to :data:`MOST_SESSIONS`: one text per pass
            is too small to keep two threads busy, so on 2 cores the demo's texts embed in
            about 0.7-0.8 of the time, with the same vectors (a text's pass is the same
            whichever session runs it).
        batch_size: texts per forward pass, taken in order of length. One by default: the
            exported graph runs a text alone about 6 times faster than in padded batches of 32
            (80 HotpotQA paragraphs, int8: 2.5 s against 17.8-20.2 s), and int8 quantises each
            pass's activations by their range, so that only alone is a text's vector
            independent of its neighbours (in batches of 32 it moves by a cosine of ~0.005).
        cache_size: as for the torch embedder.
        span_precision: ``"auto"`` and ``"float32"`` pool spans in ONNX Runtime (float32);
            ``"bfloat16"`` pools them in torch under bfloat16 autocast, as the torch embedder
            does (for a CPU that multiplies bfloat16 natively; it imports torch).
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        precision: str = "float32",
        cache_dir: str | Path | None = None,
        threads: int | None = None,
        batch_size: int = 1,
        cache_size: int = 200_000,
        span_precision: str = "auto",
    ) -> None:
        super().__init__(
            model, batch_size=batch_size, cache_size=cache_size, span_precision=span_precision
        )
        if precision not in ONNX_PRECISIONS:
            raise ConfigError(f"precision must be one of {ONNX_PRECISIONS}, got {precision!r}")
        if threads is not None and (not isinstance(threads, int) or threads <= 0):
            raise ConfigError(f"threads must be a positive int or None, got {threads!r}")
        self.precision = precision
        self.cache_dir: Path = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.threads = threads
        self.exports: int = 0  # how many times this embedder exported its model (0 once cached)
        # why it embeds with torch instead (set on first use when no export can be written)
        self.torch_fallback: str | None = None
        self._opened = False
        self._runtime: _Runtime | None = None
        self._runtime_lock = threading.Lock()
        self._sessions: list[_Runtime] | None = None  # the single-threaded ones, made lazily
        self._reference: Vector | None = None  # the source model's vectors of REFERENCE_TEXTS

    @property
    def dimension(self) -> int:
        """Length of each embedding vector (from the model's config: loads no weights)."""
        runtime = self._load_runtime()
        return super().dimension if runtime is None else runtime.dimension

    def onnx_path(self) -> Path:
        """Where this model's export is cached (it may not exist yet)."""
        return self.cache_dir / export_key(self.name, model_source(self.name), self.precision)

    def _load_runtime(self) -> _Runtime | None:
        """The ONNX Runtime session, or None when this embedder fell back to torch."""
        with self._runtime_lock:
            if not self._opened:
                self._runtime = self._open()
                self._opened = True
            return self._runtime

    def _open(self) -> _Runtime | None:
        folder = model_source(self.name)
        if not Path(folder).is_dir():
            raise ConfigError(f"ONNX export needs a local model folder, got {self.name!r}")
        path = self.onnx_path()
        if path.is_file():
            runtime, problem = _verified(folder, path, self.threads, self.precision, self._want)
            if runtime is not None:
                return runtime
            # a torn, foreign or altered file under our name: export it again over it
            log.warning("onnx_export_rejected", path=str(path), reason=problem)
        denied = unwritable(self.cache_dir)
        if denied is not None:
            self.torch_fallback = f"cannot write the ONNX export to {self.cache_dir}: {denied}"
            log.warning(
                "onnx_export_unwritable_embedding_with_torch",
                cache_dir=str(self.cache_dir),
                reason=denied,
                hint="set CORRECTIVE_RAG_CACHE or XDG_CACHE_HOME to a writable folder",
            )
            return None
        model = self._load()
        if not _mean_pooled(model):
            raise ConfigError(f"{self.name!r} does not mean-pool its tokens: embed it with torch")
        # Trace a copy: tracing the shared model before its first forward pass changes how it
        # computes afterwards (embed_spans, which stays on torch, moved by up to 0.05), so the
        # first run after an export judged differently from every later one.
        export_onnx(copy.deepcopy(model), path, self.precision)
        self.exports += 1
        runtime, problem = _verified(folder, path, self.threads, self.precision, self._want)
        if runtime is None:
            raise ConfigError(f"the exported model {path} is not usable: {problem}")
        return runtime

    def _want(self) -> Vector:
        """The source model's unit vectors of the reference texts, from outside the cache."""
        if self._reference is None:
            shipped = shipped_reference(model_source(self.name))
            if shipped is None:  # another model: its own weights, through torch
                shipped = reference_vectors(self._load())
            self._reference = np.asarray(shipped, dtype=np.float32)
        return self._reference

    @property
    def span_precision(self) -> str:
        """The arithmetic of :meth:`embed_spans`: ``"float32"`` (ONNX Runtime) or ``"bfloat16"``.

        ``"bfloat16"`` (torch) only when asked for; resolving it imports nothing.
        """
        return self._span_precision or "float32"

    def _encode_spans(self, items: list[tuple[str, Spans]]) -> list[tuple[Vector, Vector]]:
        if self.span_precision == "bfloat16":
            return super()._encode_spans(items)
        runtime = self._load_runtime()
        if runtime is None:
            return super()._encode_spans(items)
        with self._model_lock:
            return [runtime.pool_spans(text, spans) for text, spans in items]

    def _encode(self, texts: list[str]) -> list[Vector]:
        runtime = self._load_runtime()
        if runtime is None:
            return super()._encode(texts)
        sessions = self._parallel_sessions(len(texts))
        with self._model_lock:
            if sessions:
                return list(_encode_shared(sessions, texts, self.batch_size))
            return list(runtime.encode(texts, self.batch_size))

    def _parallel_sessions(self, texts: int) -> list[_Runtime]:
        """The single-threaded sessions a call of ``texts`` texts is shared out to (none: one)."""
        cores = min(_cores(), MOST_SESSIONS)
        if self.threads is not None or texts < PARALLEL_FROM or cores < 2:
            return []
        with self._runtime_lock:
            if self._sessions is None:  # the export exists: _load_runtime made it
                folder = model_source(self.name)
                self._sessions = [_Runtime(folder, self.onnx_path(), 1) for _ in range(cores)]
            return self._sessions


def _cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


def _encode_shared(sessions: list[_Runtime], texts: list[str], batch_size: int) -> Vector:
    """``texts`` encoded by ``sessions`` in parallel, dealt out by length so each gets a share."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    shares = [order[k :: len(sessions)] for k in range(len(sessions))]
    with ThreadPoolExecutor(len(sessions), thread_name_prefix="onnx-embed") as pool:
        parts = list(
            pool.map(
                lambda job: job[0].encode([texts[i] for i in job[1]], batch_size),
                zip(sessions, shares, strict=True),
            )
        )
    out = np.zeros((len(texts), parts[0].shape[1]), dtype=np.float32)
    for share, part in zip(shares, parts, strict=True):
        out[share] = part
    return out


class _Unloadable(Exception):
    """A cached ONNX file that ONNX Runtime cannot load."""


def _verified(
    folder: str, path: Path, threads: int | None, precision: str, want: Callable[[], Vector]
) -> tuple[_Runtime | None, str]:
    """A session of the export ``path`` if it is the one its record describes, or why not.

    The file must match its record (:func:`~corrective_rag.models.onnx_export.check_file`)
    and its vectors of the reference texts ``want()``, the source model's (about 10 ms:
    three short texts through the session a load opens anyway).
    """
    try:
        record = read_record(path)
    except InputError as exc:  # missing, hostile or damaged: one line, and an export again
        return None, f"no readable export record beside it: {exc}"
    if record.precision != precision:
        return None, f"its record is of a {record.precision} export"
    problem = check_file(path, record)
    if problem is not None:
        return None, problem
    try:
        runtime = _Runtime(folder, path, threads)
    except _Unloadable as exc:
        return None, f"ONNX Runtime cannot load it: {exc}"
    problem = _reference_problem(runtime, want(), precision)
    return (runtime, "") if problem is None else (None, problem)


def _reference_problem(runtime: _Runtime, want: Vector, precision: str) -> str | None:
    """Why ``runtime``'s vectors of the reference texts are not ``want``, or None."""
    if want.shape != (len(REFERENCE_TEXTS), runtime.dimension):
        return f"its vectors have {runtime.dimension} dimensions, not the model's {want.shape}"
    got = runtime.encode(list(REFERENCE_TEXTS), 1)
    cosines = np.sum(got * want, axis=1)
    least = MIN_COSINE[precision]
    if not np.all(cosines >= least):  # NaN fails too
        worst = float(cosines.min())
        return f"its vectors of the reference texts are not the model's (cosine {worst:.4f})"
    return None


class _Runtime:
    """An ONNX Runtime session and the model's tokenizer, truncating as the model reads."""

    def __init__(self, folder: str, path: Path, threads: int | None) -> None:
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3  # errors only: the library prints nothing unasked
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        if threads is not None:
            options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        try:
            self.session: onnxruntime.InferenceSession = onnxruntime.InferenceSession(
                str(path), options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime raises its own types for a bad file
            raise _Unloadable(str(exc)) from exc
        self.inputs = [i.name for i in self.session.get_inputs()]
        self.folder = folder
        self.tokenizer, max_tokens, self.pad_id = _tokenizer(folder)
        self.max_tokens = max_tokens
        self.tokenizer.enable_truncation(max_tokens)
        try:
            self.dimension = int(model_config(folder, "config.json")["hidden_size"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"{folder}/config.json: no usable hidden_size ({exc})") from None

    def encode(self, texts: list[str], batch_size: int) -> Vector:
        """Unit vectors of ``texts``, in their order, batched by token length."""
        # sentence-transformers strips each text before tokenizing it
        encodings = self.tokenizer.encode_batch([t.strip() for t in texts])
        lengths = np.array([len(e.ids) for e in encodings])
        order = np.argsort(lengths, kind="stable")
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            width = int(lengths[rows].max())
            ids = np.full((len(rows), width), self.pad_id, dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            types = np.zeros((len(rows), width), dtype=np.int64)
            for j, row in enumerate(rows):
                enc = encodings[row]
                n = len(enc.ids)
                ids[j, :n], mask[j, :n], types[j, :n] = enc.ids, enc.attention_mask, enc.type_ids
            feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
            hidden = self.session.run(None, {n: feeds[n] for n in self.inputs})[0]
            out[rows] = _mean_unit(hidden, mask)
        return out

    @functools.cached_property
    def whole(self) -> Any:
        """The tokenizer without truncation: spans may lie past ``max_tokens``.

        Loaded on first use: indexing's sessions never pool spans.
        """
        return _tokenizer(self.folder)[0]

    def pool_spans(self, text: str, spans: Spans) -> tuple[Vector, Vector]:
        """``text``'s vector and its spans' pooled token vectors (see ``pool_token_spans``)."""
        encoding = self.whole.encode(text, add_special_tokens=True)

        def run(window: list[int]) -> tuple[Vector, Vector]:
            ids = np.asarray([window], dtype=np.int64)
            feeds = {
                "input_ids": ids,
                "attention_mask": np.ones_like(ids),
                "token_type_ids": np.zeros_like(ids),
            }
            hidden = self.session.run(None, {n: feeds[n] for n in self.inputs})[0]
            states = np.asarray(hidden[0], dtype=np.float32)
            return states, states.mean(axis=0)

        return pool_token_spans(
            list(encoding.ids),
            list(encoding.special_tokens_mask),
            list(encoding.offsets),
            spans,
            max_tokens=self.max_tokens,
            run=run,
        )


def _mean_unit(hidden: npt.NDArray[Any], mask: npt.NDArray[np.int64]) -> Vector:
    """sentence-transformers' mean pooling and Normalize: masked mean, then L2 (eps 1e-12)."""
    weights = mask[..., None].astype(np.float32)
    summed = (hidden.astype(np.float32) * weights).sum(axis=1)
    pooled = summed / np.clip(weights.sum(axis=1), 1e-9, None)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)


def _tokenizer(folder: str) -> tuple[Any, int, int]:
    """The model's fast tokenizer (no padding), its max length and its padding id."""
    tokenizer, max_tokens = load_tokenizer(folder)
    token = "[PAD]"
    if os.path.lexists(os.path.join(folder, "tokenizer_config.json")):
        token = model_config(folder, "tokenizer_config.json").get("pad_token") or token
    pad = tokenizer.token_to_id(token) if isinstance(token, str) else None
    return tokenizer, max_tokens, int(pad or 0)
