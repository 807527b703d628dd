"""What a judge says of a document: the one score scale, the verdict and its bounds, an evaluation.

The verdict contract lives here (:class:`Verdict`), with what an evaluator returns
(:class:`Evaluation`, :class:`Proposal`) and a document beside its verdict (:class:`Judged`).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from corrective_rag.errors import CUT_STORED, InputError, cut_text
from corrective_rag.types.documents import Document
from corrective_rag.types.usage import Usage

# The verdict contract (see Verdict): the one score scale every evaluator writes, the parser
# (corrective_rag.evaluate.normalise) maps model replies onto and the filter policies read.
# These two numbers are the label boundaries; every other module takes them from here.
RELEVANT_FROM = 0.5  # a score from here is a relevant verdict (medium or high); below, irrelevant
HIGH_FROM = 0.7  # a score from here is high relevance, as CRAG's "correct" and the LLM prompt's


class Relevance(str, enum.Enum):
    """Relevance label on the evaluator's one scale."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


def missing_items(value: object, document_id: str = "") -> tuple[str, ...]:
    """``Verdict.missing`` as a tuple of stripped, non-empty items.

    ``None`` is nothing missing; a string is split at commas and semicolons; a list or tuple
    must hold strings.
    """
    if value is None:
        return ()
    if isinstance(value, str):
        value = re.split(r"[,;]", value)
    if not isinstance(value, tuple | list) or not all(isinstance(v, str) for v in value):
        raise InputError(f"verdict for {document_id!r}: missing must be a tuple of strings")
    return tuple(item for v in value if (item := " ".join(v.split())))


# What one verdict may carry (issue 31): a model's reply is untrusted, and a verdict is
# written to every results file and report. The grading prompt asks for a reasoning of at most
# 12 words (about 80 characters) and a few short missing terms; these caps leave ten times that
# and more, so that a model that ignores the prompt a little loses nothing, while a reply of
# 100 KB of reasoning costs a results file 1 KB. A cut text ends with how long it was.
MAX_REASONING_CHARS = 1000
MAX_MISSING_ITEMS = 10  # the stop rule and the rewriters read the first (heaviest) few
MAX_MISSING_CHARS = 100  # a term or short phrase, not a sentence
SCORE_SOURCES = ("verbal", "logprob")  # Verdict.score_source: written fields, token probabilities
MAX_RAW_CHARS = 4000  # what the model said, kept only to show why a verdict is ungraded


