"""The loop for asyncio services: ``await orchestrator.arun(question)``, and batches of runs.

What runs in threads, plainly: the loop is synchronous code (retrieval, the embedding model, the
local judge, HTTP through ``requests``), so each run executes in a worker thread of an executor
(the event loop's default one unless ``executor=`` is given); the event loop only awaits it and
is never blocked by a run. Inside a run, LLM calls use threads exactly as ``run`` does (one per
HTTP exchange, a small pool for parallel grading). The default executor has
``min(32, CPUs + 4)`` threads: more runs than that at once wait for a free thread (pass your own
``concurrent.futures.ThreadPoolExecutor`` to size it).

Cancelling the awaiting task (a client that disconnects, ``asyncio.timeout``, ``task.cancel()``)
cancels the run the way Ctrl-C does (:func:`corrective_rag.calls.worker.in_worker`, the one home
of cancel-and-wait): an LLM call in flight is abandoned at once (its socket is shut down), no
further call starts, and a run doing no LLM work stops at its next iteration. ``arun`` raises
``CancelledError`` only once the worker thread has ended, so when the ``await`` is over nothing
of that run still runs or spends. (A second cancellation while it winds down stops the waiting,
not the winding down.)

Concurrent runs share the orchestrator, its store and its chat client, as the threads of
:func:`~corrective_rag.runs.execution.batch.run_batch` do: the client bounds the requests in flight
(``max_concurrency``) across all of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping, Sequence
from concurrent.futures import Executor
from typing import Any, Protocol

from corrective_rag.calls.worker import Waiting, in_worker
from corrective_rag.errors import ConfigError
from corrective_rag.inputs import check_int
from corrective_rag.loop.budget import Budget
from corrective_rag.types import RunResult

__all__ = ["Runner", "arun", "arun_batch", "arun_each"]

MAX_CONCURRENCY = 1000  # more runs in flight than any chat endpoint or thread pool will carry


class Runner(Protocol):
    """What these functions run: an object with the orchestrator's synchronous ``run``."""

    @property
    def run(self) -> Callable[..., RunResult]:
        """:meth:`~corrective_rag.CorrectiveRAGOrchestrator.run`: ``run(question, **keywords)``."""
        ...


async def arun(
    orchestrator: Runner,
    question: str,
    *,
    where: Mapping[str, Any] | None = None,
    top_k: int | None = None,
    max_iterations: int | None = None,
    budget: Budget | None = None,
    executor: Executor | None = None,
) -> RunResult:
    """Run the loop for ``question`` in a worker thread and await its result.

    The keywords are those of :meth:`CorrectiveRAGOrchestrator.run`; ``executor`` is where the
    run's thread comes from (``None``: the event loop's default executor). See the module
    docstring for threads and cancellation.

    Raises:
        asyncio.CancelledError: the task was cancelled; the run has ended when this is raised.
        InputError, ConfigError: as ``run`` raises them.
    """

    def work() -> RunResult:
        return orchestrator.run(
            question, where=where, top_k=top_k, max_iterations=max_iterations, budget=budget
        )

    return await in_worker(work, executor=executor, waiting=Waiting.UNTIL_CANCELLED_AGAIN)


def _questions(questions: Iterable[str]) -> Iterable[str]:
    if isinstance(questions, str | bytes) or not isinstance(questions, Iterable):
        raise ConfigError(f"questions must be an iterable of strings, got {questions!r:.80}")
    return questions


async def arun_each(
    orchestrator: Runner,
    questions: Iterable[str],
    *,
    concurrency: int = 4,
    where: Mapping[str, Any] | None = None,
    top_k: int | None = None,
    max_iterations: int | None = None,
    budget: Budget | None = None,
    executor: Executor | None = None,
) -> AsyncGenerator[tuple[int, RunResult], None]:
    """Run ``questions``, up to ``concurrency`` at once; yield ``(index, result)`` as each ends.

    Results come in the order runs finish (``index`` is the question's position). ``questions``
    is read lazily, one when a slot frees up. The first run that raises cancels the others and
    the error propagates; leaving the loop early (``break``), closing the iterator or cancelling
    the task cancels the runs in flight and waits for them to end. Wrap the iterator in
    ``contextlib.aclosing`` to have that happen at the ``break`` itself rather than when the
    iterator is collected.

    Raises:
        ConfigError: ``questions`` is a single string, or ``concurrency`` is out of 1..1000.
    """
    source = iter(_questions(questions))
    slots = check_int(concurrency, "concurrency", minimum=1, maximum=MAX_CONCURRENCY)
    options: dict[str, Any] = {
        "where": where,
        "top_k": top_k,
        "max_iterations": max_iterations,
        "budget": budget,
        "executor": executor,
    }
    running: dict[asyncio.Task[RunResult], int] = {}
    index = 0
    try:
        while True:
            for question in itertools.islice(source, slots - len(running)):
                running[asyncio.ensure_future(arun(orchestrator, question, **options))] = index
                index += 1
            if not running:
                return
            done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            # in question order among those that ended together, so that output is stable
            for task in sorted(done, key=running.__getitem__):
                position = running.pop(task)
                yield position, task.result()  # a run's error propagates from here
    finally:
        for task in running:
            task.cancel()
        if running:  # every cancelled run has ended when this returns (see arun)
            await asyncio.gather(*running, return_exceptions=True)


async def arun_batch(
    orchestrator: Runner,
    questions: Sequence[str],
    *,
    concurrency: int = 4,
    where: Mapping[str, Any] | None = None,
    top_k: int | None = None,
    max_iterations: int | None = None,
    budget: Budget | None = None,
    executor: Executor | None = None,
) -> list[RunResult]:
    """Run ``questions`` with up to ``concurrency`` in flight; the results in question order.

    As :func:`arun_each`, collected: the first run that raises cancels the rest and propagates.
    For a results file that survives crashes and resumes, use
    :func:`~corrective_rag.runs.execution.batch.run_batch` (in a thread) instead.
    """
    wanted = list(_questions(questions))
    results: list[RunResult | None] = [None] * len(wanted)
    each = arun_each(
        orchestrator,
        wanted,
        concurrency=concurrency,
        where=where,
        top_k=top_k,
        max_iterations=max_iterations,
        budget=budget,
        executor=executor,
    )
    async with contextlib.aclosing(each):
        async for position, result in each:
            results[position] = result
    return [r for r in results if r is not None]
