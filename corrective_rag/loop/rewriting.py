"""The rewrite stage: ask the rewriter for the next query, add the feedback lane's, check both.

The rewriter is asked with everything the run knows (:class:`~corrective_rag.types.
RewriteRequest`: the question, the queries tried, the judged documents, the evaluator's
proposal, the kept ids). What it answers is checked here, not trusted: a rewriter that raises
gives a rejected rewrite, and a query that is empty or is no acceptable query text (NUL, a lone
surrogate) is rejected. A rejected rewrite does not end the run: the next iteration judges the
question's next-best unjudged hits (``RewriteSource.NEXT_HITS``), unless :func:`~corrective_rag.
loop.stopping.decide_stop` says that the model is not answering at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from corrective_rag.errors import InputError, LLMError, VerdictParseError
from corrective_rag.inputs import check_query
from corrective_rag.llm.spent import spent_before
from corrective_rag.loop.feedback import feedback_query
from corrective_rag.loop.state import Parts, RunState, Step, proposal_of
from corrective_rag.loop.stopping import Facts, Moment, Stop, decide_stop
from corrective_rag.observe.spans import stage
from corrective_rag.protocols import Rewriter
from corrective_rag.types import PhaseUsage, Rewrite, RewriteRequest, RewriteSource, Usage

__all__ = ["next_query"]


def next_query(
    parts: Parts, st: RunState, steps: Sequence[Step], index: int
) -> tuple[Rewrite, Stop | None]:
    """The iteration's rewrite (with the feedback lane's query) and the stop it leads to, if any."""
    request = RewriteRequest(
        st.question,
        tuple(st.tried),
        tuple(st.judged_docs),
        proposal_of(steps),
        kept_ids=frozenset(st.kept),  # rewriters learn from what the policy kept only
    )
    answer = ask(parts.rewriter, request)
    feedback = None if parts.feedback is None else feedback_query(parts.feedback, request, answer)
    rewrite = replace(checked(answer), feedback=feedback)
    st.usage = st.usage + PhaseUsage(rewriting=rewrite.usage)
    facts = Facts(Moment.REWRITTEN, index, rewrite=rewrite, grading_failed=_grading_failed(steps))
    ended = decide_stop(facts, parts.policy)
    if ended is None and rewrite.query is None:
        # a rejected rewrite does not end the run: the next iteration judges the question's
        # next-best unjudged hits (rewrite_failed when there are none)
        rewrite = replace(rewrite, source=RewriteSource.NEXT_HITS)
    return rewrite, ended


def ask(rewriter: Rewriter, request: RewriteRequest) -> Rewrite:
    """The rewriter's answer; one that raised an LLM or parse error is a rejected rewrite."""
    try:
        with stage("rewrite"):
            return rewriter.rewrite(request)
    except (LLMError, VerdictParseError) as exc:
        # a rejected rewrite, as LLMRewriter's own failed call gives: the run goes on with the
        # question's next hits, unless grading failed in the same iteration (loop/stopping.py)
        usage = spent_before(exc) + Usage(failed_calls=1)
        return Rewrite(None, rejected=f"rewriter failed: {exc}", usage=usage)


def checked(rewrite: Rewrite) -> Rewrite:
    """``rewrite``, or rejected when its query is empty or no acceptable query text."""
    if rewrite.query is not None and (
        not isinstance(rewrite.query, str) or not rewrite.query.strip()
    ):
        return replace(rewrite, query=None, rejected="empty rewrite")
    if rewrite.query is not None:
        try:  # model output (NUL, a lone surrogate) must never fail the query
            check_query(rewrite.query, what="rewrite")
        except InputError as exc:
            shown = rewrite.query.encode("utf-8", "backslashreplace").decode("utf-8")
            shown = shown.replace("\x00", "\\x00")  # kept as readable, storable text
            return replace(rewrite, query=None, rejected=str(exc), candidate=shown)
    return rewrite


def _grading_failed(steps: Sequence[Step]) -> bool:
    """Every grading call of the iteration failed: calls failed and no verdict is graded."""
    failed = sum(s.usage.failed_calls for s in steps)
    return failed > 0 and not any(v.graded for s in steps for v in s.verdicts)