@dataclass(frozen=True, slots=True)
class Verdict:
    """An evaluator's judgement of one document against the original question.

    A verdict is either *graded* (``relevant``, ``label``, ``score`` and ``confidence`` set) or
    *ungraded* (all four ``None``, ``error`` says why, ``raw`` keeps what the model said). An
    ungraded verdict is never counted as relevant nor as irrelevant.

    The verdict contract, which the parser, the filter policy, both evaluators and both
    rewriters follow:

    * ``relevant`` is the evaluator's decision and has the last word against keeping: a
      verdict that says not relevant is never kept, whatever its score or confidence. A
      relevant verdict is kept only when its score and confidence also pass the filter policy
      (:func:`corrective_rag.evaluate.policy.decide`), so a relevant verdict with a low score
      is dropped too: disagreement between the fields always resolves toward dropping.
    * ``score`` grades how relevant, on one 0..1 scale (see below). A model's reply on
      another scale is mapped onto it only when the scale is known: declared (``"8/10"``,
      ``"85%"``, a ``scale`` key), or a bare number in (1, 10], read as 0-10; a bare number
      above 10 is refused, never guessed to be a percentage.
    * ``label`` names the score's band: ``LOW`` below ``RELEVANT_FROM``, ``MEDIUM`` from it,
      ``HIGH`` from ``HIGH_FROM``. A parsed label that disagrees with the score is kept as the
      model said it (it is recorded, not used to decide).
    * ``confidence`` is how likely the verdict (relevant or not) is right. The policy keeps a
      medium score only when confident, and the stop rule sums the kept verdicts' confidences
      (:func:`corrective_rag.loop.stopping.stop_rule`); an evaluator should make it a
      probability of being right (a calibrated one where it can), not a constant.
    * What the loop did with a verdict (kept, dropped, ungraded) is the policy's decision, not
      the verdict's: rewriters learn from the documents the policy kept
      (:attr:`RewriteRequest.kept_ids`), never from ``relevant`` alone.

    Attributes:
        score: graded relevance, 0..1, on the one scale every evaluator writes and the filter
            policies (:mod:`corrective_rag.evaluate.policy`) read: below ``RELEVANT_FROM``
            (0.5) irrelevant, from it up to ``HIGH_FROM`` (0.7) partly relevant (medium), from
            ``HIGH_FROM`` relevant (high). An evaluator with a yes/no decision and no middle
            grade (the local judge) scores its relevant verdicts from ``HIGH_FROM``.
        confidence: how likely the verdict (relevant or not) is right, 0..1.
        missing: what the judge says the question still needs answered that the document
            does not answer, as short terms or phrases, heaviest first (``()``: nothing, or not
            said; a judge that cannot tell, such as the offline one, says nothing: a list of
            question words the document lacks is not this). The stop rule and the
            rewriters compare these items as given; a string is taken as one comma- or
            semicolon-separated list (how older records and LLM replies write it). At most
            ``MAX_MISSING_ITEMS`` items of at most ``MAX_MISSING_CHARS`` characters each.
        score_source: where relevant, score and confidence came from: ``"verbal"`` (what the
            judge wrote or computed) or ``"logprob"`` (the model's token probabilities).
        probability: the probability the model put on ``relevant: true`` (its token mass,
            read from the reply), or ``None`` when none was read. Recorded beside a verbal
            verdict for inspection and for ``judge-check``; the one that decided a
            ``"logprob"`` verdict (:mod:`corrective_rag.evaluate.scoring`).

    Types are checked, not only ranges: ``relevant`` is a ``bool`` (``"false"`` or ``1`` is
    refused, never kept as truthy), ``label`` a :class:`Relevance`, ``score`` and
    ``confidence`` real numbers (not ``bool``, not NaN nor infinite) stored as ``float``;
    ``reasoning`` is a string and ``error`` and ``raw`` strings or ``None``. A reasoning longer
    than ``MAX_REASONING_CHARS`` and a raw reply longer than ``MAX_RAW_CHARS`` are cut, ending
    with their length (:func:`~corrective_rag.errors.cut_text`, ``CUT_STORED``).

    Raises:
        InputError: a field of the wrong type or out of range.
    """

    document_id: str
    relevant: bool | None
    label: Relevance | None
    score: float | None  # 0..1
    confidence: float | None  # 0..1
    reasoning: str = ""
    missing: tuple[str, ...] = ()
    error: str | None = None
    raw: str | None = None
    # Where score and confidence came from: "verbal" (the fields the model wrote, or the
    # offline judge's own) or "logprob" (the model's token probabilities, evaluate/logprobs.py).
    score_source: str = "verbal"
    probability: float | None = None  # P(relevant: true) read from the tokens, if any

    def __post_init__(self) -> None:
        if self.score_source not in SCORE_SOURCES:
            raise InputError(f"verdict score_source must be one of {SCORE_SOURCES}")
        if not isinstance(self.document_id, str):
            raise InputError(f"verdict document_id must be a string, got {self.document_id!r}")
        where = f"verdict for {self.document_id!r}"
        missing = missing_items(self.missing, self.document_id)[:MAX_MISSING_ITEMS]
        object.__setattr__(
            self, "missing", tuple(cut_text(m, MAX_MISSING_CHARS, CUT_STORED) for m in missing)
        )
        graded = (self.relevant, self.label, self.score, self.confidence)
        if any(v is None for v in graded) and any(v is not None for v in graded):
            raise InputError(
                f"{where}: relevant, label, score and confidence "
                "must be all set (graded) or all None (ungraded)"
            )
        if self.relevant is not None and not isinstance(self.relevant, bool):
            raise InputError(
                f"{where}: relevant must be True, False or None, got {self.relevant!r}"
            )
        if self.label is not None and not isinstance(self.label, Relevance):
            raise InputError(f"{where}: label must be a Relevance or None, got {self.label!r}")
        for name in ("score", "confidence", "probability"):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise InputError(f"{where}: {name} must be a number in 0..1, got {value!r}")
            if not 0.0 <= value <= 1.0:  # NaN fails this too
                raise InputError(f"{where}: {name} {value} not in 0..1")
            object.__setattr__(self, name, float(value))
        for name in ("reasoning", "error", "raw"):
            value = getattr(self, name)
            if not isinstance(value, str) and (name == "reasoning" or value is not None):
                raise InputError(f"{where}: {name} must be a string, got {value!r}")
        object.__setattr__(
            self, "reasoning", cut_text(self.reasoning, MAX_REASONING_CHARS, CUT_STORED)
        )
        if self.raw is not None:
            object.__setattr__(self, "raw", cut_text(self.raw, MAX_RAW_CHARS, CUT_STORED))
        if self.relevant is None and not self.error:
            raise InputError(f"ungraded verdict for {self.document_id!r} needs an error message")

    @property
    def graded(self) -> bool:
        """True when the evaluator produced a usable judgement."""
        return self.relevant is not None

    @classmethod
    def ungraded(cls, document_id: str, error: str, raw: str | None = None) -> Verdict:
        """Build the explicit 'could not grade' verdict."""
        return cls(document_id, None, None, None, None, error=error, raw=raw)


@dataclass(frozen=True, slots=True)
class Proposal:
    """A judge-and-propose evaluator's next query, made in the grading call itself.

    ``lacking`` says what the judged documents still lack for the question; ``query`` is the
    search the grader proposes for it. A rewriter checks it like its own candidate.
    """

    query: str
    lacking: str = ""


@dataclass(frozen=True, slots=True)
class Evaluation:
    """What an evaluator returns: one verdict per document sent, in the same order, and usage.

    ``proposal`` is set only by an evaluator that proposes the next query in its grading call.
    """

    verdicts: tuple[Verdict, ...]
    usage: Usage = Usage()
    proposal: Proposal | None = None


@dataclass(frozen=True, slots=True)
class Judged:
    """A document together with its verdict."""

    document: Document
    verdict: Verdict
