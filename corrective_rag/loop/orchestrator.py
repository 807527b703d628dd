"""The corrective loop's public face: :class:`CorrectiveRAGOrchestrator`.

It checks the injected components (protocols only) and settings, runs the loop
(:func:`~corrective_rag.loop.iteration.iterations`, one :func:`~corrective_rag.loop.iteration.
iterate` per iteration) and returns a frozen :class:`~corrective_rag.types.RunResult` with one
:class:`~corrective_rag.types.IterationRecord` per iteration, then refines and answers. The
user's question is never replaced: every iteration searches it (fused with the current rewrite)
and every verdict is judged against it. Caps end the loop with a
:class:`~corrective_rag.types.StopReason` (:mod:`corrective_rag.loop.stopping`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncGenerator, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

from structlog.contextvars import bound_contextvars

from corrective_rag.calls.scope import call_scope
from corrective_rag.errors import ConfigError, LLMError, VerdictParseError
from corrective_rag.evaluate.policy import FilterPolicy, get_policy
from corrective_rag.inputs import check_int, check_query
from corrective_rag.llm.spent import spent_before
from corrective_rag.loop.aio import arun, arun_batch, arun_each
from corrective_rag.loop.budget import Budget, documents_per_call
from corrective_rag.loop.callmode import CallMode, check_call_mode, unused_rewriter_model
from corrective_rag.loop.iteration import iterations
from corrective_rag.loop.lanes import Lanes
from corrective_rag.loop.refine import recompose, refine
from corrective_rag.loop.state import Parts, RunState, kept_order
from corrective_rag.loop.stopping import within_cap
from corrective_rag.observe.logs import get_logger
from corrective_rag.observe.spans import stage, traced_run
from corrective_rag.protocols import Evaluator, Generator, Retriever, Rewriter
from corrective_rag.rewrite.local import LocalRewriter
from corrective_rag.store.checks import MAX_TOP_K
from corrective_rag.types import (
    Answer,
    KeptDocument,
    PhaseUsage,
    RunResult,
    Strip,
    Usage,
)

# CorrectiveRAGOrchestrator: its home is corrective_rag
__all__: list[str] = []

log: Any = get_logger(__name__)

MAX_ITERATIONS = 100  # a loop this long is a configuration mistake, not a search strategy
ABSTAIN_TEXT = "No relevant documents were found, so no answer is given."


def _check_int(name: str, value: object, low: int, high: int) -> int:
    return check_int(value, name, minimum=low, maximum=high)


def _check_question(question: object) -> str:
    return check_query(question, what="question")


def _check_parts(
    retriever: object, evaluator: object, rewriter: object, generator: object, fallback: object
) -> None:
    """Refuse a component that does not implement its protocol, before any work."""
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


def _check_policy(
    policy: FilterPolicy | str, min_relevant: int | None, evaluator: object
) -> FilterPolicy:
    """The policy by preset name or as given, with ``min_relevant`` and the evaluator's cap."""
    if isinstance(policy, str):
        policy = get_policy(policy)
    if not isinstance(policy, FilterPolicy):
        raise ConfigError(f"policy must be a FilterPolicy or preset name, got {policy!r}")
    if min_relevant is not None:
        policy = replace(policy, min_relevant=_check_int("min_relevant", min_relevant, 1, 1000))
    return within_cap(policy, evaluator, given=min_relevant is not None)


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
        top_k: new documents judged per iteration and source: the hits taken from each
            search, so within what one search returns (1..10,000,
            :data:`~corrective_rag.store.checks.MAX_TOP_K`).
        min_relevant: kept documents that are enough; ``None``: the policy's ``min_relevant``,
            lowered to the evaluator's ``keeps_at_most`` when it has one (a capped offline
            judge); a number above that cap is refused (see
            :func:`~corrective_rag.loop.stopping.decide_stop` for when they count).
        budget: limits on LLM calls, tokens, cost and seconds; ``None``: unlimited.
        refine: decompose kept documents into strips and keep the relevant ones (CRAG).
        strip_sentences: sentences per strip when refining.
        candidate_limit: most candidates asked of a retriever per query, when looking past
            documents already judged (``top_k``..``MAX_TOP_K``).
        call_mode: ``"one-call"`` (the default): the grading call also proposes the next query
            where the evaluator can (``LLMEvaluator``, wrapped or not) and the rewriter checks
            that proposal (``LLMRewriter``) instead of calling its model: one LLM call per
            iteration; ``"two-call"``: the rewriter makes a call of its own (for a rewriter with
            a model of its own). An explicit ``LLMEvaluator(propose=...)`` is kept in either
            mode (:mod:`corrective_rag.loop.callmode`). Fixed at construction (read-only).
        lanes: the lane policy (:class:`~corrective_rag.loop.lanes.Lanes`): whether the free
            feedback lane is searched and with which idf; ``None``: ``Lanes()``, the feedback
            lane for every rewriter but ``LocalRewriter``.

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
        call_mode: CallMode = "one-call",
        lanes: Lanes | None = None,
    ) -> None:
        _check_parts(retriever, evaluator, rewriter, generator, fallback)
        self._call_mode = check_call_mode(call_mode)
        unused_rewriter_model(evaluator, rewriter, self._call_mode)
        self.policy: FilterPolicy = _check_policy(policy, min_relevant, evaluator)
        if budget is not None and not isinstance(budget, Budget):
            raise ConfigError(f"budget must be a Budget or None, got {budget!r}")
        if not isinstance(refine, bool):
            raise ConfigError(f"refine must be a bool, got {refine!r}")
        if lanes is not None and not isinstance(lanes, Lanes):
            raise ConfigError(f"lanes must be a Lanes or None, got {lanes!r}")
        self.lanes: Lanes = lanes if lanes is not None else Lanes()
        self.retriever = retriever
        self.evaluator = evaluator
        self.rewriter = rewriter
        self.generator = generator
        self.fallback = fallback
        self.max_iterations: int = _check_int("max_iterations", max_iterations, 1, MAX_ITERATIONS)
        self.top_k: int = _check_int("top_k", top_k, 1, MAX_TOP_K)
        # the loop asks each retriever for up to candidate_limit hits: one search's bound
        self.candidate_limit: int = _check_int("candidate_limit", candidate_limit, top_k, MAX_TOP_K)
        self.budget = budget
        self.refine = refine
        self.strip_sentences: int = _check_int("strip_sentences", strip_sentences, 1, 100)
        self._docs_per_call = documents_per_call(evaluator)

    @property
    def call_mode(self) -> CallMode:
        """``"one-call"`` or ``"two-call"``, as built (a new orchestrator changes it)."""
        return self._call_mode

    @call_mode.setter
    def call_mode(self, value: object) -> None:
        raise ConfigError(
            f"call_mode is fixed when the orchestrator is built (it is {self._call_mode!r}); "
            f"build a new CorrectiveRAGOrchestrator(..., call_mode={value!r})"
        )

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
        most = self.max_iterations
        if max_iterations is not None:
            most = _check_int("max_iterations", max_iterations, 1, MAX_ITERATIONS)
        if budget is not None and not isinstance(budget, Budget):
            raise ConfigError(f"budget must be a Budget or None, got {budget!r}")
        budget = budget if budget is not None else self.budget
        where = where or None  # an empty filter means none (chromadb refuses an empty where)

        run_id = uuid.uuid4().hex
        started_at = datetime.now(timezone.utc).isoformat()
        st = RunState(question, where, top_k, budget, time.perf_counter(), tried=[question])
        rlog = st.log = log.bind(run_id=run_id)
        rlog.info(
            "run_started",
            question=question,
            policy=self.policy.name,
            max_iterations=most,
            top_k=top_k,
        )
        # Budget.max_seconds is a deadline for calls in flight too (see corrective_rag.calls.scope);
        # the scope's own cancel event lets Ctrl-C end this run's parallel calls at once.
        seconds = budget.max_seconds if budget is not None else None
        # run_id also as a structlog context variable, so the evaluator's, rewriter's and LLM
        # client's events carry it where the application merges context variables
        # (structlog.contextvars.merge_contextvars; the CLI does); parallel calls copy the context
        with call_scope(seconds=seconds), bound_contextvars(run_id=run_id):
            return self._loop(st, run_id, started_at, most, rlog)

    # asyncio: each run in a worker thread; cancelling the task cancels its LLM calls (loop/aio.py)
    async def arun(self, question: str, **options: Any) -> RunResult:
        """``await`` :meth:`run`; see :func:`corrective_rag.loop.aio.arun` (threads, cancel)."""
        return await arun(self, question, **options)

    async def arun_batch(self, questions: Sequence[str], **options: Any) -> list[RunResult]:
        """Concurrent runs, results in order: :func:`corrective_rag.loop.aio.arun_batch`."""
        return await arun_batch(self, questions, **options)

    def arun_each(
        self, questions: Iterable[str], **options: Any
    ) -> AsyncGenerator[tuple[int, RunResult], None]:
        """``(index, result)`` as each run ends: :func:`corrective_rag.loop.aio.arun_each`."""
        return arun_each(self, questions, **options)

    def _parts(self) -> Parts:
        """This run's components and settings (read when it starts)."""
        feeds = self.lanes.feeds(self.rewriter)  # the feedback lane's query: loop/feedback.py
        return Parts(
            retriever=self.retriever,
            evaluator=self.evaluator,
            rewriter=self.rewriter,
            fallback=self.fallback,
            policy=self.policy,
            candidate_limit=self.candidate_limit,
            docs_per_call=self._docs_per_call,
            feedback=LocalRewriter(idf=self.lanes.idf) if feeds else None,
            call_mode=self._call_mode,
        )

    def _loop(self, st: RunState, run_id: str, started_at: str, most: int, rlog: Any) -> RunResult:
        history, query, (stop, detail) = iterations(self._parts(), st, most)
        kept = sorted(st.kept.values(), key=kept_order)
        strips, answer = self._answer(st, kept)
        result = RunResult(
            run_id=run_id,
            question=st.question,
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

    # -- after the loop --------------------------------------------------------------------

    def _answer(
        self, st: RunState, kept: list[KeptDocument]
    ) -> tuple[tuple[Strip, ...], Answer | None]:
        documents = [k.document for k in kept]
        strips: tuple[Strip, ...] = ()
        if self.refine and documents and not st.spent():
            cap = st.document_cap(self._docs_per_call)
            refinement = refine(
                st.question,
                documents,
                self.evaluator,  # outside the grading context: strips ask for no next query
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
            with stage("answer"):
                answer = self.generator.generate(st.question, sources)
        except (LLMError, VerdictParseError) as exc:  # a strict generator's unreadable reply too
            usage = spent_before(exc) + Usage(failed_calls=1)
            text = f"No answer generated: generator failed ({exc})."
            answer = Answer(text, abstained=True, usage=usage)
        st.usage = st.usage + PhaseUsage(generation=answer.usage)
        return strips, answer
