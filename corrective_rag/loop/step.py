"""One source's part of an iteration: retrieve, evaluate, filter.

:func:`judge_source` searches the iteration's lanes on one retriever (the main one, or the CRAG
fallback), skips documents judged earlier, takes up to ``top_k`` new ones by the lanes' turns,
judges them against the question and files each by the filter policy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from corrective_rag.errors import LLMError, VerdictParseError
from corrective_rag.evaluate.policy import Decision, decide
from corrective_rag.llm.spent import spent_before
from corrective_rag.loop.callmode import grading_context
from corrective_rag.loop.lanes import take_turns
from corrective_rag.loop.multiquery import search_queries
from corrective_rag.loop.state import Parts, RunState, Step
from corrective_rag.protocols import ContextualEvaluator, Evaluator, Retriever
from corrective_rag.types import Document, Hit, Judged, PhaseUsage, Proposal, Usage, Verdict

__all__ = ["evaluate", "judge_source"]


def judge_source(
    parts: Parts, st: RunState, retriever: Retriever, lanes: Mapping[str, str]
) -> Step:
    """Search one source, skip what was judged, judge up to top_k new documents, filter."""
    main = retriever is parts.retriever
    k = min(st.top_k + len(st.judged), parts.candidate_limit)
    # The run's filter is the local store's: a fallback (a web search) has its own, or none.
    where = st.where if main else None
    hits = search_queries(
        retriever, tuple(lanes.values()), top_k=k, where=where, names=tuple(lanes)
    )
    left = st.document_cap(parts.docs_per_call)
    cap = st.top_k if left is None else min(st.top_k, left)
    picked = take_turns(hits, st.judged, cap, fused=len(lanes) > 1, record=st.lanes)
    taken, skipped, fresh = _take(hits, st.judged, picked, cap)
    verdicts: list[Verdict] = []
    usage = Usage()
    proposal = None
    if fresh:
        documents = [h.document for h in fresh]
        # one-call: the grading call proposes (unless the rewriter never reads a proposal)
        with grading_context(parts.call_mode, parts.rewriter, st.question, documents):
            verdicts, usage, proposal = evaluate(
                parts.evaluator, st.question, documents, st.judged_docs
            )
    # Charge the run at once, so that a fallback step in this iteration sees this spend.
    st.usage = st.usage + PhaseUsage(grading=usage)
    docs = {h.document.id: h.document for h in fresh}
    step = Step(taken, skipped, verdicts, [], [], [], usage, {}, docs, proposal)
    tally = _file(parts, st, step, fresh, picked)
    if main:  # the fallback's documents belong to no query lane
        st.lanes.update(tally)
    return step


def _take(
    hits: Sequence[Hit], judged: Mapping[str, Verdict], picked: Mapping[str, str], cap: int
) -> tuple[list[Hit], list[str], list[Hit]]:
    """The hits the iteration shows, the ids skipped as judged before, and the new ones to judge."""
    taken: list[Hit] = []
    skipped: list[str] = []
    fresh: list[Hit] = []
    seen: set[str] = set()
    for hit in hits:
        if len(fresh) >= cap:
            break
        doc_id = hit.document.id
        if doc_id in seen:
            continue  # a retriever listing one id twice: its best rank counts
        seen.add(doc_id)
        if doc_id in judged:
            skipped.append(doc_id)
        elif doc_id in picked:
            fresh.append(hit)
        else:
            continue  # a fused hit that lost its slot to the other query's turn
        taken.append(hit)
    return taken, skipped, fresh


def _file(
    parts: Parts, st: RunState, step: Step, fresh: Sequence[Hit], picked: Mapping[str, str]
) -> dict[str, tuple[int, int]]:
    """Record each verdict in the run and file its document by the policy (the filter).

    Returns each lane's (kept, judged) in this step.
    """
    tally: dict[str, tuple[int, int]] = {}
    for hit, verdict in zip(fresh, step.verdicts, strict=True):
        doc_id = hit.document.id
        st.judged[doc_id] = verdict
        st.judged_docs.append(Judged(hit.document, verdict))
        step.ranks[doc_id] = hit.rank
        decision = decide(verdict, parts.policy)
        bins = {Decision.KEEP: step.kept, Decision.DROP: step.dropped}
        bins.get(decision, step.ungraded).append(doc_id)
        lane_kept, lane_judged = tally.get(picked[doc_id], (0, 0))
        tally[picked[doc_id]] = (lane_kept + (decision is Decision.KEEP), lane_judged + 1)
    return tally


def evaluate(
    evaluator: Evaluator, question: str, documents: list[Document], judged: Sequence[Judged]
) -> tuple[list[Verdict], Usage, Proposal | None]:
    """Judge ``documents``; a missing verdict or a failed call becomes an ungraded verdict.

    An evaluator that compares with earlier documents gets the run's judged ones, so that
    its verdicts depend on this run only (never on other runs or threads).
    """
    try:
        if isinstance(evaluator, ContextualEvaluator):
            evaluation = evaluator.evaluate_in_context(question, documents, tuple(judged))
        else:
            evaluation = evaluator.evaluate(question, documents)
    except (LLMError, VerdictParseError) as exc:
        error = f"evaluator failed: {exc}"
        ungraded = [Verdict.ungraded(d.id, error) for d in documents]
        return ungraded, spent_before(exc) + Usage(failed_calls=1), None
    by_id: dict[str, Verdict] = {}
    for verdict in evaluation.verdicts:
        by_id.setdefault(verdict.document_id, verdict)
    missing = "evaluator returned no verdict for this document"
    verdicts = [by_id.get(d.id) or Verdict.ungraded(d.id, missing) for d in documents]
    proposal = evaluation.proposal if isinstance(evaluation.proposal, Proposal) else None
    return verdicts, evaluation.usage, proposal
