"""Token probabilities through the LangChain and LlamaIndex adapters: asked as OpenAI asks."""

from __future__ import annotations

import pytest
from http_models import HTTPLLM, HTTPChatModel, LogprobHTTPChatModel, LogprobHTTPLLM

from corrective_rag.errors import InputError
from corrective_rag.evaluate.logprobs import value_probabilities
from corrective_rag.integrations.langchain import LangChainChatModel
from corrective_rag.integrations.llamaindex import LlamaIndexChatModel
from corrective_rag.llm import prompts
from corrective_rag.testing import ScriptedLLMServer, TokenScript

QUESTION = "How do volcanoes form magma chambers?"
DOCS = [
    ("on", "Volcanoes form magma chambers when molten rock pools under the crust."),
    ("off", "The stock market closed higher after bank earnings."),
]
GRADING = prompts.grader_messages(QUESTION, DOCS)

ADAPTERS = {
    "langchain-fields": lambda url: LangChainChatModel(
        LogprobHTTPChatModel(base_url=url), structured=False
    ),
    "langchain-bound": lambda url: LangChainChatModel(
        HTTPChatModel(base_url=url), structured=False, bind_logprobs=True
    ),
    "llamaindex-fields": lambda url: LlamaIndexChatModel(LogprobHTTPLLM(base_url=url)),
}


@pytest.mark.parametrize("name", sorted(ADAPTERS))
@pytest.mark.parametrize("layout", ["spaced", "compact"])
def test_an_adapter_asks_and_hands_on_what_the_server_sent(name, layout):
    """``logprobs=True`` reaches the server as ``logprobs: true, top_logprobs: 5``; the grading
    reply's probabilities come back and are read for each document."""
    script = TokenScript(written=0.3, layout=layout)
    with ScriptedLLMServer(logprobs=script) as srv:
        chat = ADAPTERS[name](srv.base_url)
        reply = chat.complete(GRADING, json_schema=prompts.verdict_schema(), logprobs=True)
        request = srv.requests[-1]
    assert (True, 5) == (request.get("logprobs"), request.get("top_logprobs"))
    assert {"on": 0.3, "off": 0.7} == pytest.approx(value_probabilities(reply.text, reply.logprobs))


@pytest.mark.parametrize(
    "make",
    [
        lambda url: LangChainChatModel(HTTPChatModel(base_url=url), structured=False),
        lambda url: LlamaIndexChatModel(HTTPLLM(base_url=url)),
    ],
    ids=["langchain", "llamaindex"],
)
def test_a_model_without_the_fields_is_not_asked(make):
    """A model whose class declares no ``logprobs`` fields (its provider may refuse them) is
    not sent them; its replies carry none, and its verdicts stay verbal."""
    with ScriptedLLMServer(logprobs="agree") as srv:
        reply = make(srv.base_url).complete(GRADING, logprobs=5)
        request = srv.requests[-1]
    assert "logprobs" not in request and "top_logprobs" not in request
    assert reply.logprobs is None


def test_the_adapters_read_logprobs_as_the_client_does():
    """The same values are refused by the adapters and the package's client."""
    with ScriptedLLMServer() as srv:
        chat = ADAPTERS["langchain-fields"](srv.base_url)
        for wrong in ("5", 21, -1, 2.5):
            with pytest.raises(InputError, match="logprobs"):
                chat.complete(GRADING, logprobs=wrong)
        assert 0 == srv.request_count
        chat.complete(GRADING, logprobs=False)
        assert "logprobs" not in srv.requests[-1]
