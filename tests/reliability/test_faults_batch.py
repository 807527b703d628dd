"""Batch-level faults: LLM faults across a concurrent batch, Ctrl-C of the real command, and
many concurrent runs sharing one orchestrator, store and evaluator."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from corrective_rag.calls import Retries, Timeouts
from corrective_rag.evaluate.cache import VerdictCache
from corrective_rag.evaluate.llm import LLMEvaluator
from corrective_rag.evaluate.local import LocalEvaluator
from corrective_rag.llm import prompts
from corrective_rag.llm.client import OpenAIChatClient
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.rewrite.llm import LLMRewriter
from corrective_rag.rewrite.local import LocalRewriter
from corrective_rag.runs.execution.batch import run_batch
from corrective_rag.runs.execution.queries import Query
from corrective_rag.runs.records.results import latest_records, read_results
from corrective_rag.store.hybrid import HybridStore
from corrective_rag.testing import Fault, ScriptedLLMServer
from corrective_rag.testing.fakes import ListRetriever
from corrective_rag.types import Document, RunResult

REPO = Path(__file__).resolve().parents[2]
MAX_RETRIES = 2
TOPICS = {
    "bees": "Honey bees make honey from flower nectar they collect in the hive.",
    "volcano": "Volcanoes erupt molten lava and ash when magma pressure rises.",
    "glacier": "Glaciers carve valleys as compacted ice slowly flows downhill.",
    "violin": "Violins have four strings tuned in fifths and are played with a bow.",
    "tides": "Tides follow the pull of the Moon and the Sun on the oceans.",
    "bread": "Bread dough rises because yeast ferments sugar into gas.",
}
QUESTIONS = [
    "How do bees make honey from nectar?",
    "Why do volcanoes erupt lava and ash?",
    "How do glaciers carve valleys from ice?",
    "How are violin strings tuned?",
    "What causes ocean tides and the Moon's pull?",
    "Why does bread dough rise with yeast?",
]


def _corpus() -> list[Document]:
    docs = []
    for topic, text in TOPICS.items():
        docs.append(Document(topic, text))
        for k in range(4):  # near misses: share a word or two with the topic's question
            docs.append(Document(f"{topic}-{k}", f"{text.split()[k]} appears in note {k} too."))
    return docs


def _trace(result: RunResult) -> list[Any]:
    return [
        (
            rec.query,
            [(v.document_id, v.relevant, v.score) for v in rec.verdicts],
            rec.kept_ids,
            rec.rewrite.query if rec.rewrite else None,
        )
        for rec in result.history
    ] + [result.stop_reason, result.kept_ids]


# -- LLM faults across a concurrent batch ------------------------------------------------------

KINDS = ["none", "503 once", "503 always", "rewrite non-JSON", "hang once", "prose always"]


def _case(text: str) -> int | None:
    marker = text.find("(case ")
    return int(text[marker + 6]) if marker >= 0 else None


def _chooser(request: Mapping[str, Any], attempt: int) -> Fault | None:
    """The fault for one request, by its question's case number and the request's attempt."""
    messages = request["messages"]
    system = messages[0]["content"]
    case = _case(messages[1]["content"])
    kind = KINDS[case] if case is not None else "none"
    grading = system.startswith(prompts.GRADER_SYSTEM[:40])
    if kind == "503 once" and attempt == 0:
        return Fault.error(503)
    if kind == "503 always" and grading:
        return Fault.error(503)
    if kind == "rewrite non-JSON" and not grading:
        return Fault.non_json()
    if kind == "hang once" and attempt == 0:
        return Fault.hang(2.0)
    if kind == "prose always" and grading:
        return Fault.content("These all look relevant to me.")
    return None


def _llm_orchestrator(server: ScriptedLLMServer) -> CorrectiveRAGOrchestrator:
    chat = OpenAIChatClient(
        server.base_url,
        "scripted",
        timeouts=Timeouts(connect=2, read=0.4),
        retries=Retries(max_retries=MAX_RETRIES, backoff_base=0.01),
        rng=random.Random(0),
    )
    return CorrectiveRAGOrchestrator(
        ListRetriever(_corpus()),
        # two calls per iteration (the rewriter's own call), so that rewrite faults are reached
        LLMEvaluator(chat, batch_size=3, max_workers=2, cache=VerdictCache(0), propose=False),
        LLMRewriter(chat),
        top_k=3,
        max_iterations=3,
        min_relevant=2,
    )


def test_llm_faults_in_a_concurrent_batch_end_as_recorded_outcomes(tmp_path):
    """With faults chosen per question, every query of a concurrent batch gets one ok line whose
    history records its fault: unchanged after a retry, ungraded verdicts, or a rejected rewrite."""
    queries = [
        Query(f"q{i:02d}", f"{QUESTIONS[i % len(QUESTIONS)]} (case {i // 4 % len(KINDS)}) n{i}")
        for i in range(24)
    ]
    with ScriptedLLMServer() as server:
        orch = _llm_orchestrator(server)
        clean = {q.id: orch.run(q.query) for q in queries}
    with ScriptedLLMServer(faults=_chooser) as server:
        orch = _llm_orchestrator(server)
        out = tmp_path / "results.jsonl"
        summary = run_batch(queries, orch.run, out_path=out, concurrency=6, progress=False)
        bodies = [json.dumps(r, sort_keys=True) for r in server.requests]
    lines = read_results(out)
    assert sorted(q.id for q in queries) == sorted(r.id for r in lines)
    assert (24, 0) == (summary.ok, summary.failures)
    assert max(bodies.count(b) for b in bodies) <= 1 + MAX_RETRIES  # retries within the limit
    for rec in lines:
        result = rec.result
        assert result is not None
        kind = KINDS[_case(result.question) or 0]
        verdicts = [v for it in result.history for v in it.verdicts]
        if kind in ("none", "503 once", "hang once"):
            assert _trace(clean[rec.id]) == _trace(result), kind
            assert 0 == result.usage.total.failed_calls
        elif kind == "503 always":
            assert all(not v.graded and "HTTP 503" in (v.error or "") for v in verdicts)
            assert () == result.kept_ids
        elif kind == "prose always":
            assert all(not v.graded and v.raw for v in verdicts)
            assert result.usage.grading.failed_calls >= len(verdicts)
        else:  # every rewrite's reply is unusable: the run goes on with the next hits
            rewrites = [it.rewrite for it in result.history if it.rewrite is not None]
            for rewrite in rewrites:  # a question answered at once needs no rewrite
                assert rewrite.query is None and (rewrite.rejected or "").startswith("llm error")
            assert len(rewrites) == result.usage.rewriting.failed_calls


# -- Ctrl-C of the real command ----------------------------------------------------------------


FREE = 10  # queries answered before the server starts holding every request


def _hold_after_free(request: Mapping[str, Any], attempt: int) -> Fault | None:
    """Answer the first FREE questions; hold the others' requests until the server stops."""
    user = request["messages"][1]["content"].split("\n", 1)[0]
    number = re.search(r"\((\d+)\)", user)
    return Fault.held() if number and int(number.group(1)) >= FREE else None


