"""An offline judge that learned relevance: a logistic layer fitted on labelled collections.

:class:`LearnedEvaluator` measures five things of each document against the question, from the
shipped all-MiniLM-L6-v2 and the text alone (:data:`LEARNED_FEATURES`):

* ``dense``: the cosine of the question's and the document's embeddings;
* ``dense_gap``: that cosine less the best among the call's documents;
* ``coverage``: the share of the question's content terms the document holds;
* ``coverage_gap``: that share less the best among the call's documents;
* ``length``: ``log(1 + terms)`` of the document (the part read), over 7.

A logistic layer over them (standardised) gives the probability of relevance ``p``; its
weights, the threshold (best F1 on the training pairs) and the record of how they were fitted
(data and licences, commit, leave-one-collection-out figures) ship as
``learned_judge.json`` beside this module (``scripts/train_judge.py`` writes it,
``benchmarks/learned_judge.py`` measures it; ``docs/llm.md`` has the figures). A verdict is
decided by ``p`` at the threshold as every thresholded judge's is
(:func:`~corrective_rag.evaluate.scoring.with_probability`): relevant from the threshold, the
confidence the probability that the verdict is right (``p`` or ``1 - p``), the score on the
verdict scale's bands, ``p`` kept as ``probability``. The reasoning says what it measured and
the question terms the document holds and lacks. ``missing`` is empty: lacking a word of the
question is not lacking a part of the answer, and the judge does not say what is unanswered.

Each document is read up to :data:`MAX_DOCUMENT_CHARS` characters (title in front), so the
work per document is bounded whatever arrives. The gaps compare the documents of one call, so
a document's verdict depends on the call's other documents, never on their order.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from corrective_rag.errors import ConfigError
from corrective_rag.evaluate.local import check_judged
from corrective_rag.evaluate.scoring import with_probability
from corrective_rag.inputs import read_bounded
from corrective_rag.inputs.files import loads_bounded
from corrective_rag.observe.logs import get_logger
from corrective_rag.protocols import Embedder
from corrective_rag.text import content_terms, tokenize
from corrective_rag.text.lexical import check_idf, coverage, term_weights
from corrective_rag.types import Document, Evaluation, Relevance, Usage, Verdict

# LearnedEvaluator: its home is corrective_rag
__all__ = [
    "LEARNED_FEATURES",
    "MAX_DOCUMENT_CHARS",
    "MAX_JUDGE_BYTES",
    "LearnedJudge",
    "StoredVectors",
    "batch_features",
    "model_text",
    "parse_learned_judge",
    "read_learned_judge",
]

log: Any = get_logger(__name__)

LEARNED_FEATURES = ("dense", "dense_gap", "coverage", "coverage_gap", "length")
# A bound on the work per document: the embedding model reads 256 word pieces (~1,000-1,200
# characters of English); twice that keeps every piece it reads and bounds the lexical side.
MAX_DOCUMENT_CHARS = 2_048
_LENGTH_SCALE = 7.0  # log(1 + terms) / 7 stays near 0..1 for documents up to ~1,000 terms
_JUDGE_FILE = "learned_judge.json"
MAX_JUDGE_BYTES = 1_000_000  # the shipped file is ~10 KB; a model record is small
_SHOWN_TERMS = 8  # question terms the reasoning names, each way

# Stored vectors by document: a vector of exactly the document's text by the judge's embedder,
# or None (HybridStore.vectors is one).
StoredVectors = Callable[[Sequence[Document]], Sequence[npt.NDArray[np.float32] | None]]


def model_text(document: Document) -> str:
    """The text the judge reads: the title in front of the text, cut to the reading bound.

    A document whose text already starts with its title (a BEIR record loaded by
    ``load_documents``) is read as it is.
    """
    title = document.metadata.get("title")
    text = document.text
    if isinstance(title, str) and title.strip() and not text.startswith(title.strip()):
        text = f"{title.strip()}\n{text}"
    return text[:MAX_DOCUMENT_CHARS]


def batch_features(
    dense: Sequence[float], shares: Sequence[float], terms: Sequence[int]
) -> list[tuple[float, ...]]:
    """The feature vectors (in :data:`LEARNED_FEATURES` order) of one call's documents.

    Args:
        dense: each document's cosine with the question.
        shares: each document's share of the question's content terms, 0..1.
        terms: each document's length in terms (of the part read).
    """
    if not dense:
        return []
    best_dense, best_share = max(dense), max(shares)
    return [
        (d, d - best_dense, s, s - best_share, math.log1p(n) / _LENGTH_SCALE)
        for d, s, n in zip(dense, shares, terms, strict=True)
    ]


@dataclass(frozen=True, slots=True)
class LearnedJudge:
    """A fitted logistic layer over :data:`LEARNED_FEATURES` and its decision threshold.

    ``p = sigmoid(bias + sum(weights * (x - mean) / scale))``; ``record`` is what the training
    run wrote about itself (data, licences, settings, figures).
    """

    mean: tuple[float, ...]
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    bias: float
    threshold: float
    record: dict[str, Any] = field(default_factory=dict, compare=False)

    def probability(self, vector: Sequence[float]) -> float:
        """The probability of relevance of one feature vector."""
        z = self.bias + sum(
            w * (x - m) / s
            for w, x, m, s in zip(self.weights, vector, self.mean, self.scale, strict=True)
        )
        return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))

    def file_record(self) -> dict[str, Any]:
        """What a judge file holds: the record, then the fitted layer.

        :func:`parse_learned_judge` reads it back as this judge.
        """
        return {
            **self.record,
            "features": list(LEARNED_FEATURES),
            "mean": list(self.mean),
            "scale": list(self.scale),
            "weights": list(self.weights),
            "bias": self.bias,
            "threshold": self.threshold,
        }


def _numbers(
    raw: dict[str, Any], key: str, where: str, *, positive: bool = False
) -> tuple[float, ...]:
    value = raw.get(key)
    if not isinstance(value, list) or len(value) != len(LEARNED_FEATURES):
        raise ConfigError(f"{where}: {key} must be a list of {len(LEARNED_FEATURES)} numbers")
    out = []
    for x in value:
        if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
            raise ConfigError(f"{where}: {key} holds {x!r}, not a finite number")
        if positive and x <= 0:
            raise ConfigError(f"{where}: {key} holds {x!r}, not a positive number")
        out.append(float(x))
    return tuple(out)


def read_learned_judge(
    path: str | Path | None = None, *, sha256: str | None = None
) -> LearnedJudge:
    """Read a judge file (``None``: the shipped one) through the bounded reader.

    Args:
        path: the judge file; ``None``: the one shipped with the package.
        sha256: the file's expected SHA-256 (hex), as a judge profile records it: a file that
            changed since it was measured is refused.

    Raises:
        ConfigError: the file is missing, too large, not JSON, not a judge of
            :data:`LEARNED_FEATURES`, or not the file ``sha256`` names.
    """
    if path is None:
        with resources.as_file(resources.files(__package__ or __name__) / _JUDGE_FILE) as p:
            raw = read_bounded(p, max_bytes=MAX_JUDGE_BYTES, error=ConfigError)
        where = _JUDGE_FILE
    else:
        if not isinstance(path, str | Path):
            raise ConfigError(f"model must be a file path (str or Path) or None, got {path!r}")
        raw = read_bounded(path, max_bytes=MAX_JUDGE_BYTES, error=ConfigError)
        where = str(path)
    if sha256 is not None and hashlib.sha256(raw).hexdigest() != sha256:
        raise ConfigError(
            f"{where}: the learned judge file changed since it was measured (its SHA-256 is not "
            "the one its judge profile records): run judge-check --train again"
        )
    return parse_learned_judge(loads_bounded(raw, where, error=ConfigError), where)


def parse_learned_judge(raw: object, where: str) -> LearnedJudge:
    """The judge a judge file's JSON (``raw``) holds; ``where`` names it in errors.

    Raises:
        ConfigError: not a judge of :data:`LEARNED_FEATURES` (mean, scale > 0, weights, a
            finite bias, a threshold in (0, 1)).
    """
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: a judge file holds a JSON object")
    if raw.get("features") != list(LEARNED_FEATURES):
        raise ConfigError(
            f"{where}: features must be {list(LEARNED_FEATURES)}, got {raw.get('features')!r}"
        )
    bias, threshold = raw.get("bias"), raw.get("threshold")
    if isinstance(bias, bool) or not isinstance(bias, int | float) or not math.isfinite(bias):
        raise ConfigError(f"{where}: bias must be a finite number, got {bias!r}")
    if (
        isinstance(threshold, bool)
        or not isinstance(threshold, int | float)
        or not 0 < threshold < 1
    ):
        raise ConfigError(f"{where}: threshold must be in (0, 1), got {threshold!r}")
    return LearnedJudge(
        _numbers(raw, "mean", where),
        _numbers(raw, "scale", where, positive=True),
        _numbers(raw, "weights", where),
        float(bias),
        float(threshold),
        {k: v for k, v in raw.items() if k not in ("mean", "scale", "weights", "bias")},
    )


class LearnedEvaluator:
    """Judges documents with a logistic layer learned on labelled collections; no LLM calls.

    Cheap to create: the judge file is read and the embedder created on the first
    :meth:`evaluate` call.

    Args:
        embedder: anything with ``embed(texts) -> unit vectors``, the model the judge was fitted
            over (all-MiniLM-L6-v2); ``None`` uses the default offline embedder, lazily.
        threshold: the probability of relevance from which a document is relevant; ``None``
            is the judge file's own (best F1 on its training pairs).
        model: a judge file (``scripts/train_judge.py`` or ``judge-check --train`` wrote it),
            or a :class:`LearnedJudge` already read; ``None`` is the shipped one.
        idf: optional ``term -> idf`` that orders the question terms the reasoning names; it
            does not change the verdict (the judge was fitted on unweighted shares).
        stored: optional vectors the judge reads instead of embedding documents again
            (a store's :meth:`~corrective_rag.store.hybrid.HybridStore.vectors`, with the
            store's embedder as ``embedder``): asked with each document's text as the judge
            reads it (:func:`model_text`), it returns one vector or ``None`` per document, a
            vector only where it is that text's embedding by ``embedder``; the documents it
            returns ``None`` for are embedded. The features are the same either way.

    Attributes:
        documents_per_call: ``None``: no LLM calls, so a call budget never caps its documents.
    """

    documents_per_call: int | None = None

    def __init__(
        self,
        embedder: Embedder | None = None,
        *,
        threshold: float | None = None,
        model: str | Path | LearnedJudge | None = None,
        idf: Callable[[str], float] | None = None,
        stored: StoredVectors | None = None,
    ) -> None:
        if embedder is not None and not callable(getattr(embedder, "embed", None)):
            raise ConfigError("embedder must have an embed(texts) method")
        if stored is not None and not callable(stored):
            raise ConfigError(
                f"stored must be None or a callable documents -> vectors, got {stored!r}"
            )
        if threshold is not None and (
            isinstance(threshold, bool)
            or not isinstance(threshold, int | float)
            or not 0.0 < threshold < 1.0
        ):
            raise ConfigError(f"threshold must be None or in (0, 1), got {threshold!r}")
        if model is not None and not isinstance(model, str | Path | LearnedJudge):
            raise ConfigError(
                f"model must be a file path (str or Path), a LearnedJudge or None, got {model!r}"
            )
        self._embedder = embedder
        self._threshold = None if threshold is None else float(threshold)
        self.model = model
        self.idf: Callable[[str], float] | None = check_idf(idf)
        self.stored = stored
        self._judge: LearnedJudge | None = model if isinstance(model, LearnedJudge) else None

    @property
    def judge(self) -> LearnedJudge:
        """The fitted judge (its file read on first use)."""
        if self._judge is None:
            model = self.model
            self._judge = model if isinstance(model, LearnedJudge) else read_learned_judge(model)
        return self._judge

    @property
    def embedder(self) -> Embedder:
        """The embedder, creating the default one on first use."""
        if self._embedder is None:
            from corrective_rag.models.embeddings import SentenceTransformerEmbedder

            self._embedder = SentenceTransformerEmbedder()
        return self._embedder

    @property
    def threshold(self) -> float:
        """The probability from which a document is relevant."""
        return self.judge.threshold if self._threshold is None else self._threshold

    def features(self, question: str, documents: Sequence[Document]) -> list[tuple[float, ...]]:
        """Each document's feature vector (:data:`LEARNED_FEATURES` order); one embedding call.

        The call embeds the question and the documents :attr:`stored` has no vector for.
        """
        check_judged(question, documents)
        if not documents:
            return []
        texts = [model_text(d) for d in documents]
        known = self._stored_vectors(documents, texts)
        todo = [t for t, v in zip(texts, known, strict=True) if v is None]
        embedded = np.asarray(self.embedder.embed([question, *todo]), dtype=np.float32)
        asked, fresh = embedded[0], iter(embedded[1:])
        for v in known:
            if v is not None and v.shape != asked.shape:
                raise ConfigError(
                    f"stored gave a vector of shape {v.shape}; the embedder's are {asked.shape}"
                )
        rows = np.vstack([next(fresh) if v is None else v for v in known])
        dense = [float(x) for x in rows @ asked]
        asked = term_weights(content_terms(question))
        shares, lengths = [], []
        for text in texts:
            terms = tokenize(text)
            shares.append(coverage(asked, terms).share)
            lengths.append(len(terms))
        return batch_features(dense, shares, lengths)

    def _stored_vectors(
        self, documents: Sequence[Document], texts: Sequence[str]
    ) -> list[npt.NDArray[np.float32] | None]:
        """:attr:`stored`'s vector of each document as read (``texts``), checked; or None."""
        if self.stored is None:
            return [None] * len(documents)
        read = [replace(d, text=t) for d, t in zip(documents, texts, strict=True)]
        found = list(self.stored(read))
        if len(found) != len(documents):
            raise ConfigError(f"stored gave {len(found)} vectors for {len(documents)} documents")
        return [None if v is None else np.asarray(v, dtype=np.float32) for v in found]

    def probabilities(self, question: str, documents: Sequence[Document]) -> list[float]:
        """Each document's probability of relevance to ``question``."""
        judge = self.judge
        return [judge.probability(v) for v in self.features(question, documents)]

    def evaluate(self, question: str, documents: Sequence[Document]) -> Evaluation:
        """Return one verdict per document, in order; usage is always zero LLM calls."""
        check_judged(question, documents)
        if not documents:
            return Evaluation((), Usage())
        judge, threshold = self.judge, self.threshold
        vectors = self.features(question, documents)
        weights = term_weights(content_terms(question), self.idf)
        verdicts = []
        for doc, vector in zip(documents, vectors, strict=True):
            # four decimals: an embedding batched in another order differs in the 8th
            p = round(judge.probability(vector), 4)
            found = coverage(weights, tokenize(model_text(doc)))
            reasoning = _reasoning(
                doc,
                vector=vector,
                matched=found.matched,
                missing=found.missing,
                p=p,
                threshold=threshold,
            )
            # decided as every thresholded judge is (scoring.with_probability): relevant from
            # the threshold, confidence p or 1 - p, the score on the verdict scale's bands
            verdict = Verdict(doc.id, False, Relevance.LOW, 0.0, 0.5, reasoning=reasoning)
            verdicts.append(with_probability(verdict, p, threshold))
        log.debug(
            "learned_evaluation",
            documents=len(documents),
            relevant=sum(bool(v.relevant) for v in verdicts),
        )
        return Evaluation(tuple(verdicts), Usage())


def _reasoning(
    document: Document,
    *,
    vector: Sequence[float],
    matched: Sequence[str],
    missing: Sequence[str],
    p: float,
    threshold: float,
) -> str:
    total = len(document.text)
    read = (
        "the whole document"
        if total <= MAX_DOCUMENT_CHARS
        else (f"its first {MAX_DOCUMENT_CHARS} of {total} characters")
    )
    dense, dense_gap, share = vector[0], vector[1], vector[2]
    parts = [
        f"learned judge: P(relevant) {p:.2f} against threshold {threshold:.2f}",
        f"read {read}",
        f"cosine {dense:.2f} ({dense_gap:+.2f} from the call's best)",
        f"holds {len(matched)}/{len(matched) + len(missing)} question terms ({share:.0%})"
        + (f": {', '.join(matched[:_SHOWN_TERMS])}" if matched else "")
        + (f"; lacks {', '.join(missing[:_SHOWN_TERMS])}" if missing else ""),
    ]
    return "; ".join(parts)
