"""Usage a server reports that no call can have spent is "not reported", never a crash."""

from __future__ import annotations

import pytest

from corrective_rag.evaluate.cache import VerdictCache
from corrective_rag.evaluate.llm import LLMEvaluator
from corrective_rag.integrations.bridge import reply_usage
from corrective_rag.llm import Pricing
from corrective_rag.llm.client import OpenAIChatClient
from corrective_rag.llm.reply import MOST_TOKENS_PER_CALL, reported_tokens
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.rewrite.llm import LLMRewriter
from corrective_rag.testing import ScriptedLLMServer
from corrective_rag.testing.fakes import ListRetriever
from corrective_rag.testing.hostile_content import absurd_usage
from corrective_rag.types import Document

HELLO = [{"role": "user", "content": "say hello"}]
ABSURD = [10**400, 10**20, MOST_TOKENS_PER_CALL + 1, -1, True, 1.5, "12", None, [3]]


@pytest.mark.parametrize("count", ABSURD, ids=repr)
def test_absurd_usage_is_counted_instead(count):
    """A count that is no int in [0, MOST_TOKENS_PER_CALL] is replaced by the local estimate."""
    with ScriptedLLMServer() as srv:
        srv.enqueue(absurd_usage(count))
        client = OpenAIChatClient(srv.base_url, "scripted", pricing=Pricing(2.0, 2.0))
        reply = client.complete(HELLO)
    assert 2 == reply.usage.completion_tokens
    assert 0 < reply.usage.prompt_tokens < 100
    assert reply.usage.cost_usd < 1.0


def test_a_sane_count_is_kept():
    """The largest count a call can spend is still read as reported."""
    assert MOST_TOKENS_PER_CALL == reported_tokens(MOST_TOKENS_PER_CALL)
    assert 0 == reported_tokens(0)


@pytest.mark.parametrize("count", ABSURD, ids=repr)
def test_framework_usage_that_is_absurd_is_counted(count):
    """A framework's absurd token counts are counted with cl100k instead, as missing ones are."""
    usage = reply_usage(count, count, 0.1, HELLO, "hello there")
    assert 2 == usage.completion_tokens
    assert 0 < usage.prompt_tokens < 100


def test_a_run_against_a_server_reporting_a_400_digit_usage_completes():
    """A 400-digit usage on every reply neither ends the run nor reaches its totals."""
    corpus = [Document("bees", "Honey bees make honey from nectar."), Document("x", "Bread.")]
    with ScriptedLLMServer(count_tokens=lambda t: 10**400) as srv:
        chat = OpenAIChatClient(srv.base_url, "scripted", pricing=Pricing(1.0, 1.0))
        orch = CorrectiveRAGOrchestrator(
            ListRetriever(corpus),
            LLMEvaluator(chat, cache=VerdictCache(0)),
            LLMRewriter(chat),
            top_k=2,
            max_iterations=2,
        )
        result = orch.run("How do honey bees make honey?")
    assert result.usage.total.total_tokens < 10_000
