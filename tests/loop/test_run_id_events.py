"""Every event a run causes carries its run_id where the application merges context variables."""

from __future__ import annotations

import threading

import structlog
from structlog.testing import LogCapture

from corrective_rag.calls import Retries
from corrective_rag.evaluate.cache import VerdictCache
from corrective_rag.evaluate.llm import LLMEvaluator
from corrective_rag.llm.client import OpenAIChatClient
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.rewrite.llm import LLMRewriter
from corrective_rag.testing import ListRetriever, ScriptedLLMServer
from corrective_rag.types import Document

DOCS = [
    Document("d0", "Ganymede is the largest moon of Jupiter."),
    Document("d1", "Io is a volcanic moon of Jupiter."),
    Document("d2", "Titan is the largest moon of Saturn."),
    Document("d3", "Europa has an ocean under its ice."),
]
QUESTIONS = ["Which moon is the largest moon of Jupiter?", "Which moon of Jupiter has volcanoes?"]


def test_evaluator_and_client_events_carry_the_run_id_of_their_run() -> None:
    """Two runs at once on one orchestrator: the evaluator's and the LLM client's events (logged
    in the grading threads too) name the run that caused them, never the other one."""
    capture = LogCapture()
    structlog.configure(
        processors=[structlog.contextvars.merge_contextvars, capture],
        wrapper_class=structlog.make_filtering_bound_logger(0),
    )
    try:
        with ScriptedLLMServer() as server:
            chat = OpenAIChatClient(server.base_url, "scripted", retries=Retries(max_retries=0))
            evaluator = LLMEvaluator(chat, batch_size=1, max_workers=2, cache=VerdictCache(0))
            orch = CorrectiveRAGOrchestrator(
                ListRetriever(DOCS), evaluator, LLMRewriter(chat), top_k=2, max_iterations=2
            )
            results: dict[str, str] = {}

            def ask(question: str) -> None:
                results[question] = orch.run(question).run_id

            threads = [threading.Thread(target=ask, args=(q,)) for q in QUESTIONS]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    finally:
        structlog.reset_defaults()
    assert set(results) == set(QUESTIONS)
    events = capture.entries
    for name in ("llm_call", "evaluation_finished", "run_started", "run_finished"):
        assert any(e["event"] == name for e in events), name
    caused = [e for e in events if e["event"] in ("llm_call", "evaluation_finished")]
    assert all(e.get("run_id") in results.values() for e in caused), caused
    for question, run_id in results.items():
        started = [e for e in events if e["event"] == "run_started" and e["run_id"] == run_id]
        assert [question] == [e["question"] for e in started]
    assert {e["run_id"] for e in caused} == set(results.values())
