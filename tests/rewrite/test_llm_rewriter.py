"""LLMRewriter against the scripted server: feedback in the prompt, drift guard, failures."""

from __future__ import annotations

import json

import pytest

from corrective_rag.calls import Retries
from corrective_rag.errors import LLMResponseError
from corrective_rag.llm.client import OpenAIChatClient
from corrective_rag.rewrite.llm import LLMRewriter
from corrective_rag.testing import Fault, ScriptedLLMServer
from corrective_rag.types import Document, Judged, Relevance, RewriteRequest, Verdict

QUESTION = "How do volcanoes form magma chambers?"


def request(tried=(QUESTION,)) -> RewriteRequest:
    kept = Judged(
        Document("k", "Magma chambers collect molten rock beneath volcanoes."),
        Verdict("k", True, Relevance.HIGH, 0.9, 0.9, reasoning="explains chambers"),
    )
    dropped = Judged(
        Document("x", "Volcano tourism in Iceland is booming."),
        Verdict("x", False, Relevance.LOW, 0.1, 0.8, "about tourism", missing="how magma rises"),
    )
    ungraded = Judged(Document("u", "unreadable"), Verdict.ungraded("u", "parse failed"))
    return RewriteRequest(QUESTION, tuple(tried), (dropped, kept, ungraded))


def rewriter(server: ScriptedLLMServer, **kw) -> LLMRewriter:
    chat = OpenAIChatClient(server.base_url, "scripted", retries=Retries(max_retries=0))
    return LLMRewriter(chat, **kw)


def test_feedback_reaches_the_prompt_and_a_query_comes_back():
    """Missing facts and kept excerpts are in the prompt, rejected documents' reasons are not."""
    with ScriptedLLMServer() as srv:
        result = rewriter(srv).rewrite(request())
        user = srv.requests[0]["messages"][-1]["content"]
    assert result.query.startswith(QUESTION) and QUESTION != result.query
    assert result.rejected is None
    assert "how magma rises" in user and "about tourism" not in user
    assert "Magma chambers collect molten rock" in user
    assert "unreadable" not in user
    assert 1 == result.usage.llm_calls


@pytest.mark.parametrize(
    ("query", "reason"),
    [("stock market prices", "drift"), (QUESTION.upper(), "repeats"), ("  ", "empty")],
)
def test_drift_guard_rejects_bad_candidates(query, reason):
    """A drifting, repeated or empty candidate is rejected and kept as the candidate."""
    reply = json.dumps({"query": query, "rationale": "r"})
    with ScriptedLLMServer(reply=lambda r: reply) as srv:
        result = rewriter(srv).rewrite(request())
    assert result.query is None
    assert reason in result.rejected
    assert " ".join(query.split()) == result.candidate


def test_llm_error_becomes_a_rejected_rewrite():
    """An endpoint failure gives Rewrite(query=None, rejected='llm error: ...') with usage."""
    with ScriptedLLMServer() as srv:
        srv.enqueue(Fault.error(500))
        result = rewriter(srv).rewrite(request())
    assert result.query is None
    assert result.rejected.startswith("llm error")
    assert (1, 1) == (result.usage.llm_calls, result.usage.failed_calls)


def test_unparseable_reply_becomes_a_rejected_rewrite_or_raises_in_strict_mode():
    """A non-JSON reply is a rejected rewrite in lenient mode and an error in strict mode."""
    with ScriptedLLMServer(reply=lambda r: "try volcano magma") as srv:
        result = rewriter(srv).rewrite(request())
        srv.enqueue(Fault.error(500))
        with pytest.raises(LLMResponseError):
            rewriter(srv, strict=True).rewrite(request())
    assert result.query is None and result.rejected.startswith("unparseable")
