"""The loop's working state: what a run is made of, one run's mutable record, one source's step.

Private to the loop; what a run returns is the frozen :class:`~corrective_rag.types.RunResult`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from corrective_rag.evaluate.policy import FilterPolicy
from corrective_rag.loop.budget import Budget
from corrective_rag.loop.callmode import CallMode
from corrective_rag.protocols import Evaluator, Retriever, Rewriter
from corrective_rag.rewrite.local import LocalRewriter
from corrective_rag.store.hybrid import QueryVectors
from corrective_rag.types import (
    Document,
    Hit,
    Judged,
    KeptDocument,
    PhaseUsage,
    Proposal,
    Rewrite,
    RewriteSource,
    Usage,
    Verdict,
)

__all__ = ["Parts", "RunState", "Step", "kept_order", "proposal_of"]


@dataclass(frozen=True, slots=True)
class Parts:
    """What the orchestrator hands each run: its components and settings, checked.

    ``call_mode`` says whether the grading calls propose (:mod:`corrective_rag.loop.callmode`);
    ``feedback`` makes the feedback lane's query, ``None`` when the loop searches no such lane;
    ``lexical`` names the lanes searched by BM25 alone where the retriever can
    (:class:`~corrective_rag.loop.lanes.Lanes`).
    """

    retriever: Retriever
    evaluator: Evaluator
    rewriter: Rewriter
    fallback: Retriever | None
    policy: FilterPolicy
    candidate_limit: int
    docs_per_call: int | None
    feedback: LocalRewriter | None
    call_mode: CallMode = "one-call"
    lexical: frozenset[str] = frozenset()


@dataclass(slots=True)
class RunState:
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
    # the run's query embeddings by text: no text is embedded twice in a run, whatever the
    # store's memo of searches forgets (a search with a filter, an evicted or deeper one)
    query_vectors: QueryVectors = field(default_factory=dict)

    def keep(self, steps: Sequence[Step], index: int) -> None:
        """Keep the iteration's books: kept documents and the retrieved set.

        The steps' kept documents join the run's (one kept before stays as it was), and the main
        retriever's set (``steps[0]``) joins ``retrieved_sets``.
        """
        for step in steps:
            for doc_id in step.kept:
                self.kept.setdefault(
                    doc_id,
                    KeptDocument(step.docs[doc_id], self.judged[doc_id], index, step.ranks[doc_id]),
                )
        self.retrieved_sets.append(frozenset(h.document.id for h in steps[0].hits))

    def carry(self, rewrite: Rewrite | None, query: str) -> str:
        """The next iteration's query after ``rewrite``; the queries tried and lanes follow it."""
        if rewrite is not None and rewrite.query is not None:
            query = rewrite.query
            self.tried.append(query)
            self.rejected = None
        elif rewrite is not None and rewrite.source is RewriteSource.NEXT_HITS:
            query = self.question  # no acceptable rewrite: the question's next-best unjudged hits
            self.rejected = rewrite.rejected
        # the free feedback query (no LLM call) is searched as a lane of its own
        self.feedback = rewrite.feedback if rewrite is not None else None
        if self.feedback is not None:
            self.tried.append(self.feedback)
        return query

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
