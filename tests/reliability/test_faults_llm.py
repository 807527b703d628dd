"""LLM endpoint faults, through the real client, evaluator, rewriter and orchestrator.

Every fault must end as something recorded in the run's history (a verdict graded as a healthy
server would, an ungraded verdict with its error or raw text, a rejected rewrite with its reason,
``failed_calls`` in the usage), within the client's retry limit: never a silent wrong verdict.
"""

from __future__ import annotations

import json
import random

import pytest

from corrective_rag.calls import Retries, Timeouts
from corrective_rag.evaluate.cache import VerdictCache
from corrective_rag.evaluate.llm import LLMEvaluator
from corrective_rag.llm.client import OpenAIChatClient
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.rewrite.llm import LLMRewriter
from corrective_rag.testing import Fault, ScriptedLLMServer
from corrective_rag.testing.fakes import ListRetriever
from corrective_rag.types import Document, RewriteSource, RunResult, StopReason

QUESTION = "How do honey bees make honey from nectar?"
CORPUS_TEXT = {
    "bees": "Honey bees make honey from flower nectar they collect.",
    "hive": "Bees store nectar in wax cells, where honey ripens.",
    "nectar": "Nectar becomes honey as bees fan it and add enzymes.",
    "wasp": "Wasps hunt insects and build paper nests, unlike honey bees.",
    "bread": "Bread dough rises with yeast and honey.",
}
MAX_RETRIES = 2
READ_TIMEOUT = 0.5
GARBAGE = "Both documents look relevant to me!"
GHOSTS = json.dumps({"verdicts": [{"id": "ghost", "relevant": True, "score": 1, "confidence": 1}]})

# A server fault that a retry gets past: (fault, how many requests it costs in all).
TRANSIENT = {
    "429 retry-after": Fault.rate_limited(retry_after="2"),
    "500": Fault.error(500),
    "503": Fault.error(503),
    "hang past timeout": Fault.hang(READ_TIMEOUT * 6),
    "closed mid-body": Fault.close_mid_body(),
}
# A reply no retry can fix: the client gives up at once (one request) with an LLMResponseError.
UNUSABLE = {
    "non-JSON body": (Fault.non_json(), "unusable chat completion body"),
    "wrong-shape JSON": (Fault.wrong_shape(), "unusable chat completion body"),
    "10 MB reply": (Fault.huge(10_000_000), "exceeds the"),
}


def _orchestrator(server: ScriptedLLMServer) -> tuple[CorrectiveRAGOrchestrator, list[float]]:
    sleeps: list[float] = []
    chat = OpenAIChatClient(
        server.base_url,
        "scripted",
        timeouts=Timeouts(connect=2, read=READ_TIMEOUT),
        retries=Retries(max_retries=MAX_RETRIES, backoff_base=0.01, retry_after_max=5),
        sleep=sleeps.append,  # records the waits the client chose instead of sleeping them
        rng=random.Random(0),
    )
    corpus = [Document(i, t) for i, t in CORPUS_TEXT.items()]
    orch = CorrectiveRAGOrchestrator(
        ListRetriever(corpus),
        # two calls per iteration (grade, then the rewriter's own call): the shape faults rely on
        LLMEvaluator(chat, batch_size=2, max_workers=1, cache=VerdictCache(0), propose=False),
        LLMRewriter(chat),
        top_k=2,
        max_iterations=2,
        min_relevant=3,
    )
    return orch, sleeps


def _run(*faults: Fault | None) -> tuple[RunResult, ScriptedLLMServer, list[float]]:
    with ScriptedLLMServer() as server:
        server.enqueue(*faults)
        orch, sleeps = _orchestrator(server)
        result = orch.run(QUESTION)
    return result, server, sleeps


@pytest.fixture(scope="module")
def clean() -> tuple[RunResult, int]:
    """The run against a healthy server, and how many requests it made."""
    result, server, _ = _run()
    assert 3 == server.request_count  # grade, rewrite, grade: the shape the faults rely on
    return result, server.request_count


def _trace(result: RunResult) -> list[tuple]:
    """What a run decided, without timings and ids: queries, verdicts, kept ids, rewrites."""
    return [
        (
            rec.query,
            [(v.document_id, v.relevant, v.score, v.confidence) for v in rec.verdicts],
            rec.kept_ids,
            rec.rewrite.query if rec.rewrite else None,
        )
        for rec in result.history
    ] + [result.stop_reason]


def _assert_no_silent_verdict(result: RunResult, clean_run: RunResult) -> None:
    """Every graded verdict equals the healthy server's; every other one says why."""
    healthy = {v.document_id: v.score for rec in clean_run.history for v in rec.verdicts}
    for rec in result.history:
        for v in rec.verdicts:
            if v.graded:
                if v.document_id in healthy:
                    assert healthy[v.document_id] == v.score
            else:
                assert v.error
                assert v.document_id in rec.ungraded_ids
                assert v.document_id not in rec.kept_ids + rec.dropped_ids


def _first_requests_identical(server: ScriptedLLMServer, n: int) -> bool:
    bodies = [json.dumps(r, sort_keys=True) for r in server.requests[: n + 1]]
    return len(set(bodies[:n])) == 1 and bodies[n] not in bodies[:n]


