"""Frozen values that flow through the loop: documents, hits, verdicts, usage, records, results.

Everything here is immutable (``frozen=True, slots=True``) and holds only JSON-friendly fields
(str, int, float, bool, None, enums of str, tuples and mappings of those), so that
:mod:`corrective_rag.runs.records.history` can round-trip a whole run through JSON without loss.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from corrective_rag.errors import CUT_STORED, InputError, cut_text
from corrective_rag.inputs import inexact_int, surrogate_at

# what the root re-exports from here is listed there, not here
__all__ = [
    "HIGH_FROM",
    "RELEVANT_FROM",
    "Answer",
    "ChatReply",
    "CragAction",
    "FallbackMode",
    "Hit",
    "Judged",
    "KeptDocument",
    "LegScore",
    "PhaseUsage",
    "Proposal",
    "Retrieved",
    "RewriteSource",
    "Strip",
    "Usage",
    "missing_items",
    "record_fields",
]

MAX_ID_LENGTH = 512  # chromadb accepts longer ids, but ids are shown in tables and logs


def _frozen_mapping(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(value or {}))


@dataclass(frozen=True, slots=True)
class Document:
    """A unit of retrievable text.

    Attributes:
        id: unique, non-empty, at most 512 characters, no NUL and no control characters.
        text: non-empty, not only whitespace, no NUL characters; neither id nor text may hold
            a lone surrogate (text that is not valid Unicode).
        metadata: flat mapping of str to str / int / float / bool (what chromadb can filter on);
            an int within +-2**53 (``inputs.MAX_EXACT_INT``), which the stores compare exactly.
    """

    id: str
    text: str
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id.strip():
            raise InputError(f"document id must be a non-empty string, got {self.id!r}")
        if len(self.id) > MAX_ID_LENGTH:
            raise InputError(
                f"document id longer than {MAX_ID_LENGTH} characters: {self.id[:40]!r}..."
            )
        if any(ord(c) < 32 for c in self.id):
            raise InputError(f"document id contains control characters: {self.id!r}")
        if not isinstance(self.text, str):
            raise InputError(
                f"document {self.id!r}: text must be a string, got {type(self.text).__name__}"
            )
        if not self.text.strip():
            raise InputError(f"document {self.id!r}: text is empty or only whitespace")
        if "\x00" in self.text:
            raise InputError(f"document {self.id!r}: text contains NUL characters")
        for part in ("id", "text"):
            position = surrogate_at(getattr(self, part))
            if position is not None:  # cannot be stored, embedded or written as UTF-8
                raise InputError(
                    f"document {self.id!r}: {part} is not valid Unicode "
                    f"(lone surrogate at character {position})"
                )
        meta = self.metadata if self.metadata is not None else {}
        if not isinstance(meta, Mapping):
            raise InputError(f"document {self.id!r}: metadata must be a mapping")
        for key, value in meta.items():
            if not isinstance(key, str) or not key:
                raise InputError(f"document {self.id!r}: metadata keys must be non-empty strings")
            if not isinstance(value, str | int | float | bool):
                raise InputError(
                    f"document {self.id!r}: metadata {key!r} must be str, int, float or bool, "
                    f"got {type(value).__name__}"
                )
            if inexact_int(value):  # the stores would compare it as another number
                raise InputError(
                    f"document {self.id!r}: metadata {key!r} is an integer past 2**53, which "
                    "the stores cannot compare exactly; store it as a string"
                )
        object.__setattr__(self, "metadata", _frozen_mapping(meta))

    def __hash__(self) -> int:
        return hash((self.id, self.text))


@dataclass(frozen=True, slots=True)
class LegScore:
    """Where one retrieval leg placed a document: ``leg`` is e.g. ``"bm25"`` or ``"dense"``."""

    leg: str
    rank: int  # 1-based
    score: float


@dataclass(frozen=True, slots=True)
class Hit:
    """A retrieved document with its fused score and rank and each leg's own rank and score."""

    document: Document
    score: float
    rank: int  # 1-based, after fusion
    legs: tuple[LegScore, ...] = ()


@dataclass(frozen=True, slots=True)
class Retrieved:
    """A hit as recorded in the history: the document id without its text."""

    document_id: str
    score: float
    rank: int
    legs: tuple[LegScore, ...] = ()

    @classmethod
    def from_hit(cls, hit: Hit) -> Retrieved:
        """Drop the document text from a hit, keeping ranks and scores."""
        return cls(hit.document.id, hit.score, hit.rank, hit.legs)


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
class Usage:
    """LLM usage of one call or a sum of calls."""

    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latency_seconds: float = 0.0  # summed over calls (not wall time when calls overlap)
    failed_calls: int = 0

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(
            self.llm_calls + other.llm_calls,
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.cost_usd + other.cost_usd,
            self.latency_seconds + other.latency_seconds,
            self.failed_calls + other.failed_calls,
        )


