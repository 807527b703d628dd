"""The orchestrator's working state: one run's mutable record and one source's step.

Private to the loop; what a run returns is the frozen :class:`~corrective_rag.types.RunResult`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from corrective_rag.loop.budget import Budget
from corrective_rag.types import (
    Document,
    Hit,
    Judged,
    KeptDocument,
    PhaseUsage,
    Proposal,
    Usage,
    Verdict,
)

__all__ = ["Run", "Step", "kept_order", "proposal_of"]


@dataclass(slots=True)
class Run:
    """Mutable state of one run (the result it becomes is frozen)."""

    question: str
    where: Mapping[str, Any] | None
    top_k: int
    budget: Budget | None
    started: float
    judged: dict[str, Verdict] = field(default_factory=dict)
    judged_docs: list[Judged] = field(default_factory=list)
    kept: dict[str, KeptDocument] = field(default_factory=dict)
    tried: list[str] = field(default_factory=list)
    usage: PhaseUsage = field(default_factory=PhaseUsage)
    retrieved_sets: list[frozenset[str]] = field(default_factory=list)
    rejected: str | None = None  # why the last rewrite was rejected (next hits searched instead)
    # per query lane ("question", "rewrite"): (kept, judged) the last time it was judged, so that
    # a rewrite wins slots in the next iteration by having found relevant documents
    lanes: dict[str, tuple[int, int]] = field(default_factory=dict)
    # the run's logger, bound to its run id: every event of a run says which run (batch threads
    # run many at once), so no part of the loop logs through the unbound module logger
    log: Any = None
    refine_error: str | None = None  # knowledge refinement failed: why (the result is kept)
    feedback: str | None = None  # the free feedback query searched next (Rewrite.feedback)

    def document_cap(self, per_call: int | None) -> int | None:
        """Documents the evaluator may still be sent under the call budget (``None``: any)."""
        if self.budget is None:
            return None
        return self.budget.documents_left(self.usage.total, per_call)

    def spent(self) -> str | None:
        """Which budget limit is reached, if any."""
        if self.budget is None:
            return None
        return self.budget.exhausted(self.usage.total, time.perf_counter() - self.started)


@dataclass(slots=True)
class Step:
    """What one source (local or fallback) contributed to an iteration."""

    hits: list[Hit]
    skipped: list[str]
    verdicts: list[Verdict]
    kept: list[str]
    dropped: list[str]
    ungraded: list[str]
    usage: Usage
    ranks: dict[str, int]
    docs: dict[str, Document]
    proposal: Proposal | None = None  # the evaluator's proposed next query (judge and propose)


def proposal_of(steps: Sequence[Step]) -> Proposal | None:
    """The iteration's proposed next query: the first source's that made one."""
    return next((s.proposal for s in steps if s.proposal is not None), None)


def kept_order(kept: KeptDocument) -> tuple[float, int, int, str]:
    """Sort key of the kept documents: best score first, then rank, iteration and id."""
    return (-(kept.verdict.score or 0.0), kept.rank, kept.iteration, kept.document.id)