@pytest.mark.parametrize("name", list(TRANSIENT))
@pytest.mark.parametrize("phase", ["grading", "rewriting"])
def test_transient_fault_is_retried_and_the_run_is_unchanged(clean, name, phase):
    """One 429/5xx/hang/cut body costs exactly one retry and the run decides as if it never
    happened."""
    clean_run, clean_requests = clean
    fault = TRANSIENT[name]
    faults = (fault,) if phase == "grading" else (None, fault)
    result, server, sleeps = _run(*faults)
    assert _trace(clean_run) == _trace(result)
    assert clean_requests + 1 == server.request_count
    assert 0 == result.usage.total.failed_calls
    if name == "429 retry-after":
        assert [2.0] == sleeps  # the server's Retry-After, not the client's own back-off


@pytest.mark.parametrize("status", [429, 500, 503])
def test_grading_fault_past_the_retries_becomes_ungraded_verdicts(clean, status):
    """A status that outlasts the retries costs exactly 1 + max_retries requests and leaves
    that batch's documents ungraded with the status in their error, counted as a failed call."""
    fault = Fault.error(status, retry_after="0") if status == 429 else Fault.error(status)
    result, server, _ = _run(*[fault] * (MAX_RETRIES + 1))
    first = result.history[0]
    assert _first_requests_identical(server, MAX_RETRIES + 1)
    assert 2 == len(first.ungraded_ids)
    assert all(f"HTTP {status}" in (v.error or "") for v in first.verdicts)
    assert 1 == first.usage.grading.failed_calls
    assert () == first.kept_ids
    _assert_no_silent_verdict(result, clean[0])


@pytest.mark.parametrize("name", list(UNUSABLE))
def test_unusable_grading_reply_becomes_ungraded_without_retries(clean, name):
    """A non-JSON, wrong-shape or oversized body is not retried: that batch is ungraded with the
    client's error, counted as a failed call."""
    fault, message = UNUSABLE[name]
    result, server, _ = _run(fault)
    first = result.history[0]
    assert _first_requests_identical(server, 1)
    assert 2 == len(first.ungraded_ids)
    assert all(message in (v.error or "") for v in first.verdicts)
    assert 1 == first.usage.grading.failed_calls
    _assert_no_silent_verdict(result, clean[0])


def test_unparseable_batch_is_regraded_one_by_one(clean):
    """Prose instead of JSON for a batch is regraded one document per call, ending as the
    healthy run did, with the failed call counted."""
    result, server, _ = _run(Fault.content(GARBAGE))
    assert _trace(clean[0]) == _trace(result)
    assert clean[1] + 2 == server.request_count
    assert 1 == result.history[0].usage.grading.failed_calls


def test_reply_that_stays_unparseable_keeps_the_raw_text(clean):
    """When the singles are unreadable too, each document is ungraded with the model's raw text."""
    result, _, _ = _run(*[Fault.content(GARBAGE)] * 3)
    first = result.history[0]
    assert 2 == len(first.ungraded_ids)
    assert all(GARBAGE == v.raw for v in first.verdicts)
    assert all("unparseable reply" in (v.error or "") for v in first.verdicts)
    assert 3 == first.usage.grading.failed_calls
    _assert_no_silent_verdict(result, clean[0])


def test_verdicts_for_unknown_ids_are_ignored_and_the_sent_ids_regraded(clean):
    """A verdict for an id that was not sent is ignored; the documents sent are regraded."""
    result, server, _ = _run(Fault.content(GHOSTS))
    assert _trace(clean[0]) == _trace(result)
    assert clean[1] + 2 == server.request_count
    assert "ghost" not in {v.document_id for rec in result.history for v in rec.verdicts}


@pytest.mark.parametrize(
    ("faults", "reason"),
    [
        ([Fault.error(503)] * (MAX_RETRIES + 1), "llm error"),
        ([Fault.non_json()], "llm error"),
        ([Fault.wrong_shape()], "llm error"),
        ([Fault.huge(10_000_000)], "llm error"),
        ([Fault.content(GARBAGE)], "unparseable reply"),
        ([Fault.content('{"rationale": "no query here"}')], "unparseable reply"),
    ],
    ids=["503 past retries", "non-JSON", "wrong shape", "10 MB", "prose", "no query"],
)
def test_rewrite_fault_is_a_rejected_rewrite_with_its_reason(faults, reason):
    """A rewrite the endpoint cannot deliver is rejected with the reason recorded, the run goes on
    with the question's next hits, and the rewriter's failed call is counted."""
    result, server, _ = _run(None, *faults)
    rewrite = result.history[0].rewrite
    assert rewrite is not None and rewrite.query is None
    assert (rewrite.rejected or "").startswith(reason)
    assert RewriteSource.NEXT_HITS == rewrite.source
    assert 2 == result.iterations and StopReason.REWRITE_FAILED != result.stop_reason
    assert 1 == result.usage.rewriting.failed_calls
    # retried only where a retry may help; then one grading call for the next hits
    assert 2 + len(faults) == server.request_count
