"""The asyncio entry points: arun, arun_batch, arun_each (corrective_rag/loop/aio.py)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from corrective_rag.calls.scope import cancelled
from corrective_rag.errors import ConfigError
from corrective_rag.evaluate.llm import LLMEvaluator
from corrective_rag.llm.client import OpenAIChatClient
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.rewrite.llm import LLMRewriter
from corrective_rag.store.hybrid import HybridStore
from corrective_rag.testing import Fault, ScriptedLLMServer
from corrective_rag.testing.fakes import ListRetriever, ScriptedEvaluator, ScriptedRewriter
from corrective_rag.types import Document, Hit

CORPUS = [
    Document("bees", "Honey bees make honey from flower nectar they collect."),
    Document("hive", "Bees store nectar in wax cells, where honey ripens."),
    Document("nectar", "Nectar becomes honey as bees fan it and add enzymes."),
    Document("wasp", "Wasps hunt insects and build paper nests."),
    Document("bread", "Bread dough rises with yeast in a warm kitchen."),
    Document("oven", "An oven bakes bread dough into a loaf with a crust."),
    Document("tide", "Tides rise and fall with the pull of the moon."),
    Document("moon", "The moon's gravity pulls the oceans into two bulges."),
]
QUESTIONS = [
    "How do honey bees make honey from nectar?",
    "How does bread dough rise and bake?",
    "Why do ocean tides rise and fall?",
    "What do wasps hunt?",
]


class _HangUpServer(ScriptedLLMServer):
    """The scripted server, telling the test each time a request's handler has ended.

    A dripped answer never ends by itself: its handler ends only when the client hangs up (the
    next byte written fails) or the server stops, so an end seen before ``stop`` proves the
    client abandoned the call.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ended = threading.Semaphore(0)

    def _end(self) -> None:
        super()._end()
        self.ended.release()


def _llm_loop(
    server: ScriptedLLMServer, retriever: Any, **kwargs: Any
) -> CorrectiveRAGOrchestrator:
    chat = OpenAIChatClient(server.base_url, "scripted")
    return CorrectiveRAGOrchestrator(
        retriever,
        LLMEvaluator(chat, batch_size=2, max_workers=1),
        LLMRewriter(chat),
        **{"top_k": 2, "max_iterations": 3, **kwargs},
    )


def _asks(request: Mapping[str, Any], question: str) -> bool:
    return any(question in str(m.get("content", "")) for m in request["messages"])


@pytest.mark.timeout(120)
def test_arun_gives_what_run_gives():
    """``await orchestrator.arun(q)`` keeps the same documents, for the same reasons, as run(q)."""
    with ScriptedLLMServer() as server:
        orch = _llm_loop(server, ListRetriever(CORPUS))
        expected = orch.run(QUESTIONS[0])
        got = asyncio.run(orch.arun(QUESTIONS[0]))
    assert expected.kept_ids == got.kept_ids
    assert expected.stop_reason == got.stop_reason
    assert [r.query for r in expected.history] == [r.query for r in got.history]


@pytest.mark.timeout(120)
def test_cancelling_arun_abandons_the_llm_call_in_flight():
    """Cancelling the task hangs up on the call the server is still answering, and no other
    call is made: the server sees one request, whose handler ends before the server stops."""
    with _HangUpServer(faults=lambda request, n: Fault.drip(0.02)) as server:
        orch = _llm_loop(server, ListRetriever(CORPUS))

        async def main() -> None:
            task = asyncio.ensure_future(orch.arun(QUESTIONS[0]))
            assert await asyncio.to_thread(server.wait_for_requests, 1, 60)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(main())
        # arun returned only after the run's thread ended: nothing can send a request now
        assert server.ended.acquire(timeout=30), "the dripped answer never saw the client go"
        assert 1 == server.request_count


class _BlockingRetriever:
    """A retriever whose first search waits until the run is cancelled (read from the scope)."""

    def __init__(self, documents: Sequence[Document]) -> None:
        self.inner = ListRetriever(documents)
        self.entered = threading.Event()
        self.searches = 0

    def retrieve(
        self, query: str, *, top_k: int, where: Mapping[str, Any] | None = None
    ) -> list[Hit]:
        self.searches += 1
        self.entered.set()
        while not cancelled():
            self.entered.wait(0.01)  # the run's own cancel event is not reachable from here
        return self.inner.retrieve(query, top_k=top_k, where=where)


