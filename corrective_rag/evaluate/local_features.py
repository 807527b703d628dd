"""What the local evaluator measures of a document, and the weights that turn it into a score.

:class:`LocalFeatures` is the evidence found for one document (see
:mod:`corrective_rag.evaluate.local` for what each feature means); :class:`LocalWeights` is the
logistic combination over the numeric features and the decision threshold.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

__all__ = ["FEATURES", "LocalFeatures", "LocalWeights"]


@dataclass(frozen=True, slots=True)
class LocalFeatures:
    """The evidence the local evaluator found for one document."""

    dense: float  # cosine(question, document)
    sentence: float  # max cosine(question, sentence)
    coverage: float  # idf-weighted share of question terms in the document, 0..1
    linked: float  # strongest direct evidence of a batch document naming this one's title
    best_sentence: str
    matched: tuple[str, ...]
    missing: tuple[str, ...]
    # the first three less their best value among the question's judged documents
    dense_gap: float = 0.0
    sentence_gap: float = 0.0
    coverage_gap: float = 0.0
    named: float = 0.0  # 1.0 when the question names the document's title
    bridge: float = 0.0  # linked x (1 - own direct score): a link to a document unlike the question
    # like bridge, with each namer's score times the question cosine of its sentence naming this
    bridge_sentence: float = 0.0
    # the best namer's score times the weighted share of the question terms it lacks that this has
    bridge_complement: float = 0.0
    # 1 - own direct score when the best document judged for the question names this one
    bridge_top: float = 0.0
    # linked x how far below even odds the document's own direct evidence is (in logits)
    bridge_depth: float = 0.0
    # BM25 of the question's terms in the document over the best BM25 among the question's judged
    # documents, 0..1 (term frequencies and length, which the coverage share ignores)
    bm25: float = 0.0
    # each compared sentence with its cosine to the question (what the title links look into)
    sentences: tuple[tuple[str, float], ...] = ()
    # the document's length in terms and how often it holds each question term (for ``bm25``)
    length: int = 0
    counts: tuple[tuple[str, int], ...] = ()

    def vector(self) -> tuple[float, ...]:
        """The numeric features in the order of :class:`LocalWeights`."""
        return tuple(getattr(self, name) for name in FEATURES)


@dataclass(frozen=True, slots=True)
class LocalWeights:
    """Logistic weights over :class:`LocalFeatures`, and how a question's documents are cut.

    ``threshold`` is a floor: above it, the expected-F1 cut of the question's judged documents
    decides (:func:`~corrective_rag.evaluate.selection.keep_from`), except that a document at
    least ``keep_at`` likely to be relevant is kept (the loop gathers evidence, and a multi-hop
    question's second paragraph beside a stand-out first one is such a document). Two bounds
    relative to the question's best document hold any keep back: its logit within ``margin`` of
    the best's, and at most ``cap`` documents (``None``: no cap).
    """

    bias: float
    dense: float
    sentence: float
    coverage: float
    linked: float
    threshold: float = 0.5
    dense_gap: float = 0.0
    sentence_gap: float = 0.0
    coverage_gap: float = 0.0
    named: float = 0.0
    bridge: float = 0.0
    bridge_sentence: float = 0.0
    bridge_complement: float = 0.0
    bridge_top: float = 0.0
    bridge_depth: float = 0.0
    bm25: float = 0.0
    keep_at: float = 0.3
    margin: float = math.inf
    cap: int | None = None  # None: no cap

    def score(self, features: LocalFeatures) -> float:
        """The logistic score of ``features``, 0..1."""
        z = self.bias + sum(
            getattr(self, name) * x for name, x in zip(FEATURES, features.vector(), strict=True)
        )
        return 1.0 / (1.0 + math.exp(-z))


# The numeric features, named alike in LocalFeatures and LocalWeights, in the weights' order.
_CUT = ("bias", "threshold", "keep_at", "margin", "cap")  # not weights of a feature
FEATURES = tuple(f.name for f in fields(LocalWeights) if f.name not in _CUT)
