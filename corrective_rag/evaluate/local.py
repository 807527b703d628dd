"""A local relevance judge with no LLM: embeddings plus lexical evidence, combined logistically.

No cross-encoder weights can be had offline, so the judge combines what the package already has:

* ``dense``: cosine of the question and the whole document (the retrieval model);
* ``sentence``: the best cosine of the question and one of the document's sentences, which finds
  a relevant sentence inside a long, mostly off-topic document;
* ``coverage``: the idf-weighted share of the question's content terms the document contains;
* ``dense_gap``, ``sentence_gap``, ``coverage_gap``: the three above less their best value
  among the documents judged for the same question so far (this batch and the remembered
  earlier calls): how a document compares with the best one found for the question carries
  across collections better than the raw cosines, whose scale depends on the question's wording;
* ``named``: the document's title is named in the question (a question about two named things,
  or the first hop of a multi-hop question, names the documents it needs by their titles);
* title links, for a document whose title another document names (one of the same batch, or
  one judged earlier for the same question), weighed by that namer's own direct score: this is
  how a multi-hop question's second paragraph, about a bridge entity the question never names,
  earns credit. ``linked`` is the best namer's score; ``bridge`` the same times one less the
  document's own direct score (a link lifts a paragraph unlike the question, a bridge, but not
  a sibling page that already looks like the question and that on-topic pages also mention);
  ``bridge_sentence`` weighs the namer by how close its naming sentence is to the question;
  ``bridge_complement`` by how much of what the namer lacks of the question's terms the
  document covers (the second paragraph holds the rest of the question); ``bridge_top`` counts
  only the best document judged for the question as the namer; ``bridge_depth`` grows with how
  far below even odds the document's own evidence is, so that a strong link offsets part of the
  penalty a bridge paragraph gets for looking unlike the question.

``score = sigmoid(bias + w . features)``; a document is relevant when ``score >= threshold``.
Everything is embedded in one batched call per :meth:`LocalEvaluator.evaluate`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np
import structlog

from corrective_rag.errors import ConfigError, InputError
from corrective_rag.evaluate.links import link_features
from corrective_rag.evaluate.local_features import LocalFeatures, LocalWeights
from corrective_rag.inputs import check_query
from corrective_rag.protocols import Embedder
from corrective_rag.text import content_terms, tokenize
from corrective_rag.text.lexical import (
    check_idf,
    coverage,
    names_phrase,
    phrase_form,
    split_sentences,
    term_weights,
    title_phrase,
)
from corrective_rag.types import Document, Evaluation, Relevance, Usage, Verdict

__all__ = ["DEFAULT_WEIGHTS", "LocalEvaluator", "LocalFeatures", "LocalWeights"]

log = structlog.get_logger(__name__)

_QUOTE_CHARS = 160  # how much of the best sentence the reasoning quotes
_SEEN_PER_QUESTION = 100  # documents remembered per question for title links, best first
_BOUNDARY = 0.5  # irrelevant verdicts score below this, which every policy drops (_rescale)
_HIGH = 0.7  # relevant verdicts score from here: the presets' high relevance (see _rescale)
# The gaps are taken from the best document judged for the question, not from the mean of all:
# the mean of all falls as more are judged, so the same document was kept among 15 weak ones and
# dropped among the loop's first 5. The best one hardly moves once the first call is judged, so
# the loop's first batch of 5 is judged as strictly as the same 5 among 15 (the mean of the best
# three kept 31 more false positives in the loop's first batch on HotpotQA-500).
_GAP_REFERENCE = 1
# Fitted by `python benchmarks/calibrate_local.py ... --judged loop --fit` over HotpotQA-500, CISI,
# Cranfield and CACM pooled (each collection weighs the same; the README has the command): logistic
# regression (scipy BFGS, light ridge) on the documents the corrective loop at its defaults sends
# the judge, in the loop's calls (the gaps and links depend on what came before); the title-link
# weights refitted on the documents that have a link (collections whose titles are never named have
# none); the threshold chosen for the best F1 averaged over the collections, so the judge is not
# fitted to one collection's style. Refitted until the weights stopped moving (the loop's documents
# depend on the judge).
DEFAULT_WEIGHTS = LocalWeights(
    bias=-2.431,
    dense=2.352,
    sentence=1.449,
    coverage=0.295,
    linked=-1.861,
    threshold=0.26,
    dense_gap=1.831,
    sentence_gap=0.914,
    coverage_gap=1.596,
    named=1.666,
    bridge=-3.433,
    bridge_sentence=2.316,
    bridge_complement=5.675,
    bridge_top=1.048,
    bridge_depth=1.884,
)


class LocalEvaluator:
    """Judges documents locally (zero LLM calls) from embeddings and lexical evidence.

    Args:
        embedder: anything with ``embed(texts) -> unit vectors``; ``None`` uses the default
            offline :class:`~corrective_rag.models.embeddings.SentenceTransformerEmbedder`,
            created lazily on first use.
        idf: optional ``term -> idf`` (for example the hybrid store's ``idf``) that weights the
            question's content terms; without it every term weighs the same.
        weights: the logistic combination and threshold (calibrated defaults).
        max_sentences: sentences per document compared with the question.
        link_titles: credit a document whose title another on-topic document names (one in the
            same batch, or one judged earlier for the same question).
        memory: how many recent questions keep their judged documents for the gaps and
            title links (0: only the current batch counts).

    Attributes:
        documents_per_call: ``None``: no LLM calls, so a call budget never caps its documents.
    """

    documents_per_call: int | None = None

    def __init__(
        self,
        embedder: Embedder | None = None,
        *,
        idf: Callable[[str], float] | None = None,
        weights: LocalWeights = DEFAULT_WEIGHTS,
        max_sentences: int = 20,
        link_titles: bool = True,
        memory: int = 128,
    ) -> None:
        if embedder is not None and not callable(getattr(embedder, "embed", None)):
            raise ConfigError("embedder must have an embed(texts) method")
        if not isinstance(weights, LocalWeights):
            raise ConfigError("weights must be a LocalWeights")
        if not 0.0 < weights.threshold < 1.0:
            raise ConfigError(f"threshold must be in (0, 1), got {weights.threshold}")
        if memory < 0:
            raise ConfigError(f"memory must be >= 0, got {memory}")
        if max_sentences < 1:
            raise ConfigError(f"max_sentences must be >= 1, got {max_sentences}")
        self._embedder = embedder
        self.idf = check_idf(idf)
        self.weights = weights
        self.max_sentences = max_sentences
        self.link_titles = link_titles
        self.memory = memory
        self._seen: OrderedDict[str, dict[str, tuple[Document, LocalFeatures, float]]] = (
            OrderedDict()
        )
        self._lock = threading.Lock()

    @property
    def embedder(self) -> Embedder:
        """The embedder, creating the default one on first use."""
        if self._embedder is None:
            from corrective_rag.models.embeddings import SentenceTransformerEmbedder

            self._embedder = SentenceTransformerEmbedder()
        return self._embedder

    def features(self, question: str, documents: Sequence[Document]) -> list[LocalFeatures]:
        """Compute the evidence for each document (one batched embedding call)."""
        _check(question, documents)
        if not documents:
            return []
        sentences = [
            split_sentences(d.text, limit=self.max_sentences) or [d.text] for d in documents
        ]
        texts = [question, *(d.text for d in documents), *(s for ss in sentences for s in ss)]
        vectors = np.asarray(self.embedder.embed(texts), dtype=np.float32)
        q = vectors[0]
        dense = vectors[1 : 1 + len(documents)] @ q
        sentence_cos = vectors[1 + len(documents) :] @ q
        weights = term_weights(content_terms(question), self.idf)
        found = []
        start = 0
        for doc, doc_sentences, doc_dense in zip(documents, sentences, dense, strict=True):
            cosines = sentence_cos[start : start + len(doc_sentences)]
            start += len(doc_sentences)
            best = int(np.argmax(cosines))
            cov = coverage(weights, tokenize(doc.text))
            found.append(
                (
                    doc,
                    float(doc_dense),
                    float(cosines[best]),
                    doc_sentences[best],
                    cov,
                    tuple(zip(doc_sentences, cosines.tolist(), strict=True)),
                )
            )
        question_form = phrase_form(question)
        raw = [
            LocalFeatures(
                dense,
                sent,
                cov.share,
                0.0,
                best,
                cov.matched,
                cov.missing,
                named=float(names_phrase(question_form, title_phrase(doc.metadata.get("title")))),
                sentences=compared,
            )
            for doc, dense, sent, best, cov, compared in found
        ]
        with self._lock:
            seen = dict(self._seen.get(question, {}))
        batch_ids = {d.id for d in documents}
        earlier = [entry for doc_id, entry in seen.items() if doc_id not in batch_ids]
        direct = _gaps(raw, [feat for _, feat, _ in earlier])
        scores = [self.weights.score(f) for f in direct]
        if self.memory:
            self._remember(question, documents, raw, scores)
        if not self.link_titles:
            return direct
        return link_features(weights, documents, direct, scores, earlier)

    def _remember(
        self,
        question: str,
        documents: Sequence[Document],
        raw: list[LocalFeatures],
        scores: list[float],
    ) -> None:
        """Keep the question's judged documents (best first, capped) for later calls."""
        with self._lock:
            entry = self._seen.pop(question, {})
            entry.update(
                {d.id: (d, f, sc) for d, f, sc in zip(documents, raw, scores, strict=True)}
            )
            if len(entry) > _SEEN_PER_QUESTION:
                best = sorted(entry.items(), key=lambda item: -item[1][2])
                entry = dict(best[:_SEEN_PER_QUESTION])
            self._seen[question] = entry
            while len(self._seen) > self.memory:
                self._seen.popitem(last=False)

    def evaluate(self, question: str, documents: Sequence[Document]) -> Evaluation:
        """Return one graded verdict per document, in order; usage is always zero LLM calls."""
        features = self.features(question, documents)
        verdicts = tuple(
            self._verdict(doc, feat) for doc, feat in zip(documents, features, strict=True)
        )
        log.debug(
            "local_evaluation",
            documents=len(documents),
            relevant=sum(bool(v.relevant) for v in verdicts),
        )
        return Evaluation(verdicts, Usage())

    def _verdict(self, document: Document, features: LocalFeatures) -> Verdict:
        probability = self.weights.score(features)
        relevant = probability >= self.weights.threshold
        return Verdict(
            document.id,
            relevant,
            Relevance.HIGH if relevant else Relevance.LOW,
            round(_rescale(probability, self.weights.threshold), 4),
            # the logistic output is a probability of relevance fitted on the qrels, so the
            # confidence in a verdict is the probability that it is right
            round(probability if relevant else 1.0 - probability, 4),
            reasoning=_reasoning(features),
            missing=", ".join(features.missing) or None,
        )


def _gaps(raw: list[LocalFeatures], earlier: list[LocalFeatures]) -> list[LocalFeatures]:
    """Each document's features less the mean of the best ``_GAP_REFERENCE`` values of each.

    The pool is the batch and the documents judged earlier for the question.

    How a document compares with the others retrieved for the same question is evidence that
    travels across collections better than the raw cosines, whose scale depends on the
    question's wording and the collection's style.
    """
    pool = np.array([f.vector()[:3] for f in (*raw, *earlier)], dtype=np.float64)
    reference = np.sort(pool, axis=0)[-_GAP_REFERENCE:].mean(axis=0)
    return [
        replace(
            f,
            dense_gap=f.dense - float(reference[0]),
            sentence_gap=f.sentence - float(reference[1]),
            coverage_gap=f.coverage - float(reference[2]),
        )
        for f in raw
    ]


def _rescale(probability: float, threshold: float) -> float:
    """Map the logistic output piecewise-linearly onto the filter policies' score scale.

    The decision threshold lands on ``_HIGH`` (0.7, where the presets' high relevance starts
    and CRAG's *correct* begins), so that a document the judge calls relevant is one the
    ``general`` policy keeps when the judge is confident enough; a document it calls irrelevant
    scores below ``_BOUNDARY`` (0.5), which every preset drops. The local judge has no middle
    grade: its verdict is binary, and the confidence carries how sure it is.
    """
    if probability < threshold:
        return _BOUNDARY * probability / threshold
    return _HIGH + (1.0 - _HIGH) * (probability - threshold) / (1.0 - threshold)


def _check(question: str, documents: Sequence[Document]) -> None:
    check_query(question, what="question")
    if (
        isinstance(documents, str | bytes | Document)
        or not isinstance(documents, Sequence)
        or not all(isinstance(d, Document) for d in documents)
    ):
        raise InputError("documents must be a sequence of Document")


def _reasoning(features: LocalFeatures) -> str:
    total = len(features.matched) + len(features.missing)
    parts = [
        f"covers {len(features.matched)}/{total} question terms"
        + (f" ({', '.join(features.matched)})" if features.matched else ""),
        f"best sentence (cosine {features.sentence:.2f}): {_quote(features.best_sentence)!r}",
        f"document cosine {features.dense:.2f}",
    ]
    if features.named:
        parts.append("the question names its title")
    if features.linked > 0:
        parts.append(f"its title is named in an on-topic document (score {features.linked:.2f})")
    return "; ".join(parts)


def _quote(sentence: str) -> str:
    sentence = " ".join(sentence.split())
    return sentence if len(sentence) <= _QUOTE_CHARS else sentence[: _QUOTE_CHARS - 3] + "..."