@pytest.mark.slow
def test_ctrl_c_of_the_batch_command_resumes_with_no_loss_and_no_duplicates(tmp_path, embedder):
    """SIGINT to `python3 -m corrective_rag batch` (LLM evaluator on a scripted server) while
    queries are held exits 130 on a whole line with the finished queries written, and the same
    command run again completes every id, running none of the finished ones twice."""
    store_dir = tmp_path / "store"
    with HybridStore.open(store_dir, embedder=embedder) as store:
        store.add(_corpus())
    queries = tmp_path / "queries.jsonl"
    ids = [f"q{i:03d}" for i in range(40)]
    with queries.open("w") as fh:
        for i, qid in enumerate(ids):
            fh.write(json.dumps({"id": qid, "query": f"{QUESTIONS[i % 6]} ({i})"}) + "\n")
    out = tmp_path / "results.jsonl"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    with ScriptedLLMServer(faults=_hold_after_free) as server:
        command = [
            sys.executable, "-m", "corrective_rag", "batch", str(queries), "--out", str(out),
            "--store", str(store_dir), "--llm-url", server.base_url, "--model", "scripted",
            "--concurrency", "4", "--no-progress",
        ]  # fmt: skip
        proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
        # Events, not a clock: FREE lines written (the later queries are held by the server).
        while not (out.exists() and out.read_bytes().count(b"\n") >= FREE):
            assert proc.poll() is None, "batch ended before the interrupt point"
            time.sleep(0.01)
        proc.send_signal(signal.SIGINT)
        assert 130 == proc.wait(timeout=300)
    assert out.read_bytes().endswith(b"\n")
    before = read_results(out)
    assert FREE == sum(r.ok for r in before)
    assert all(r.error["type"] == "interrupted" for r in before if not r.ok)
    assert len(before) == len({r.id for r in before})
    with ScriptedLLMServer() as server:
        command[command.index("--llm-url") + 1] = server.base_url
        again = subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=300, check=False
        )
    assert 0 == again.returncode, again.stderr
    latest = latest_records(read_results(out))
    assert sorted(ids) == sorted(r.id for r in latest)  # none lost
    assert all(r.ok for r in latest)
    ok_ids = [r.id for r in read_results(out) if r.ok]
    assert len(ok_ids) == len(set(ok_ids))  # no finished query run twice


# -- many runs at once on shared components ----------------------------------------------------


def test_concurrent_runs_on_one_store_equal_sequential_runs(embedder):
    """Sixteen runs on 8 threads sharing one orchestrator, in-memory HybridStore, embedder and
    local evaluator give exactly the sequential runs' histories."""
    questions = [f"{q} Detail {i}." for i in range(3) for q in QUESTIONS][:16]
    with HybridStore.in_memory(embedder=embedder) as store:
        store.add(_corpus())

        def orchestrator() -> CorrectiveRAGOrchestrator:
            # A fresh evaluator per pass: its title-link memory is per question, across runs.
            return CorrectiveRAGOrchestrator(
                store,
                LocalEvaluator(embedder, idf=store.idf),
                LocalRewriter(idf=store.idf),
                top_k=3,
                max_iterations=3,
            )

        sequential = [_trace(orchestrator().run(q)) for q in questions]
        shared = orchestrator()
        with ThreadPoolExecutor(max_workers=8) as pool:
            concurrent = [_trace(r) for r in pool.map(shared.run, questions)]
    assert sequential == concurrent
