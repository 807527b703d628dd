"""Knowledge refinement grades strips with the evaluator as given, never the proposing copy."""

from __future__ import annotations

from corrective_rag.evaluate.cache import VerdictCache
from corrective_rag.evaluate.llm import LLMEvaluator
from corrective_rag.llm import prompts
from corrective_rag.llm.client import OpenAIChatClient, Retries
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.rewrite.llm import LLMRewriter
from corrective_rag.testing import ListRetriever, ScriptedLLMServer
from corrective_rag.types import Document

QUESTION = "Which moon is the largest moon of Jupiter?"
DOCS = [
    Document("g", "Ganymede is the largest moon of Jupiter. It has a magnetic field."),
    Document("c", "Callisto is a large moon of Jupiter. It is heavily cratered."),
]


def test_strip_grading_asks_for_no_next_query() -> None:
    """With one chat model for grading and rewriting, the strip calls carry no propose rule."""
    with ScriptedLLMServer() as server:
        chat = OpenAIChatClient(server.base_url, "scripted", retries=Retries(max_retries=0))
        orch = CorrectiveRAGOrchestrator(
            ListRetriever(DOCS),
            LLMEvaluator(chat, cache=VerdictCache(0)),
            LLMRewriter(chat),
            refine=True,
            min_relevant=1,
        )
        result = orch.run(QUESTION)
        systems = [r["messages"][0]["content"] for r in server.requests]
    assert result.strips
    strip_calls = [s for s in systems if s.startswith(prompts.GRADER_SYSTEM[:40])][1:]
    assert strip_calls
    assert [False] * len(strip_calls) == [prompts.PROPOSE_RULE in s for s in strip_calls]
