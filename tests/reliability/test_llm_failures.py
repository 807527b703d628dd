"""Failures of the LLM path must not look like success, and no model output may fail a query."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from corrective_rag.calls import Retries, Timeouts
from corrective_rag.errors import LLMResponseError
from corrective_rag.evaluate.llm import LLMEvaluator
from corrective_rag.generate.llm import LLMGenerator
from corrective_rag.llm import prompts
from corrective_rag.llm.client import OpenAIChatClient
from corrective_rag.loop.budget import Budget
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.rewrite.llm import LLMRewriter
from corrective_rag.runs.execution.attempt import INTERRUPTED
from corrective_rag.runs.execution.batch import run_batch
from corrective_rag.runs.execution.failures import llm_failure, permanent_failure
from corrective_rag.runs.execution.queries import Query
from corrective_rag.runs.records.results import read_results
from corrective_rag.testing import Fault, ScriptedLLMServer
from corrective_rag.testing.fakes import ListRetriever, ScriptedEvaluator
from corrective_rag.testing.replies import default_reply
from corrective_rag.types import Document, StopReason

QUESTION = "How do honey bees make honey from nectar?"
CORPUS = [
    Document("bees", "Honey bees make honey from flower nectar they collect."),
    Document("wasp", "Wasps hunt insects and build paper nests."),
    Document("bread", "Bread dough rises with yeast."),
]


def _chat(server: ScriptedLLMServer, **kw: Any) -> OpenAIChatClient:
    kw.setdefault("retries", Retries(max_retries=1, backoff_base=0.01))
    return OpenAIChatClient(server.base_url, "scripted", **kw)


def _orchestrator(chat: OpenAIChatClient, **kw: Any) -> CorrectiveRAGOrchestrator:
    # the rewriter's own call (two-call mode), which these failures are about
    kw.setdefault("evaluator", LLMEvaluator(chat, batch_size=3, max_workers=1, propose=False))
    kw.setdefault("rewriter", LLMRewriter(chat))
    evaluator, rewriter = kw.pop("evaluator"), kw.pop("rewriter")
    return CorrectiveRAGOrchestrator(
        ListRetriever(CORPUS), evaluator, rewriter, top_k=2, max_iterations=3, **kw
    )


def _rewrite_reply(text: str):
    def reply(request: Mapping[str, Any]) -> str:
        system = request["messages"][0]["content"]
        if system.startswith(prompts.REWRITER_SYSTEM[:40]):
            return text
        return default_reply(request)

    return reply


@pytest.mark.parametrize("escape", ["\\u0000", "\\ud800"])
def test_a_rewrite_with_nul_or_a_lone_surrogate_is_a_rejected_rewrite(escape):
    """A model's rewrite holding NUL or a lone surrogate (valid JSON escapes) ends the run with
    rewrite_failed and the finished iteration kept, instead of failing the query."""
    reply = _rewrite_reply('{"query": "honey bees nectar ' + escape + ' hive", "rationale": "x"}')
    with ScriptedLLMServer(reply=reply) as server:
        result = _orchestrator(_chat(server), min_relevant=3).run(QUESTION)
    assert StopReason.REWRITE_FAILED == result.stop_reason
    rewrite = result.history[0].rewrite
    assert rewrite is not None and rewrite.query is None
    assert "rewrite" in (rewrite.rejected or "")
    json.dumps(rewrite.candidate, ensure_ascii=False).encode("utf-8")  # storable as UTF-8


def test_a_strict_rewriter_that_cannot_parse_ends_the_run_with_rewrite_failed():
    """A strict LLMRewriter's VerdictParseError does not escape run(): it ends rewrite_failed."""
    with ScriptedLLMServer(reply=_rewrite_reply("I would search for bees.")) as server:
        chat = _chat(server)
        orch = _orchestrator(chat, rewriter=LLMRewriter(chat, strict=True), min_relevant=3)
        result = orch.run(QUESTION)
    assert StopReason.REWRITE_FAILED == result.stop_reason
    assert "rewriter failed" in result.stop_detail


