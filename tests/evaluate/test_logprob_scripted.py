"""Token probabilities over HTTP: the scripted server's scripts, read through the client.

The pure reader is tested in ``test_logprob_reader.py`` (and mutation-tested there); here the
same scripts go over HTTP, streamed or not, and through the evaluator.
"""

from __future__ import annotations

import json

import pytest

from corrective_rag.calls import Retries
from corrective_rag.evaluate.cache import VerdictCache
from corrective_rag.evaluate.llm import LLMEvaluator
from corrective_rag.evaluate.logprobs import value_probabilities
from corrective_rag.evaluate.spans import relevant_values
from corrective_rag.llm.client import OpenAIChatClient
from corrective_rag.testing import ScriptedLLMServer, TokenScript
from corrective_rag.types import Document

QUESTION = "How do volcanoes form magma chambers?"
ON = "Volcanoes form magma chambers when molten rock pools under the crust."
OFF = "The stock market closed higher after bank earnings."
DOCS = [Document("on", ON), Document("off", OFF)]


def test_ids_agree_with_the_evaluators_parser():
    """For the issue's replies the parser's verdict ids are the reader's ids, value for value."""
    text = (
        '{"verdicts": [{"doc_id": "b", "id": "a", "relevant": true},'
        ' {"id": "b", "details": {"id": "a", "relevant": true}, "relevant": false}]}'
    )
    with ScriptedLLMServer() as srv:
        evaluator = LLMEvaluator(OpenAIChatClient(srv.base_url, "scripted"), logprobs=None)
        found, _ = evaluator._parse(text, ["a", "b"])
    values = {v.document_id: v.value for v in relevant_values(text, ["a", "b"])}
    assert {k: v.relevant for k, v in found.items()} == values


SCRIPTS = [
    TokenScript(layout="compact", split="halves", alternatives="spellings"),
    TokenScript(layout="indented", split="inside"),
    TokenScript(layout="spaced", split="joined", alternatives="spellings"),
]


def client(server: ScriptedLLMServer) -> OpenAIChatClient:
    return OpenAIChatClient(server.base_url, "scripted", retries=Retries(max_retries=0))


GRADED = json.dumps(
    {"verdicts": [{"id": "on", "relevant": True, "score": 0.9}, {"id": "off", "relevant": False}]}
)


@pytest.mark.parametrize("streaming", [True, False])
@pytest.mark.parametrize("script", SCRIPTS, ids=lambda s: f"{s.layout}-{s.split}-{s.alternatives}")
def test_scripted_replies_are_read_at_the_written_probability(script, streaming):
    """Streamed or in one body, the scripted layouts and token splits reach the reader as the
    server wrote them: P(true) is what it put on each value."""
    with ScriptedLLMServer(reply=lambda r: GRADED, logprobs=script, streaming=streaming) as srv:
        reply = client(srv).complete([{"role": "user", "content": "grade"}], logprobs=5)
    assert ('"relevant":true' in reply.text) == (script.layout == "compact")
    assert {"on": 0.8, "off": 0.2} == pytest.approx(value_probabilities(reply.text, reply.logprobs))


@pytest.mark.parametrize("alternatives", ["none", "self"])
def test_a_server_listing_no_alternative_leaves_the_verdicts_verbal(alternatives):
    """top_logprobs [] or only the token itself: no probability is read; the verdict is the
    model's written one (never 0.5)."""
    script = TokenScript(alternatives=alternatives)
    with ScriptedLLMServer(reply=lambda r: GRADED, logprobs=script) as srv:
        chat = client(srv)
        reply = chat.complete([{"role": "user", "content": "x"}], logprobs=5)
        evaluation = LLMEvaluator(chat, cache=VerdictCache(0)).evaluate(QUESTION, DOCS)
    assert reply.logprobs
    assert {} == value_probabilities(reply.text, reply.logprobs)
    on, off = evaluation.verdicts
    assert ("verbal", "verbal") == (on.score_source, off.score_source)
    assert (True, 0.9, False) == (on.relevant, on.score, off.relevant)


@pytest.mark.parametrize("streaming", [True, False])
def test_a_character_split_over_two_tokens_is_rebuilt_from_bytes(streaming):
    """OpenAI's bytes: a character whose bytes two tokens share; the tokens spell the reply."""
    text = json.dumps(
        {"verdicts": [{"id": "été", "relevant": True, "reasoning": "蜜蜂 🌸"}]}, ensure_ascii=False
    )
    script = TokenScript(split_characters=True)
    with ScriptedLLMServer(reply=lambda r: text, logprobs=script, streaming=streaming) as srv:
        reply = client(srv).complete([{"role": "user", "content": "x"}], logprobs=5)
    assert text == reply.text
    assert text == "".join(t.token for t in reply.logprobs)
    assert {"été": pytest.approx(0.8)} == value_probabilities(reply.text, reply.logprobs)


def test_tokens_holding_the_api_key_are_dropped():
    """A reply echoing the key is redacted; its tokens would carry the key: none are kept."""
    key = "sk-CANARY-7f3e9a1b2c"
    with ScriptedLLMServer(reply=lambda r: f"the key is {key}", logprobs="agree") as srv:
        chat = OpenAIChatClient(srv.base_url, "scripted", api_key=key)
        reply = chat.complete([{"role": "user", "content": "x"}], logprobs=5)
    assert key not in reply.text
    assert reply.logprobs is None