@dataclass(frozen=True, slots=True)
class ChatReply:
    """One chat completion: the assistant's text, the model that answered, and the call's usage."""

    text: str
    model: str = ""
    usage: Usage = Usage()
    finish_reason: str | None = None
    response_id: str = ""  # the server's id for the completion (``chatcmpl-...``), when it sent one
    # The reply's tokens with their log probabilities, when asked for and returned (``None``:
    # not returned); read by evaluate/logprobs.py.
    logprobs: tuple[TokenLogprob, ...] | None = None


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """One generated token, its log probability, and the most likely tokens at its place.

    Attributes:
        token: the token's text (the tokens of a reply spell its text).
        logprob: its natural log probability as the server sent it: a place holding NaN, an
            infinity or a value above 0 is refused by the readers
            (:mod:`corrective_rag.evaluate.logprobs`).
        top: ``(token, logprob)`` of the most likely tokens at this place, as the server sent.
    """

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True, slots=True)
class PhaseUsage:
    """Usage split by the phase that spent it."""

    grading: Usage = Usage()
    rewriting: Usage = Usage()
    generation: Usage = Usage()
    refinement: Usage = Usage()

    @property
    def total(self) -> Usage:
        """All phases summed."""
        return self.grading + self.rewriting + self.generation + self.refinement

    def __add__(self, other: PhaseUsage) -> PhaseUsage:
        if not isinstance(other, PhaseUsage):
            return NotImplemented
        return PhaseUsage(
            self.grading + other.grading,
            self.rewriting + other.rewriting,
            self.generation + other.generation,
            self.refinement + other.refinement,
        )


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


@dataclass(frozen=True, slots=True)
class RewriteRequest:
    """What a rewriter gets: the original question, every query tried so far and the feedback.

    ``kept_ids`` are the documents the filter policy kept (the loop always sets it): a rewriter
    learns from these only, and treats every other graded document as dropped, whatever its
    verdict said. ``None`` (a request built by hand) falls back to the verdicts' ``relevant``.
    """

    question: str
    tried_queries: tuple[str, ...]
    judged: tuple[Judged, ...]
    proposal: Proposal | None = None  # the evaluator's proposed next query, to check first
    kept_ids: frozenset[str] | None = None

    def kept(self) -> tuple[Judged, ...]:
        """The judged documents the policy kept, in judging order."""
        if self.kept_ids is None:
            return tuple(j for j in self.judged if j.verdict.relevant)
        return tuple(j for j in self.judged if j.document.id in self.kept_ids)

    def dropped(self) -> tuple[Judged, ...]:
        """The graded documents the policy did not keep, in judging order."""
        kept = {j.document.id for j in self.kept()}
        return tuple(j for j in self.judged if j.verdict.graded and j.document.id not in kept)


class RewriteSource(str, enum.Enum):
    """What produced the next iteration's search."""

    REWRITER = "rewriter"  # the rewriter's own query (an LLM call for the LLM rewriter)
    PROPOSAL = "proposal"  # the evaluator's proposal from its grading call, checked: no call
    NEXT_HITS = "next_hits"  # no acceptable query: the question's next-best unjudged hits


@dataclass(frozen=True, slots=True)
class Rewrite:
    """A rewriter's answer.

    ``query`` is ``None`` when no acceptable rewrite was made; ``rejected`` then says why (for
    example the drift guard refused a candidate, which is kept in ``candidate``). ``source``
    says what produced the next search (a rejected rewrite: ``NEXT_HITS`` once the loop goes on
    with the question's next-best unjudged hits). ``feedback`` is a further query made with no
    LLM call from the kept documents (the local rewriter's bridge terms), searched as a lane of
    its own beside ``query`` and the question's next hits.
    """

    query: str | None
    rationale: str = ""
    rejected: str | None = None
    candidate: str | None = None
    usage: Usage = Usage()
    source: RewriteSource = RewriteSource.REWRITER
    feedback: str | None = None


class CragAction(str, enum.Enum):
    """CRAG's per-iteration decision from the verdict scores (Yan et al. 2024)."""

    CORRECT = "correct"
    AMBIGUOUS = "ambiguous"
    INCORRECT = "incorrect"


class FallbackMode(str, enum.Enum):
    """How the fallback source was used in an iteration."""

    SUPPLEMENTED = "supplemented"
    REPLACED = "replaced"
    FAILED = "failed"  # the fallback raised an error: the local results stand
    SKIPPED = "skipped"  # not asked: its provider asked to wait (Retry-After); local results stand
    EMPTY = "empty"  # asked, returned nothing: the local results stand