@pytest.mark.timeout(120)
def test_a_cancelled_run_without_llm_calls_ends_at_the_next_iteration():
    """With no LLM in the loop, a cancelled arun still ends: the next iteration never searches."""
    retriever = _BlockingRetriever(CORPUS)
    orch = CorrectiveRAGOrchestrator(
        retriever,
        ScriptedEvaluator({}, default=0.0, documents_per_call=None),
        ScriptedRewriter(["bees nectar", "honey wax", "hive enzymes"]),
        top_k=2,
        max_iterations=3,
    )

    async def main() -> None:
        task = asyncio.ensure_future(orch.arun(QUESTIONS[0]))
        assert await asyncio.to_thread(retriever.entered.wait, 60)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert 1 == retriever.searches  # one query searched (the question), no second iteration


@pytest.mark.timeout(300)
def test_concurrent_runs_share_one_store_and_one_client(embedder):
    """Four runs at once over one real hybrid store and one chat client keep what four runs
    one after the other keep, and their requests did overlap at the server."""
    with (
        ScriptedLLMServer(latency=0.05) as server,
        HybridStore.in_memory(embedder=embedder) as store,
    ):
        store.add(CORPUS)
        orch = _llm_loop(server, store)
        one_by_one = [orch.run(q) for q in QUESTIONS]
        sequential_calls = server.request_count
        at_once = asyncio.run(orch.arun_batch(QUESTIONS, concurrency=4))
        calls = server.request_count - sequential_calls
    assert [r.kept_ids for r in one_by_one] == [r.kept_ids for r in at_once]
    assert [r.question for r in at_once] == QUESTIONS
    assert sum(r.usage.total.llm_calls for r in at_once) == calls
    assert server.max_in_flight > 1


@pytest.mark.timeout(120)
def test_leaving_arun_each_early_cancels_the_runs_in_flight():
    """Breaking out after the first result hangs up on the run still waiting for the server
    and never starts the questions not yet taken."""
    slow = QUESTIONS[1]

    def faults(request: Mapping[str, Any], n: int) -> Fault | None:
        # the first question is held until the slow one's call has reached the server
        return Fault.drip(0.02) if _asks(request, slow) else Fault.held()

    with _HangUpServer(faults=faults) as server:
        orch = _llm_loop(server, ListRetriever(CORPUS), max_iterations=1)

        async def main() -> list[int]:
            seen = []
            each = orch.arun_each(QUESTIONS, concurrency=2)
            waiting = asyncio.ensure_future(asyncio.to_thread(server.wait_for_requests, 2, 60))
            waiting.add_done_callback(lambda _: server.release())
            async with contextlib.aclosing(each):
                async for index, result in each:
                    seen.append(index)
                    assert QUESTIONS[index] == result.question
                    break
            return seen

        assert [0] == asyncio.run(main())
        before_stop = [r for r in server.requests if _asks(r, slow)]
        # the first question's requests ended normally, then the slow one's handler ended too
        assert all(server.ended.acquire(timeout=60) for _ in server.requests)
    assert 1 == len(before_stop)
    assert not [r for r in server.requests if _asks(r, QUESTIONS[2]) or _asks(r, QUESTIONS[3])]


def test_arun_each_yields_every_question_once():
    """Every question comes back exactly once, with its own index, whatever order runs end in."""
    orch = CorrectiveRAGOrchestrator(
        ListRetriever(CORPUS),
        ScriptedEvaluator(lambda q, d: 1.0 if d.id in q else 0.0, documents_per_call=None),
        ScriptedRewriter([]),
        top_k=2,
        max_iterations=1,
    )
    questions = [f"q{i} {doc.id}" for i, doc in enumerate(CORPUS)]

    async def main() -> list[tuple[int, str]]:
        return [(i, r.question) async for i, r in orch.arun_each(iter(questions), concurrency=3)]

    got = asyncio.run(main())
    assert sorted(enumerate(questions)) == sorted(got)


def test_a_single_string_is_not_a_batch_of_questions():
    """arun_batch("one question") is refused instead of running one run per character."""
    orch = CorrectiveRAGOrchestrator(
        ListRetriever(CORPUS), ScriptedEvaluator({}), ScriptedRewriter([])
    )
    with pytest.raises(ConfigError, match="iterable of strings"):
        asyncio.run(orch.arun_batch("How do bees make honey?"))
    with pytest.raises(ConfigError, match="concurrency"):
        asyncio.run(orch.arun_batch(QUESTIONS, concurrency=0))
