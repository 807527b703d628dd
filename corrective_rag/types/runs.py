"""What a run records and returns: each iteration's record, the kept documents, the result.

:func:`record_fields` is the flat form of an iteration record that the ``iteration_finished``
log event carries.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from corrective_rag.types.documents import Document, Retrieved, _frozen_mapping
from corrective_rag.types.rewrites import Rewrite
from corrective_rag.types.usage import PhaseUsage, Usage
from corrective_rag.types.verdicts import Verdict


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
