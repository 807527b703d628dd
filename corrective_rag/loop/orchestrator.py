"""The corrective loop: retrieve -> evaluate -> filter -> (fallback) -> rewrite -> repeat.

:class:`CorrectiveRAGOrchestrator` wires injected components (protocols only) into the loop and
returns a frozen :class:`~corrective_rag.types.RunResult` with one
:class:`~corrective_rag.types.IterationRecord` per iteration. The user's question is never
replaced: every iteration searches it (fused with the current rewrite) and every verdict is
judged against it. Caps end the loop with a :class:`~corrective_rag.types.StopReason`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncGenerator, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

from structlog.contextvars import bound_contextvars

from corrective_rag.calls.scope import call_scope, raise_if_cancelled
from corrective_rag.errors import (
    Cancelled,
    ConfigError,
    InputError,
    LLMError,
    SearchError,
    SearchSkippedError,
    VerdictParseError,
)
from corrective_rag.evaluate.policy import Decision, FilterPolicy, crag_action, decide, get_policy
from corrective_rag.inputs import check_int, check_query
from corrective_rag.llm.spent import spent_before
from corrective_rag.logs import get_logger
from corrective_rag.loop.budget import Budget, documents_per_call
from corrective_rag.loop.lanes import take_turns
from corrective_rag.loop.multiquery import FEEDBACK_LEG, QUERY_LEGS, search_queries
from corrective_rag.loop.refine import recompose, refine
from corrective_rag.loop.state import Run, Step, kept_order, proposal_of
from corrective_rag.loop.stopping import full_at, stop_rule, within_cap
from corrective_rag.protocols import (
    ContextualEvaluator,
    Evaluator,
    Generator,
    Retriever,
    Rewriter,
)
from corrective_rag.tracing import traced_iteration, traced_run
from corrective_rag.types import (
    Answer,
    CragAction,
    Document,
    FallbackMode,
    Hit,
    IterationRecord,
    Judged,
    KeptDocument,
    PhaseUsage,
    Proposal,
    Retrieved,
    Rewrite,
    RewriteRequest,
    RewriteSource,
    RunResult,
    StopReason,
    Strip,
    Usage,
    Verdict,
    record_fields,
)

# CorrectiveRAGOrchestrator: its home is corrective_rag
__all__: list[str] = []

log = get_logger(__name__)

MAX_TOP_K = 1000  # more documents per iteration than any evaluator should judge in one go
MAX_ITERATIONS = 100  # a loop this long is a configuration mistake, not a search strategy
ABSTAIN_TEXT = "No relevant documents were found, so no answer is given."


def _check_int(name: str, value: object, low: int, high: int) -> int:
    return check_int(value, name, minimum=low, maximum=high)


def _check_question(question: object) -> str:
    return check_query(question, what="question")


class CorrectiveRAGOrchestrator:
    """Run the corrective RAG loop over injected components.

    Args:
        retriever: the main corpus.
        evaluator: judges documents against the original question.
        rewriter: proposes the next query from the evaluator's feedback.
        generator: writes the final answer from kept documents; ``None``: no answer.
        fallback: a second source (another corpus, a web-search API) used when an iteration's
            CRAG action is *ambiguous* (supplements) or *incorrect* (replaces the local results).
        policy: a :class:`FilterPolicy` or a preset name (``general``, ``medical``, ``legal``,
            ``ecommerce``).
        max_iterations: iteration cap (1..100).
        top_k: new documents judged per iteration and source (1..1000).
        min_relevant: kept documents that are enough; ``None``: the policy's ``min_relevant``,
            lowered to the evaluator's ``keeps_at_most`` when it has one (a capped offline
            judge); a number above that cap is refused (see
            :func:`~corrective_rag.loop.stopping.stop_rule` for when they count).
        budget: limits on LLM calls, tokens, cost and seconds; ``None``: unlimited.
        refine: decompose kept documents into strips and keep the relevant ones (CRAG).
        strip_sentences: sentences per strip when refining.
        candidate_limit: most candidates asked of a retriever per query, when looking past
            documents already judged (>= ``top_k``).

    Raises:
        ConfigError: on any invalid argument, before any work is done.
    """

    def __init__(
        self,
        retriever: Retriever,
        evaluator: Evaluator,
        rewriter: Rewriter,
        *,
        generator: Generator | None = None,
        fallback: Retriever | None = None,
        policy: FilterPolicy | str = "general",
        max_iterations: int = 3,
        top_k: int = 5,
        min_relevant: int | None = None,
        budget: Budget | None = None,
        refine: bool = False,
        strip_sentences: int = 1,
        candidate_limit: int = 200,
    ) -> None:
        if callable(getattr(evaluator, "evaluate", None)):
            documents_per_call(evaluator)  # says what is missing, before "must implement"
        for name, obj, proto in (
            ("retriever", retriever, Retriever),
            ("evaluator", evaluator, Evaluator),
            ("rewriter", rewriter, Rewriter),
        ):
            if not isinstance(obj, proto):
                raise ConfigError(f"{name} must implement {proto.__name__}, got {obj!r}")
        if generator is not None and not isinstance(generator, Generator):
            raise ConfigError(f"generator must implement Generator, got {generator!r}")
        if fallback is not None and not isinstance(fallback, Retriever):
            raise ConfigError(f"fallback must implement Retriever, got {fallback!r}")
        # One call per iteration by default: an evaluator that can propose the next query in
        # its grading call (LLMEvaluator left at propose=None) does so when the rewriter asks
        # the same chat model; a rewriter with a model of its own keeps its own call.
        # Knowledge refinement grades strips and reads no proposal: it uses the evaluator as
        # given, so that it pays for no next_query.
        self._strip_evaluator = evaluator
        for_rewriter = getattr(evaluator, "for_rewriter", None)
        if callable(for_rewriter):
            evaluator = for_rewriter(rewriter)
        if isinstance(policy, str):
            policy = get_policy(policy)
        if not isinstance(policy, FilterPolicy):
            raise ConfigError(f"policy must be a FilterPolicy or preset name, got {policy!r}")
        if min_relevant is not None:
            policy = replace(policy, min_relevant=_check_int("min_relevant", min_relevant, 1, 1000))
        policy = within_cap(policy, evaluator, given=min_relevant is not None)
        if budget is not None and not isinstance(budget, Budget):
            raise ConfigError(f"budget must be a Budget or None, got {budget!r}")
        if not isinstance(refine, bool):
            raise ConfigError(f"refine must be a bool, got {refine!r}")
        self.retriever = retriever
        self.evaluator = evaluator
        self.rewriter = rewriter
        self.generator = generator
        self.fallback = fallback
        self.policy = policy
        self.max_iterations = _check_int("max_iterations", max_iterations, 1, MAX_ITERATIONS)
        self.top_k = _check_int("top_k", top_k, 1, MAX_TOP_K)
        self.candidate_limit = _check_int("candidate_limit", candidate_limit, top_k, 100_000)
        self.budget = budget
        self.refine = refine
        self.strip_sentences = _check_int("strip_sentences", strip_sentences, 1, 100)
        self._docs_per_call = documents_per_call(evaluator)

    @traced_run
    def run(
        self,
        question: str,
        *,
        where: Mapping[str, Any] | None = None,
        top_k: int | None = None,
        max_iterations: int | None = None,
        budget: Budget | None = None,
    ) -> RunResult:
        """Run the loop for ``question``; per-call ``None`` falls back to the constructor's value.

        Raises:
            InputError: the question is not a non-empty string of at most 1 MiB.
            ConfigError: an override is out of range.
        """
        question = _check_question(question)
        if where is not None and not isinstance(where, Mapping):
            raise ConfigError(f"where must be a mapping or None, got {where!r}")
        top_k = self.top_k if top_k is None else _check_int("top_k", top_k, 1, MAX_TOP_K)
        if top_k > self.candidate_limit:
            raise ConfigError(f"top_k {top_k} above candidate_limit {self.candidate_limit}")
        iterations = self.max_iterations
        if max_iterations is not None:
            iterations = _check_int("max_iterations", max_iterations, 1, MAX_ITERATIONS)
        if budget is not None and not isinstance(budget, Budget):
            raise ConfigError(f"budget must be a Budget or None, got {budget!r}")
        budget = budget if budget is not None else self.budget
        where = where or None  # an empty filter means none (chromadb refuses an empty where)

        run_id = uuid.uuid4().hex
        started_at = datetime.now(timezone.utc).isoformat()
        st = Run(question, where, top_k, budget, time.perf_counter(), tried=[question])
        rlog = st.log = log.bind(run_id=run_id)
        rlog.info(
            "run_started",
            question=question,
            policy=self.policy.name,
            max_iterations=iterations,
            top_k=top_k,
        )
        # Budget.max_seconds is a deadline for calls in flight too (see corrective_rag.calls.scope);
        # the scope's own cancel event lets Ctrl-C end this run's parallel calls at once.
        seconds = budget.max_seconds if budget is not None else None
        # run_id also as a structlog context variable, so the evaluator's, rewriter's and LLM
        # client's events carry it where the application merges context variables
        # (structlog.contextvars.merge_contextvars; the CLI does); parallel calls copy the context
        with call_scope(seconds=seconds), bound_contextvars(run_id=run_id):
            return self._loop(st, run_id, started_at, iterations, rlog)

    # asyncio: each run in a worker thread; cancelling the task cancels its LLM calls (loop/aio.py)
    async def arun(self, question: str, **options: Any) -> RunResult:
        """``await`` :meth:`run`; see :func:`corrective_rag.loop.aio.arun` (threads, cancel)."""
        from corrective_rag.loop.aio import arun

        return await arun(self, question, **options)

    async def arun_batch(self, questions: Sequence[str], **options: Any) -> list[RunResult]:
        """Concurrent runs, results in order: :func:`corrective_rag.loop.aio.arun_batch`."""
        from corrective_rag.loop.aio import arun_batch

        return await arun_batch(self, questions, **options)

    def arun_each(
        self, questions: Iterable[str], **options: Any
    ) -> AsyncGenerator[tuple[int, RunResult], None]:
        """``(index, result)`` as each run ends: :func:`corrective_rag.loop.aio.arun_each`."""
        from corrective_rag.loop.aio import arun_each

        return arun_each(self, questions, **options)

    def _loop(self, st: Run, run_id: str, started_at: str, iterations: int, rlog: Any) -> RunResult:
        question = st.question
        history: list[IterationRecord] = []
        query = question
        stop, detail = StopReason.ITERATION_CAP, f"reached max_iterations={iterations}"
        for index in range(1, iterations + 1):
            raise_if_cancelled()  # a cancelled run (Ctrl-C, a cancelled arun) ends even with no LLM
            spent = st.spent()
            if spent:
                stop, detail = StopReason.BUDGET_EXHAUSTED, f"before iteration {index}: {spent}"
                break
            record, ended = self._iterate(st, index, query, last=index == iterations)
            history.append(record)
            rlog.info("iteration_finished", **record_fields(record))
            if ended is not None:
                stop, detail = ended
                break
            if record.rewrite is not None and record.rewrite.query is not None:
                query = record.rewrite.query
                st.tried.append(query)
                st.rejected = None
            elif record.rewrite is not None and record.rewrite.source is RewriteSource.NEXT_HITS:
                query = question  # no acceptable rewrite: the question's next-best unjudged hits
                st.rejected = record.rewrite.rejected
            # the free feedback query (no LLM call) is searched as a lane of its own
            st.feedback = record.rewrite.feedback if record.rewrite is not None else None
            if st.feedback is not None:
                st.tried.append(st.feedback)

        kept = sorted(st.kept.values(), key=kept_order)
        strips, answer = self._answer(st, kept)
        result = RunResult(
            run_id=run_id,
            question=question,
            final_query=query,
            kept=tuple(kept),
            stop_reason=stop,
            stop_detail=detail,
            history=tuple(history),
            usage=st.usage,
            seconds=time.perf_counter() - st.started,
            policy=self.policy.to_dict(),
            answer=answer,
            strips=strips,
            started_at=started_at,
            refinement_error=st.refine_error,
        )
        rlog.info(
            "run_finished",
            stop_reason=stop.value,
            stop_detail=detail,
            iterations=len(history),
            kept_ids=list(result.kept_ids),
            llm_calls=st.usage.total.llm_calls,
            tokens=st.usage.total.total_tokens,
            cost_usd=st.usage.total.cost_usd,
            seconds=result.seconds,
        )
        return result

    # -- one iteration ---------------------------------------------------------------------

    @traced_iteration
    def _iterate(
        self, st: Run, index: int, query: str, *, last: bool
    ) -> tuple[IterationRecord, tuple[StopReason, str] | None]:
        t0 = time.perf_counter()
        # each query is a lane (loop/lanes.py): the question, the rewrite, the free feedback
        lanes: dict[str, str] = {}
        for name, text in zip(
            (*QUERY_LEGS, FEEDBACK_LEG), (st.question, query, st.feedback), strict=True
        ):
            if text is not None and text not in lanes.values():
                lanes[name] = text
        searched = tuple(lanes.values())
        local = self._step(st, self.retriever, searched, tuple(lanes))
        steps = [local]
        action = crag_action(local.verdicts, self.policy)
        mode = None
        if self.fallback is not None and action is not CragAction.CORRECT and not st.spent():
            replaced = action is CragAction.INCORRECT
            try:
                extra = self._step(st, self.fallback, searched, tuple(lanes))
            except Cancelled:
                raise  # Ctrl-C ends the run, as it does during an LLM call
            except SearchSkippedError as exc:
                st.log.info("fallback_skipped", iteration=index, reason=str(exc))
                mode = FallbackMode.SKIPPED
            except Exception as exc:
                # A fallback that failed, however (a web search past its retries, an answer of
                # an unexpected kind), costs this iteration its fallback, not the run: the
                # local results stand, and the record says so.
                error = str(exc) if isinstance(exc, SearchError) else f"{type(exc).__name__}: {exc}"
                st.log.warning("fallback_failed", iteration=index, error=error)
                mode = FallbackMode.FAILED
            else:
                if not extra.hits:
                    mode = FallbackMode.EMPTY  # nothing to replace the local results with
                    replaced = False
                else:
                    mode = FallbackMode.REPLACED if replaced else FallbackMode.SUPPLEMENTED
                if replaced:
                    # CRAG's "incorrect": the local results are discarded, whatever the filter said
                    local.dropped.extend(local.kept)
                    local.kept.clear()
                steps.append(extra)
        for step in steps:
            for doc_id in step.kept:
                st.kept.setdefault(
                    doc_id,
                    KeptDocument(step.docs[doc_id], st.judged[doc_id], index, step.ranks[doc_id]),
                )
        grading = sum((s.usage for s in steps), Usage())
        ids = frozenset(h.document.id for h in local.hits)
        new = sum(len(s.verdicts) for s in steps)

        ended: tuple[StopReason, str] | None = None
        rewrite: Rewrite | None = None
        # judged new documents and kept none (with none to judge, no_progress says more)
        stalled = index > 1 and new > 0 and not any(s.kept for s in steps)
        kept = [k.verdict for k in st.kept.values()]
        full = full_at(self.evaluator, st.judged.values())  # a capped judge keeps no more
        if rule := stop_rule(kept, self.policy, stalled=stalled, full=full):
            ended = rule  # enough_relevant, or kept_unconfident (stopped, not confirmed)
        elif new == 0 and st.rejected is not None:
            why = f"rewrite rejected ({st.rejected}) and the question has no unjudged hits left"
            ended = (StopReason.REWRITE_FAILED, why)
        elif new == 0:
            repeat = [i for i, s in enumerate(st.retrieved_sets, start=1) if s == ids]
            if repeat:
                why = f"same retrieved set as iteration {repeat[0]}"
            else:
                why = "every retrieved document already judged" if ids else "nothing retrieved"
            ended = (StopReason.NO_PROGRESS, f"no new documents to judge ({why})")
        elif last:
            ended = (StopReason.ITERATION_CAP, f"reached max_iterations={index}")
        elif spent := st.spent():
            ended = (StopReason.BUDGET_EXHAUSTED, f"before rewrite {index}: {spent}")
        else:
            # A repeated or rejected proposal does not end the run while the question has
            # unjudged hits: the rewriter refuses it (no call of its own), and the next
            # iteration pages the question's next-best hits; no_progress comes only when
            # nothing new is left to judge (above).
            rewrite = self._rewrite(st, proposal_of(steps))
            st.usage = st.usage + PhaseUsage(rewriting=rewrite.usage)
            dead = grading.failed_calls > 0 and not any(
                v.graded for s in steps for v in s.verdicts
            )  # every grading call of this iteration failed
            if rewrite.query is None and dead and rewrite.usage.failed_calls:
                # the model did not answer (deadline, HTTP error): another iteration would only
                # wait on it again, so the run ends here with what it has
                ended = (StopReason.REWRITE_FAILED, rewrite.rejected or "rewriter failed")
            elif rewrite.query is None:
                # a rejected rewrite does not end the run: the next iteration judges the
                # question's next-best unjudged hits (rewrite_failed when there are none)
                rewrite = replace(rewrite, source=RewriteSource.NEXT_HITS)
        st.retrieved_sets.append(ids)
        record = IterationRecord(
            index=index,
            query=query,
            searched=searched,
            retrieved=tuple(Retrieved.from_hit(h) for s in steps for h in s.hits),
            skipped_ids=tuple(i for s in steps for i in s.skipped),
            verdicts=tuple(v for s in steps for v in s.verdicts),
            kept_ids=tuple(i for s in steps for i in s.kept),
            dropped_ids=tuple(i for s in steps for i in s.dropped),
            ungraded_ids=tuple(i for s in steps for i in s.ungraded),
            action=action,
            fallback=mode,
            rewrite=rewrite,
            usage=PhaseUsage(grading=grading, rewriting=rewrite.usage if rewrite else Usage()),
            seconds=time.perf_counter() - t0,
        )
        return record, ended

    def _step(
        self, st: Run, retriever: Retriever, queries: Sequence[str], names: Sequence[str]
    ) -> Step:
        """Search one source, skip what was judged, judge up to top_k new documents, filter."""
        k = min(st.top_k + len(st.judged), self.candidate_limit)
        # The run's filter is the local store's: a fallback (a web search) has its own, or none.
        where = st.where if retriever is self.retriever else None
        hits = search_queries(retriever, queries, top_k=k, where=where, names=names)
        cap = st.top_k
        left = st.document_cap(self._docs_per_call)
        cap = cap if left is None else min(cap, left)
        picked = take_turns(hits, st.judged, cap, fused=len(queries) > 1, record=st.lanes)
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
            if doc_id in st.judged:
                skipped.append(doc_id)
            elif doc_id in picked:
                fresh.append(hit)
            else:
                continue  # a fused hit that lost its slot to the other query's turn
            taken.append(hit)
        docs = {h.document.id: h.document for h in fresh}
        verdicts: list[Verdict] = []
        usage = Usage()
        proposal = None
        if fresh:
            documents = [h.document for h in fresh]
            verdicts, usage, proposal = self._evaluate(st.question, documents, st.judged_docs)
        # Charge the run at once, so that a fallback step in this iteration sees this spend.
        st.usage = st.usage + PhaseUsage(grading=usage)
        step = Step(taken, skipped, verdicts, [], [], [], usage, {}, docs, proposal)
        tally: dict[str, tuple[int, int]] = {}
        for hit, verdict in zip(fresh, verdicts, strict=True):
            doc_id = hit.document.id
            st.judged[doc_id] = verdict
            st.judged_docs.append(Judged(hit.document, verdict))
            step.ranks[doc_id] = hit.rank
            decision = decide(verdict, self.policy)
            bins = {Decision.KEEP: step.kept, Decision.DROP: step.dropped}
            bins.get(decision, step.ungraded).append(doc_id)
            lane_kept, lane_judged = tally.get(picked[doc_id], (0, 0))
            tally[picked[doc_id]] = (lane_kept + (decision is Decision.KEEP), lane_judged + 1)
        if retriever is self.retriever:  # the fallback's documents belong to no query lane
            st.lanes.update(tally)
        return step

    def _evaluate(
        self, question: str, documents: list[Document], judged: Sequence[Judged]
    ) -> tuple[list[Verdict], Usage, Proposal | None]:
        """Judge ``documents``; a missing verdict or a failed call becomes an ungraded verdict.

        An evaluator that compares with earlier documents gets the run's judged ones, so that
        its verdicts depend on this run only (never on other runs or threads).
        """
        try:
            if isinstance(self.evaluator, ContextualEvaluator):
                evaluation = self.evaluator.evaluate_in_context(question, documents, tuple(judged))
            else:
                evaluation = self.evaluator.evaluate(question, documents)
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

    def _rewrite(self, st: Run, proposal: Proposal | None = None) -> Rewrite:
        request = RewriteRequest(
            st.question,
            tuple(st.tried),
            tuple(st.judged_docs),
            proposal,
            kept_ids=frozenset(st.kept),  # rewriters learn from what the policy kept only
        )
        try:
            rewrite = self.rewriter.rewrite(request)
        except (LLMError, VerdictParseError) as exc:
            # a rejected rewrite, as LLMRewriter's own failed call gives: the run goes on with
            # the question's next hits, unless grading failed in the same iteration (above)
            usage = spent_before(exc) + Usage(failed_calls=1)
            return Rewrite(None, rejected=f"rewriter failed: {exc}", usage=usage)
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

    # -- after the loop --------------------------------------------------------------------

    def _answer(self, st: Run, kept: list[KeptDocument]) -> tuple[tuple[Strip, ...], Answer | None]:
        documents = [k.document for k in kept]
        strips: tuple[Strip, ...] = ()
        if self.refine and documents and not st.spent():
            cap = st.document_cap(self._docs_per_call)
            refinement = refine(
                st.question,
                documents,
                self._strip_evaluator,
                self.policy,
                sentences=self.strip_sentences,
                max_strips=cap,
            )
            st.usage = st.usage + PhaseUsage(refinement=refinement.usage)
            strips = refinement.strips
            if refinement.error is not None:  # the documents go to the generator whole
                st.refine_error = refinement.error
                st.log.warning("refinement_failed", error=refinement.error)
        if self.generator is None:
            return strips, None
        if not documents:
            return strips, Answer(ABSTAIN_TEXT, abstained=True)
        spent = st.spent()
        if spent:
            text = f"No answer generated: budget exhausted ({spent})."
            return strips, Answer(text, abstained=True)
        sources = recompose(strips, documents) if strips else documents
        try:
            answer = self.generator.generate(st.question, sources)
        except (LLMError, VerdictParseError) as exc:  # a strict generator's unreadable reply too
            usage = spent_before(exc) + Usage(failed_calls=1)
            text = f"No answer generated: generator failed ({exc})."
            answer = Answer(text, abstained=True, usage=usage)
        st.usage = st.usage + PhaseUsage(generation=answer.usage)
        return strips, answer