def test_a_strict_generator_that_cannot_parse_gives_an_abstained_answer():
    """A strict LLMGenerator's VerdictParseError becomes an abstained answer with the reason."""

    def reply(request: Mapping[str, Any]) -> str:
        system = request["messages"][0]["content"]
        if system.startswith(prompts.GENERATOR_SYSTEM[:40]):
            return "Bees make honey, I think."
        return default_reply(request)

    with ScriptedLLMServer(reply=reply) as server:
        chat = _chat(server)
        orch = _orchestrator(chat, generator=LLMGenerator(chat, strict=True), min_relevant=1)
        result = orch.run(QUESTION)
    assert result.answer is not None and result.answer.abstained
    assert "generator failed" in result.answer.text


@pytest.mark.timeout(120)
def test_budget_max_seconds_ends_calls_in_flight():
    """Budget.max_seconds is a deadline for calls in flight: a server holding every request
    ends the run with budget_exhausted, not after the client's own (longer) timeouts."""
    with ScriptedLLMServer(faults=lambda request, n: Fault.held()) as server:
        chat = _chat(server, timeouts=Timeouts(read=600, total=600))
        result = _orchestrator(chat, budget=Budget(max_seconds=1.0)).run(QUESTION)
    assert StopReason.BUDGET_EXHAUSTED == result.stop_reason
    verdicts = [v for it in result.history for v in it.verdicts]
    assert verdicts and all(not v.graded for v in verdicts)
    assert "Budget.max_seconds" in (verdicts[0].error or "")


def test_a_run_whose_every_llm_call_failed_is_an_error_line_that_resume_reruns(tmp_path):
    """Every call answered 503: the query's line is an error; once the server works, the same
    batch reruns it to an ok line."""
    out = tmp_path / "r.jsonl"
    queries = [Query("q1", QUESTION)]
    with ScriptedLLMServer(faults=lambda request, n: Fault.error(503)) as server:
        orch = _orchestrator(_chat(server))
        summary = run_batch(queries, orch.run, out_path=out, progress=False)
    (line,) = read_results(out)
    assert (0, 1) == (summary.ok, summary.failures)
    assert "every LLM call of this query failed" in line.error["message"]
    assert "HTTP 503" in line.error["message"]
    with ScriptedLLMServer() as server:
        summary = run_batch(queries, _orchestrator(_chat(server)).run, out_path=out, progress=False)
    assert (1, 0, 0) == (summary.ok, summary.failures, summary.skipped)


def test_llm_failure_ignores_runs_without_llm_calls_or_with_one_answer():
    """A run of the offline components, or with any graded verdict, is not an LLM failure."""
    orch = CorrectiveRAGOrchestrator(
        ListRetriever(CORPUS), ScriptedEvaluator({}), LLMRewriter(_NoChat()), max_iterations=1
    )
    assert llm_failure(orch.run(QUESTION)) is None
    assert permanent_failure("x answered an error (HTTP 503): boom") is None
    assert (401, "wrong or missing API key: check OPENAI_API_KEY") == permanent_failure(
        "llm error: u answered an error (HTTP 401): no"
    )


class _NoChat:
    model = "none"

    def complete(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("no call expected with max_iterations=1")


@pytest.mark.parametrize(
    ("status", "fix"), [(401, "OPENAI_API_KEY"), (403, "key"), (404, "--llm-url")]
)
def test_a_batch_meeting_a_permanent_failure_stops_early_and_says_what_to_fix(
    tmp_path, status, fix
):
    """A server answering 401/403/404 to everything stops the batch after its first queries
    with one error naming the fix; resume with a working server runs every query."""
    out = tmp_path / "r.jsonl"
    queries = [Query(f"q{i:02d}", f"{QUESTION} ({i})") for i in range(20)]
    with ScriptedLLMServer(faults=lambda request, n: Fault.error(status)) as server:
        orch = _orchestrator(_chat(server))
        with pytest.raises(LLMResponseError, match="batch stopped") as info:
            run_batch(queries, orch.run, out_path=out, concurrency=2, progress=False)
    assert fix in str(info.value)
    lines = read_results(out)
    assert 3 <= len(lines) < len(queries)
    assert all(not r.ok for r in lines)
    assert {"LLMError", INTERRUPTED} >= {r.error["type"] for r in lines}
    with ScriptedLLMServer() as server:
        summary = run_batch(queries, _orchestrator(_chat(server)).run, out_path=out, progress=False)
    assert (20, 0) == (summary.ok, summary.failures)
