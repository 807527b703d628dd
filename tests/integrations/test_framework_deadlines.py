"""Deadlines hold through the framework chat models: ``asyncio.timeout`` around ``arun`` with a
LangChain or LlamaIndex chat model ends the run while the provider still holds the call."""

from __future__ import annotations

import asyncio
import threading

import pytest
from corpus import CORPUS, QUESTION
from http_models import HTTPLLM, HTTPChatModel, ToolHTTPLLM

from corrective_rag.evaluate.cache import VerdictCache
from corrective_rag.evaluate.llm import LLMEvaluator
from corrective_rag.integrations.langchain import LangChainChatModel
from corrective_rag.integrations.llamaindex import LlamaIndexChatModel
from corrective_rag.loop.aio import arun
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.testing import Fault, ScriptedLLMServer
from corrective_rag.testing.fakes import ListRetriever, ScriptedRewriter

RELEASE_AFTER = 20.0  # a bound for an adapter that ignores the deadline, never reached otherwise

MODELS = {
    "langchain": lambda url: LangChainChatModel(HTTPChatModel(base_url=url)),
    "llamaindex": lambda url: LlamaIndexChatModel(HTTPLLM(base_url=url)),
    "llamaindex tools": lambda url: LlamaIndexChatModel(ToolHTTPLLM(base_url=url)),
}


@pytest.mark.parametrize("make", MODELS.values(), ids=MODELS.keys())
def test_asyncio_timeout_around_arun_ends_a_framework_call_in_flight(make):
    """arun under asyncio.timeout, expiring once the call is held, ends before the server
    lets the held call go."""
    with ScriptedLLMServer(faults=lambda request, n: Fault.held()) as server:
        released = threading.Event()

        def release() -> None:
            released.set()
            server.release()

        watchdog = threading.Timer(RELEASE_AFTER, release)
        watchdog.start()
        orch = CorrectiveRAGOrchestrator(
            ListRetriever(CORPUS),
            LLMEvaluator(make(server.base_url), cache=VerdictCache(0)),
            ScriptedRewriter([]),
            max_iterations=1,
        )

        async def main() -> None:
            async with asyncio.timeout(None) as deadline:

                async def expire_once_asked() -> None:  # the deadline passes mid-call
                    await asyncio.to_thread(server.wait_for_requests, 1, 60)
                    deadline.reschedule(asyncio.get_running_loop().time())

                watcher = asyncio.create_task(expire_once_asked())
                await arun(orch, QUESTION)
            await watcher

        try:
            with pytest.raises(TimeoutError):
                asyncio.run(main())
            ended_first = not released.is_set()
        finally:
            watchdog.cancel()
            release()
        assert server.request_count >= 1
    assert ended_first
