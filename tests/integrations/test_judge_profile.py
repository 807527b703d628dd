"""The judge profile is honoured by the library and by both framework retrievers (issue 46 item 1).

Each test runs the judge with the profile and without it against the same real HTTP server, so
it fails when the profile is ignored: the library's probability judge at 0.9 keeps nothing the
written verdicts would keep; the retrievers built ``from_profile`` ask the pointwise judge's
yes/no question, which the default judge never asks.
"""

from __future__ import annotations

import pytest
from http_models import HTTPLLM, HTTPChatModel
from judge_replies import Written, graded_judge

from corrective_rag import CorrectiveRAGOrchestrator, LLMEvaluator, LLMRewriter
from corrective_rag.errors import ConfigError
from corrective_rag.evaluate import JudgeProfile
from corrective_rag.evaluate.cache import VerdictCache
from corrective_rag.evaluate.pointwise import POINTWISE_SYSTEM
from corrective_rag.evaluate.profile import write_profiles
from corrective_rag.llm.client import OpenAIChatClient, Retries
from corrective_rag.testing import ListRetriever, ScriptedLLMServer
from corrective_rag.types import Document

QUESTION = "Which moon is the largest moon of Jupiter?"
DOCS = [
    Document("ganymede", "Ganymede is the largest moon of Jupiter."),
    Document("titan", "Titan is the largest moon of Saturn."),
]
SURE = graded_judge(lambda q, d: Written(True, 0.9, 0.9, 0.8))


def _pointwise_asked(server: ScriptedLLMServer) -> bool:
    return any(r["messages"][0]["content"] == POINTWISE_SYSTEM for r in server.requests)


def test_the_library_runs_the_judge_a_profile_file_chose(tmp_path):
    """``JudgeProfile.read(path, model=...)`` then ``.evaluator(chat=...)``: the probability
    judge at 0.9 decides every verdict (none kept); ``LLMEvaluator(chat)`` keeps both."""
    path = tmp_path / "profile.json"
    chosen = JudgeProfile.of("logprob", model="scripted", threshold=0.9)
    write_profiles(path, "scripted", {"logprob": chosen}, "logprob")
    with ScriptedLLMServer(faults=SURE) as server:
        chat = OpenAIChatClient(server.base_url, "scripted", retries=Retries(max_retries=0))
        profile = JudgeProfile.read(path, model="scripted")
        assert profile is not None
        results = {}
        for how, evaluator in (
            ("profile", profile.evaluator(chat=chat, cache=VerdictCache(0))),
            ("none", LLMEvaluator(chat, cache=VerdictCache(0))),
        ):
            orch = CorrectiveRAGOrchestrator(ListRetriever(DOCS), evaluator, LLMRewriter(chat))
            results[how] = orch.run(QUESTION, max_iterations=1)
    assert () == results["profile"].kept_ids
    assert {"logprob"} == {v.score_source for r in results["profile"].history for v in r.verdicts}
    assert {"ganymede", "titan"} == set(results["none"].kept_ids)
    with pytest.raises(ConfigError, match="not 'another'"):
        profile.evaluator(chat=OpenAIChatClient("http://127.0.0.1:9/v1", "another"))


def test_the_langchain_retriever_runs_the_judge_of_its_profile():
    """``CorrectiveRetriever.from_profile``: the pointwise judge it declares asks its yes/no
    question through the LangChain chat model; the retriever over a default loop does not."""
    pytest.importorskip("langchain_core")
    from corrective_rag.integrations.langchain import CorrectiveRetriever, LangChainChatModel

    profile = JudgeProfile.of("pointwise", model="scripted", threshold=0.5)
    asked = {}
    for how in ("profile", "none"):
        with ScriptedLLMServer(faults=SURE) as server:
            chat = LangChainChatModel(HTTPChatModel(base_url=server.base_url))
            if how == "profile":
                retriever = CorrectiveRetriever.from_profile(
                    profile, ListRetriever(DOCS), chat, loop={"max_iterations": 1}, k=2
                )
            else:
                loop = CorrectiveRAGOrchestrator(
                    ListRetriever(DOCS), LLMEvaluator(chat), LLMRewriter(chat), max_iterations=1
                )
                retriever = CorrectiveRetriever(orchestrator=loop, k=2)
            found = retriever.invoke(QUESTION)
            asked[how] = _pointwise_asked(server)
        assert found  # both judges keep the two documents the model calls relevant
    assert {"profile": True, "none": False} == asked
    other = JudgeProfile.of("pointwise", model="another")
    with ScriptedLLMServer() as server:
        chat = LangChainChatModel(HTTPChatModel(base_url=server.base_url))
        with pytest.raises(ConfigError, match="measured for model 'another'"):
            CorrectiveRetriever.from_profile(other, ListRetriever(DOCS), chat)


def test_the_llamaindex_retriever_runs_the_judge_of_its_profile():
    """The LlamaIndex ``CorrectiveRetriever.from_profile`` likewise."""
    pytest.importorskip("llama_index.core")
    from corrective_rag.integrations.llamaindex import CorrectiveRetriever, LlamaIndexChatModel

    profile = JudgeProfile.of("pointwise", model="scripted", threshold=0.5)
    asked = {}
    for how in ("profile", "none"):
        with ScriptedLLMServer(faults=SURE) as server:
            chat = LlamaIndexChatModel(HTTPLLM(base_url=server.base_url))
            if how == "profile":
                retriever = CorrectiveRetriever.from_profile(
                    profile, ListRetriever(DOCS), chat, loop={"max_iterations": 1}
                )
            else:
                loop = CorrectiveRAGOrchestrator(
                    ListRetriever(DOCS), LLMEvaluator(chat), LLMRewriter(chat), max_iterations=1
                )
                retriever = CorrectiveRetriever(loop)
            found = retriever.retrieve(QUESTION)
            asked[how] = _pointwise_asked(server)
        assert found
    assert {"profile": True, "none": False} == asked
