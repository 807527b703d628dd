"""What a rewriter takes and returns: the request with the judged documents, and the rewrite."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from corrective_rag.types.usage import Usage
from corrective_rag.types.verdicts import Judged, Proposal


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