class StopReason(str, enum.Enum):
    """Why a run ended; reaching a cap is a stop reason, never an exception."""

    # at least min_relevant relevant keeps, their confidences summing to
    # min_relevant * stop_confidence (the expected number of relevant keeps)
    ENOUGH_RELEVANT = "enough_relevant"
    # min_relevant kept, not that surely, and the last iteration kept nothing new:
    # the run stopped searching, but what it kept is not confirmed (not a success)
    KEPT_UNCONFIDENT = "kept_unconfident"
    ITERATION_CAP = "iteration_cap"
    NO_PROGRESS = "no_progress"
    REWRITE_FAILED = "rewrite_failed"
    BUDGET_EXHAUSTED = "budget_exhausted"


@dataclass(frozen=True, slots=True)
class Strip:
    """A refined piece of a kept document (CRAG decompose-then-recompose)."""

    document_id: str
    start: int  # character offsets into the document text
    end: int
    text: str
    score: float


@dataclass(frozen=True, slots=True)
class KeptDocument:
    """A document kept as relevant, with the verdict that kept it and where it was found."""

    document: Document
    verdict: Verdict
    iteration: int  # 1-based iteration that first retrieved it
    rank: int  # fused rank in that iteration

    @property
    def score(self) -> float:
        """The verdict's score: a kept document's verdict is always graded."""
        return float(self.verdict.score or 0.0)

    @property
    def confidence(self) -> float:
        """The verdict's confidence (graded, as :attr:`score`)."""
        return float(self.verdict.confidence or 0.0)

    @property
    def reasoning(self) -> str:
        """Why the evaluator judged it relevant, in its own words ('' if it gave none)."""
        return self.verdict.reasoning


@dataclass(frozen=True, slots=True)
class Answer:
    """A generated answer and its grounding check."""

    text: str
    cited_ids: tuple[str, ...] = ()
    abstained: bool = False
    supported: bool | None = None  # None: no support check was run
    regenerated: bool = False
    usage: Usage = Usage()


@dataclass(frozen=True, slots=True)
class IterationRecord:
    """Everything that happened in one iteration of the loop."""

    index: int  # 1-based
    query: str  # the query this iteration used (the original question in iteration 1)
    searched: tuple[str, ...]  # every query string actually sent to the retriever
    retrieved: tuple[Retrieved, ...]
    skipped_ids: tuple[str, ...]  # retrieved but already judged in an earlier iteration
    verdicts: tuple[Verdict, ...]
    kept_ids: tuple[str, ...]
    dropped_ids: tuple[str, ...]
    ungraded_ids: tuple[str, ...]
    action: CragAction | None
    fallback: FallbackMode | None
    rewrite: Rewrite | None  # the rewrite made at the end of this iteration, if any
    usage: PhaseUsage
    seconds: float


@dataclass(frozen=True, slots=True)
class RunResult:
    """The frozen outcome of ``CorrectiveRAGOrchestrator.run``."""

    run_id: str
    question: str
    final_query: str
    kept: tuple[KeptDocument, ...]
    stop_reason: StopReason
    stop_detail: str
    history: tuple[IterationRecord, ...]
    usage: PhaseUsage
    seconds: float
    policy: Mapping[str, Any] = field(default_factory=dict)
    answer: Answer | None = None
    strips: tuple[Strip, ...] = ()
    started_at: str = ""  # ISO 8601, UTC
    # why knowledge refinement failed (its LLM call), or None: the answer used whole documents
    refinement_error: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "policy", _frozen_mapping(self.policy))

    @property
    def iterations(self) -> int:
        """Number of iterations run."""
        return len(self.history)

    @property
    def kept_ids(self) -> tuple[str, ...]:
        """Ids of the kept documents, best first."""
        return tuple(k.document.id for k in self.kept)


def record_fields(record: IterationRecord) -> dict[str, Any]:
    """An iteration record as flat, simple values: the ``iteration_finished`` log event's fields.

    Ids and queries stay lists of strings; enums become their values; usage is the iteration's
    total over phases.
    """
    usage = record.usage.total
    rewrite = record.rewrite
    return {
        "iteration": record.index,
        "query": record.query,
        "searched": list(record.searched),
        "retrieved": len(record.retrieved),
        "retrieved_ids": [r.document_id for r in record.retrieved],
        "skipped_ids": list(record.skipped_ids),
        "judged": len(record.verdicts),
        "kept_ids": list(record.kept_ids),
        "dropped_ids": list(record.dropped_ids),
        "ungraded_ids": list(record.ungraded_ids),
        "action": record.action.value if record.action else None,
        "fallback": record.fallback.value if record.fallback else None,
        "rewrite": rewrite.query if rewrite else None,
        "rewrite_rationale": rewrite.rationale if rewrite else None,
        "rewrite_rejected": rewrite.rejected if rewrite else None,
        "rewrite_source": rewrite.source.value if rewrite else None,
        "rewrite_feedback": rewrite.feedback if rewrite else None,
        "llm_calls": usage.llm_calls,
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "cost_usd": usage.cost_usd,
        "seconds": record.seconds,
    }
