"""LLMGenerator against the scripted server: citations, abstention and the support check."""

from __future__ import annotations

import json

from corrective_rag.calls import Retries
from corrective_rag.generate.llm import LLMGenerator
from corrective_rag.llm import prompts
from corrective_rag.llm.client import OpenAIChatClient
from corrective_rag.testing import ScriptedLLMServer
from corrective_rag.testing.replies import default_reply
from corrective_rag.types import Document

QUESTION = "How do volcanoes form magma chambers?"
DOCS = [
    Document("d0", "Volcanoes form magma chambers when molten rock pools under the crust."),
    Document("d1", "Bank earnings lifted the stock market on Tuesday."),
]


def generator(server: ScriptedLLMServer, **kw) -> LLMGenerator:
    chat = OpenAIChatClient(server.base_url, "scripted", retries=Retries(max_retries=0))
    return LLMGenerator(chat, **kw)


def test_no_documents_abstains_without_a_call():
    """With no documents the generator abstains and calls no model."""
    with ScriptedLLMServer() as srv:
        answer = generator(srv).generate(QUESTION, [])
        assert 0 == srv.request_count
    assert answer.abstained and () == answer.cited_ids


def test_citations_limited_to_given_ids_and_support_checked():
    """Cited ids not given are dropped; a supported answer is checked once, not regenerated."""

    def reply(request):
        text = default_reply(request)
        if request["messages"][0]["content"].startswith(prompts.GENERATOR_SYSTEM[:40]):
            obj = json.loads(text)
            obj["cited_ids"].append("ghost")
            text = json.dumps(obj)
        return text

    with ScriptedLLMServer(reply=reply) as srv:
        answer = generator(srv).generate(QUESTION, DOCS)
        assert 2 == srv.request_count
    assert ("d0",) == answer.cited_ids
    assert (True, False, False) == (answer.supported, answer.regenerated, answer.abstained)
    assert 2 == answer.usage.llm_calls


def test_unsupported_answer_is_regenerated_once_from_context():
    """An answer the support check rejects is regenerated under the strict rule and rechecked."""

    def reply(request):
        system = request["messages"][0]["content"]
        if system.startswith(prompts.GENERATOR_SYSTEM[:40]) and "not supported" not in system:
            return json.dumps(
                {"answer": "Volcanoes are cheese.", "cited_ids": ["d0"], "abstain": False}
            )
        return default_reply(request)

    with ScriptedLLMServer(reply=reply) as srv:
        answer = generator(srv).generate(QUESTION, DOCS)
        assert prompts.STRICT_GENERATOR_RULE in srv.requests[2]["messages"][0]["content"]
        assert 4 == srv.request_count
    assert (True, True) == (answer.supported, answer.regenerated)
    assert "cheese" not in answer.text


def test_model_abstention_is_explicit():
    """When the model says the documents do not answer, the answer is an abstention."""
    with ScriptedLLMServer() as srv:
        answer = generator(srv).generate("Who won the 1998 chess olympiad?", DOCS)
        assert 1 == srv.request_count
    assert (True, (), None) == (answer.abstained, answer.cited_ids, answer.supported)


def test_support_check_can_be_switched_off():
    """Without the support check one call is made and supported stays None."""
    with ScriptedLLMServer() as srv:
        answer = generator(srv, support_check=False).generate(QUESTION, DOCS)
        assert 1 == srv.request_count
    assert answer.supported is None and not answer.abstained
