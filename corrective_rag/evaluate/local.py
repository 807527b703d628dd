"""A local relevance judge with no LLM: embeddings plus lexical evidence, combined logistically.

No cross-encoder weights can be had offline, so the judge combines what the package already has:

* ``dense``: cosine of the question and the whole document (the retrieval model);
* ``sentence``: the best cosine of the question and one of the document's sentences, which finds
  a relevant sentence inside a long, mostly off-topic document;
* ``coverage``: the idf-weighted share of the question's content terms the document contains;
* ``dense_gap``, ``sentence_gap``, ``coverage_gap``: the three above less their best value
  among the documents judged for the question (this batch and those the caller passes as
  judged before, see :meth:`LocalEvaluator.evaluate_in_context`): how a document compares
  with the best one found for the question carries across collections better than the raw
  cosines, whose scale depends on the question's wording;
* ``named``: the document's title is named in the question (a question about two named things,
  or the first hop of a multi-hop question, names the documents it needs by their titles);
* title links, for a document whose title another document names (one of the same batch, or
  one passed as judged before), weighed by that namer's own direct score: this is
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

* ``bm25``: the document's BM25 for the question's terms over the best BM25 among the documents
  judged for the question (term frequency and length, which ``coverage`` ignores).

``p = sigmoid(bias + w . features)``, the probability that the document is relevant. Which
documents are relevant is decided among all the documents judged for the question (the batch
and the context): those whose keeping maximises the expected F1
(:func:`~corrective_rag.evaluate.selection.keep_from`), never below the floor
``weights.threshold``, and any document at least ``weights.keep_at`` likely; then held back by
two bounds relative to the question's best document: within ``weights.margin`` logits of it, and
at most ``weights.cap`` documents. The first part reads the level of the probabilities, which
does not travel (on a held-out single-hop collection whose probabilities ran higher it kept about
four irrelevant documents for each relevant one); the bounds do not depend on the level. The
verdict's score maps ``p`` onto the verdict scale (:func:`verdict_score`: the cut lands where the
scale's relevant verdicts begin); the confidence is the probability that the verdict is right
(``p`` for a kept document, ``1 - p`` for a rejected one). Its verdicts' ``missing`` is always
empty: ``missing`` is what a judge says is still unanswered, which word overlap cannot tell (the
question words a document lacks are named in the reasoning). The documents are read by the model
once each per evaluation (their sentences' vectors pool the same pass), and nothing is
remembered between calls.

One concept, kept whole though long: the offline judge's decision, from features to verdicts
(its features are :mod:`.local_features`, its title links :mod:`.links`, its keep rule
:mod:`.selection`); most of the length is this account of why it decides as it does.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from corrective_rag.errors import ConfigError, InputError
from corrective_rag.evaluate.local_features import LocalFeatures, LocalWeights
from corrective_rag.evaluate.pool import pool_features
from corrective_rag.evaluate.selection import keep_from
from corrective_rag.inputs import check_query
from corrective_rag.observe.logs import get_logger
from corrective_rag.protocols import Embedder
from corrective_rag.text import content_terms, tokenize
from corrective_rag.text.lexical import (
    MIN_SENTENCE_CHARS,
    check_idf,
    coverage,
    names_phrase,
    phrase_form,
    sentence_spans,
    term_weights,
    title_phrase,
)
from corrective_rag.types import (
    HIGH_FROM,
    RELEVANT_FROM,
    Document,
    Evaluation,
    Judged,
    Relevance,
    Usage,
    Verdict,
)

# LocalEvaluator: its home is corrective_rag
__all__ = ["DEFAULT_WEIGHTS", "check_judged", "verdict_score"]

log: Any = get_logger(__name__)

_QUOTE_CHARS = 160  # how much of the best sentence the reasoning quotes
_TOP_REJECTED = RELEVANT_FROM - 1e-4  # the highest rejected score at the verdicts' 4 decimals
# Fitted by `python benchmarks/calibrate_local.py HOTPOTQA CISI CRANFIELD CACM --judged loop --fit`
# over HotpotQA-500, CISI, Cranfield and CACM pooled (each collection weighs the same): logistic
# regression (scipy BFGS, light ridge) on the documents the corrective loop at its defaults sends
# the judge, in the loop's calls (the gaps, BM25 and links depend on what came before); the
# title-link weights refitted on the documents that have a link (collections whose titles are
# never named have none); the floor chosen for the best F1 averaged over the collections under
# the expected-F1 cut. Fitted once with weights fitted on the top-10 hits, then once more with
# the loop's documents under those. In-sample on those four collections; `--loco` gives the
# out-of-sample figures (docs/offline-judge.md). `keep_at` is not fitted (the F1 the fit
# maximises does not reward it): 0.3 keeps a multi-hop question's second paragraph beside a
# stand-out first one, which the loop needs (HotpotQA-500 loop all_found 0.800 -> 0.812) and
# which moved no leave-one-out F1 by more than 0.01 (0.3 and 0.4 tried, on all four).
# `margin` and `cap` are off (inf, None): `--fit` fits them with the floor, but they were not
# fitted yet (docs/offline-judge.md, "Not measured this round"); off, the cut is as measured.
DEFAULT_WEIGHTS = LocalWeights(
    bias=-2.961,
    dense=1.728,
    sentence=1.94,
    coverage=-0.011,
    linked=-1.779,
    threshold=0.22,
    dense_gap=0.874,
    sentence_gap=1.375,
    coverage_gap=1.252,
    named=1.643,
    bridge=-3.851,
    bridge_sentence=2.913,
    bridge_complement=5.822,
    bridge_top=0.938,
    bridge_depth=1.879,
    bm25=0.841,
    keep_at=0.3,
    margin=math.inf,
    cap=None,
)


class LocalEvaluator:
    """Judges documents locally (zero LLM calls) from embeddings and lexical evidence.

    A verdict is a pure function of the call's arguments: the evaluator remembers nothing
    between calls. The corrective loop compares each batch with the documents the run judged
    before through :meth:`evaluate_in_context` (the gap and title-link features); a plain
    :meth:`evaluate` compares the batch's documents with one another only.

    Args:
        embedder: anything with ``embed(texts) -> unit vectors``; ``None`` uses the default
            offline :class:`~corrective_rag.models.embeddings.SentenceTransformerEmbedder`,
            created lazily on first use.
        idf: optional ``term -> idf`` (for example the hybrid store's ``idf``) that weights the
            question's content terms; without it every term weighs the same.
        weights: the logistic combination and threshold (calibrated defaults).
        max_sentences: sentences per document compared with the question.
        link_titles: credit a document whose ``metadata["title"]`` another judged document
            names. ``None`` (the default) decides per call: the links are looked for only when
            some judged document has a title, so a corpus without titles pays nothing for them;
            ``False`` never links (a corpus whose titles are not names, such as file names).

    Attributes:
        documents_per_call: ``None``: no LLM calls, so a call budget never caps its documents.
        keeps_at_most: ``weights.cap``, the most of a question's judged documents it keeps
            (``None``: no cap), over all its calls for the question: the relevant verdicts
            among the judged documents :meth:`evaluate_in_context` is passed have used their
            slots. The orchestrator lowers a default ``min_relevant`` to it and stops the run
            once that many are judged relevant (nothing more could be kept).
    """

    documents_per_call: int | None = None

    def __init__(
        self,
        embedder: Embedder | None = None,
        *,
        idf: Callable[[str], float] | None = None,
        weights: LocalWeights = DEFAULT_WEIGHTS,
        max_sentences: int = 20,
        link_titles: bool | None = None,
    ) -> None:
        if embedder is not None and not callable(getattr(embedder, "embed", None)):
            raise ConfigError("embedder must have an embed(texts) method")
        if not isinstance(weights, LocalWeights):
            raise ConfigError("weights must be a LocalWeights")
        if not 0.0 < weights.threshold < 1.0:
            raise ConfigError(f"threshold must be in (0, 1), got {weights.threshold}")
        if not weights.threshold <= weights.keep_at <= 1.0:
            raise ConfigError(
                f"keep_at must be in [threshold, 1], got {weights.keep_at} "
                f"(threshold {weights.threshold})"
            )
        if not weights.margin > 0.0:
            raise ConfigError(f"margin must be > 0, got {weights.margin}")
        cap = weights.cap
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
            raise ConfigError(f"cap must be None or an int >= 1, got {cap!r}")
        if max_sentences < 1:
            raise ConfigError(f"max_sentences must be >= 1, got {max_sentences}")
        if link_titles is not None and not isinstance(link_titles, bool):
            raise ConfigError(f"link_titles must be True, False or None, got {link_titles!r}")
        self._embedder = embedder
        self.idf: Callable[[str], float] | None = check_idf(idf)
        self.weights = weights
        self.max_sentences = max_sentences
        self.link_titles = link_titles

    @property
    def keeps_at_most(self) -> int | None:
        """The most of a question's judged documents this judge keeps (``weights.cap``)."""
        return self.weights.cap

    @property
    def embedder(self) -> Embedder:
        """The embedder, creating the default one on first use."""
        if self._embedder is None:
            from corrective_rag.models.embeddings import SentenceTransformerEmbedder

            self._embedder = SentenceTransformerEmbedder()
        return self._embedder

    def direct_features(self, question: str, documents: Sequence[Document]) -> list[LocalFeatures]:
        """Each document's own evidence, before gaps and links (one batched embedding call).

        These depend on the question and the document only, not on the weights nor on the other
        documents; :func:`~corrective_rag.evaluate.pool.pool_features` completes them. An embedder
        with ``embed_spans`` (the default one) gives each document's vector and its sentences'
        vectors from one forward pass of the document (a sentence's vector pools the document's
        contextual token embeddings inside it); any other embedder embeds the question, the
        documents and their sentences separately, in one call.
        """
        check_judged(question, documents)
        if not documents:
            return []
        spans = [judged_sentence_spans(d.text, self.max_sentences) for d in documents]
        sentences = [[d.text[a:b] for a, b in ss] for d, ss in zip(documents, spans, strict=True)]
        q, vectors, sentence_vectors = self._embed(question, documents, spans, sentences)
        dense = vectors @ q
        weights = self.term_weights(question)
        question_form = phrase_form(question)
        found = []
        for doc, doc_sentences, doc_dense, doc_vectors in zip(
            documents, sentences, dense, sentence_vectors, strict=True
        ):
            cosines = doc_vectors @ q
            best = int(np.argmax(cosines))
            terms = tokenize(doc.text)
            cov = coverage(weights, terms)
            counts = Counter(t for t in terms if t in weights)
            found.append(
                LocalFeatures(
                    float(doc_dense),
                    float(cosines[best]),
                    cov.share,
                    0.0,
                    doc_sentences[best],
                    cov.matched,
                    cov.missing,
                    named=float(
                        names_phrase(question_form, title_phrase(doc.metadata.get("title")))
                    ),
                    sentences=tuple(zip(doc_sentences, cosines.tolist(), strict=True)),
                    length=len(terms),
                    counts=tuple(sorted(counts.items())),
                )
            )
        return found

    def _embed(
        self,
        question: str,
        documents: Sequence[Document],
        spans: list[list[tuple[int, int]]],
        sentences: list[list[str]],
    ) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
        """The question's vector, the documents' vectors and each document's sentence vectors."""
        embedder = self.embedder
        embed_spans = getattr(embedder, "embed_spans", None)
        if callable(embed_spans):
            q = np.asarray(embedder.embed([question]), dtype=np.float32)[0]
            vectors, pooled = embed_spans([d.text for d in documents], spans)
            return q, np.asarray(vectors, dtype=np.float32), [np.asarray(p) for p in pooled]
        texts = [question, *(d.text for d in documents), *(s for ss in sentences for s in ss)]
        vectors = np.asarray(embedder.embed(texts), dtype=np.float32)
        ends = np.cumsum([1 + len(documents)] + [len(ss) for ss in sentences])
        return vectors[0], vectors[1 : 1 + len(documents)], np.split(vectors, ends[:-1])[1:]

    def term_weights(self, question: str) -> dict[str, float]:
        """The question's content terms weighted by the idf (1.0 each without one)."""
        return term_weights(content_terms(question), self.idf)

    def features(
        self,
        question: str,
        documents: Sequence[Document],
        judged: Sequence[Document] = (),
    ) -> list[LocalFeatures]:
        """The complete evidence for each of ``documents``, compared with ``judged`` too."""
        check_judged(question, documents)
        context = _context_documents(judged, documents)
        if not documents:
            return []
        return self._pool(question, documents, context)[: len(documents)]

    def _pool(
        self, question: str, documents: Sequence[Document], context: Sequence[Document]
    ) -> list[LocalFeatures]:
        """The complete features of ``documents`` then ``context``, each judged among all."""
        raw = self.direct_features(question, [*documents, *context])
        return pool_features(
            self.weights,
            self.term_weights(question),
            [*documents, *context],
            raw,
            link_titles=self.link_titles,
        )

    def evaluate(self, question: str, documents: Sequence[Document]) -> Evaluation:
        """Return one graded verdict per document, in order; usage is always zero LLM calls."""
        return self.evaluate_in_context(question, documents, ())

    def evaluate_in_context(
        self,
        question: str,
        documents: Sequence[Document],
        judged: Sequence[Judged | Document],
    ) -> Evaluation:
        """Judge ``documents`` beside ``judged``, the documents judged before for the question.

        The same arguments always give the same verdicts. ``judged`` (the run's earlier
        documents, with or without their verdicts) sets the reference for the gaps and the pool
        of title links; a document of ``documents`` that is also in ``judged`` is judged once,
        as one of ``documents``. Its verdicts are read for one thing only: under a cap
        (``weights.cap``) each earlier relevant verdict takes one of the question's slots.
        """
        docs = [j.document if isinstance(j, Judged) else j for j in judged]
        check_judged(question, documents)
        context = _context_documents(docs, documents)
        if not documents:
            return Evaluation((), Usage())
        pool = self._pool(question, documents, context)
        probabilities = [self.weights.score(f) for f in pool]
        w = self.weights
        cut = keep_from(probabilities, w.threshold, w.keep_at, margin=w.margin, cap=w.cap)
        batch = probabilities[: len(documents)]
        keep = _within_cap(batch, cut, _slots_left(w.cap, judged))
        verdicts = tuple(
            self._verdict(doc, feat, p, cut, relevant=i in keep)
            for i, (doc, feat, p) in enumerate(
                zip(documents, pool[: len(documents)], batch, strict=True)
            )
        )
        log.debug(
            "local_evaluation",
            documents=len(documents),
            judged_before=len(docs),
            relevant=sum(bool(v.relevant) for v in verdicts),
        )
        return Evaluation(verdicts, Usage())

    def _verdict(
        self,
        document: Document,
        features: LocalFeatures,
        probability: float,
        cut: float,
        *,
        relevant: bool,
    ) -> Verdict:
        score = round(verdict_score(probability, cut), 4)
        if not relevant:  # above the cut but past the cap: the top of the rejected band
            score = min(score, _TOP_REJECTED)
        return Verdict(
            document.id,
            relevant,
            Relevance.HIGH if relevant else Relevance.LOW,
            score,
            # the logistic output is a probability of relevance fitted on the qrels, so the
            # confidence in a verdict is the probability that it is right
            round(probability if relevant else 1.0 - probability, 4),
            reasoning=_reasoning(features),
            # ``missing`` is what the judge says the question still needs answered; this judge
            # cannot tell that (a question word a document lacks, "name" or "per", is seldom an
            # unanswered part), so it says nothing; the reasoning lists the words it lacks
            missing=(),
        )


def _slots_left(cap: int | None, judged: Sequence[Judged | Document]) -> int | None:
    """How many more documents a judge held to ``cap`` a question may call relevant.

    The cap holds for the question, not for one call: the relevant verdicts among ``judged``
    (the run's earlier verdicts, which the loop passes) have used their slots. Plain documents
    carry no verdict and use none.
    """
    if cap is None:
        return None
    used = sum(1 for j in judged if isinstance(j, Judged) and j.verdict.relevant is True)
    return max(cap - used, 0)


def _within_cap(probabilities: Sequence[float], cut: float, slots: int | None) -> frozenset[int]:
    """The positions of the batch kept: at the cut or above, the ``slots`` most probable.

    Equal probabilities go to the earlier position, so that ``slots`` is never exceeded.
    """
    above = [i for i, p in enumerate(probabilities) if p >= cut]
    if slots is not None:
        above = sorted(above, key=lambda i: (-probabilities[i], i))[:slots]
    return frozenset(above)


def _context_documents(judged: Sequence[Document], documents: Sequence[Document]) -> list[Document]:
    """``judged`` without the documents of the batch and without repeats, in order."""
    if isinstance(judged, str | bytes) or not isinstance(judged, Sequence):
        raise InputError("judged must be a sequence of Document")
    batch = {d.id for d in documents}
    seen: set[str] = set()
    context = []
    for doc in judged:
        if not isinstance(doc, Document):
            raise InputError("judged must be a sequence of Document")
        if doc.id not in batch and doc.id not in seen:
            seen.add(doc.id)
            context.append(doc)
    return context


def verdict_score(probability: float, threshold: float) -> float:
    """Map the judge's probability onto the verdict score scale, piecewise linearly.

    The judge's verdict is yes or no, with no middle grade: its threshold lands on
    :data:`~corrective_rag.types.HIGH_FROM`, where the scale's relevant verdicts begin, and a
    rejected document scores below :data:`~corrective_rag.types.RELEVANT_FROM`. The scale is
    the verdict type's, not any filter preset's; the confidence carries how sure the judge is.
    """
    if probability < threshold:
        return RELEVANT_FROM * probability / threshold
    return HIGH_FROM + (1.0 - HIGH_FROM) * (probability - threshold) / (1.0 - threshold)


def judged_sentence_spans(text: str, limit: int) -> list[tuple[int, int]]:
    """The character spans of the (at most ``limit``) sentences the judge compares.

    A text with no sentence long enough counts as one sentence, the whole text.
    """
    return sentence_spans(text, min_chars=MIN_SENTENCE_CHARS)[:limit] or [(0, len(text))]


def check_judged(question: str, documents: Sequence[Document]) -> None:
    """Raise ``InputError`` unless ``question`` is usable and ``documents`` a sequence of them."""
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
        + (f" ({', '.join(features.matched)})" if features.matched else "")
        + (f", lacks {', '.join(features.missing)}" if features.missing else ""),
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
