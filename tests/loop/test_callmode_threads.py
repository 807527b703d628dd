"""The call mode travels with the request: a wrapper grading in a thread of its own keeps it.

``ThreadPoolExecutor.submit``, ``threading.Thread`` and ``loop.run_in_executor`` run the
evaluator where the loop's context is not (none of them copies it); the request is found among
those the loop waits on, so one-call stays one call per iteration (issue 46: it was 5 calls for 3
iterations).
"""

from __future__ import annotations

import asyncio
import threading
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from test_one_call import DOCS, QUESTION
from test_one_call import repeating_judge as judge

from corrective_rag.calls.proposals import asking_proposals, proposals_wanted
from corrective_rag.evaluate.cache import VerdictCache
from corrective_rag.evaluate.llm import LLMEvaluator
from corrective_rag.llm.client import OpenAIChatClient, Retries
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.protocols import Evaluator
from corrective_rag.rewrite.llm import LLMRewriter
from corrective_rag.testing import ListRetriever, ScriptedLLMServer
from corrective_rag.types import Document, Evaluation


def submitted(inner: Evaluator, question: str, documents: Sequence[Document]) -> Evaluation:
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(inner.evaluate, question, documents).result(timeout=30)


def threaded(inner: Evaluator, question: str, documents: Sequence[Document]) -> Evaluation:
    out: list[Evaluation] = []
    thread = threading.Thread(target=lambda: out.append(inner.evaluate(question, documents)))
    thread.start()
    thread.join(timeout=30)
    return out[0]


def in_executor(inner: Evaluator, question: str, documents: Sequence[Document]) -> Evaluation:
    async def main() -> Evaluation:
        running = asyncio.get_running_loop()
        future = running.run_in_executor(None, inner.evaluate, question, documents)
        return await asyncio.wait_for(future, timeout=30)

    return asyncio.run(main())


class Hopping:
    """A user's "give up after 30 s" wrapper: grades through another thread."""

    def __init__(self, inner: LLMEvaluator, hop: Callable[..., Evaluation]) -> None:
        self.inner = inner
        self.hop = hop
        self.documents_per_call = inner.documents_per_call

    def evaluate(self, question: str, documents: Sequence[Document]) -> Evaluation:
        return self.hop(self.inner, question, documents)


def run(hop: Callable[..., Evaluation] | None, call_mode: str = "one-call") -> list[str]:
    """The schema names of the calls a 3-iteration run makes."""
    with ScriptedLLMServer(judge) as srv:
        client = OpenAIChatClient(srv.base_url, "scripted", retries=Retries(max_retries=0))
        evaluator: Any = LLMEvaluator(client, cache=VerdictCache(0))
        if hop is not None:
            evaluator = Hopping(evaluator, hop)
        orch = CorrectiveRAGOrchestrator(
            ListRetriever(DOCS),
            evaluator,
            LLMRewriter(client),
            top_k=2,
            min_relevant=20,
            call_mode=call_mode,  # type: ignore[arg-type]
        )
        result = orch.run(QUESTION, max_iterations=3)
        assert 3 == result.iterations
        return [r["response_format"]["json_schema"]["name"] for r in srv.requests]


@pytest.mark.parametrize("hop", [submitted, threaded, in_executor], ids=lambda h: h.__name__)
def test_a_wrapper_grading_in_its_own_thread_keeps_one_call_per_iteration(hop):
    """Each idiom: 3 grading calls for 3 iterations, each proposing; no rewriting call."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing to warn of: the request was found
        kinds = run(hop)
    assert ["verdicts"] * 3 == kinds
    assert run(None) == kinds


@pytest.mark.parametrize("hop", [submitted, threaded], ids=lambda h: h.__name__)
def test_two_call_mode_stays_two_call_across_the_hop(hop):
    """A two-call loop's hop grades without a proposal, and the rewriter makes its own call."""
    assert ["verdicts", "rewrite"] * 2 + ["verdicts"] == run(hop, "two-call")


def test_the_request_is_found_by_its_question_and_documents():
    """Off the loop's context, the answer is that of the waiting request this call can be."""
    docs = [Document("a", "x"), Document("b", "y")]
    answers: list[bool] = []

    def elsewhere(question: str, documents: Sequence[Document]) -> None:
        thread = threading.Thread(
            target=lambda: answers.append(proposals_wanted(question, documents))
        )
        thread.start()
        thread.join()

    with asking_proposals(True, "q1", docs), asking_proposals(False, "q2", docs):
        elsewhere("q1", docs[:1])  # part of q1's request
        elsewhere("q2", docs)
    elsewhere("q1", docs)  # nobody waits any more: a direct call
    assert [True, False, False] == answers


def test_an_ambiguous_request_grades_two_call_and_warns_once():
    """Two waiting requests in different modes, a call that could be either: two-call, warned
    once per process."""
    import corrective_rag.calls.proposals as proposals

    proposals._WARNED.clear()
    answers: list[bool] = []
    caught: list[warnings.WarningMessage] = []

    def elsewhere() -> None:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            answers.append(proposals_wanted())
            answers.append(proposals_wanted("other question"))
        caught.extend(seen)

    with asking_proposals(True, "q1", []), asking_proposals(False, "q2", []):
        thread = threading.Thread(target=elsewhere)
        thread.start()
        thread.join()
    assert [False, False] == answers
    assert 1 == len(caught) and "two-call" in str(caught[0].message)
