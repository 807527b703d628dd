"""Every exit path of a batch keeps the work written so far and stops spending.

The batch tests run the real command (or run_batch in a child process) against the scripted
server on 127.0.0.1 and decide on events: the exit status, the lines written, the server's own
count of requests and the worker threads still alive when ``run_batch`` returns; never a clock.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from corrective_rag.runs.execution.attempt import INTERRUPTED
from corrective_rag.runs.records.results import read_results
from corrective_rag.store.hybrid import HybridStore
from corrective_rag.testing import Fault, ScriptedLLMServer
from corrective_rag.types import Document

REPO = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1")
DOCS = [
    Document("bees", "Honey bees make honey from flower nectar they collect in the hive."),
    Document("tides", "Tides follow the pull of the Moon and the Sun on the oceans."),
]


@pytest.fixture
def store_dir(tmp_path: Path, embedder: Any) -> Path:
    path = tmp_path / "store"
    with HybridStore.open(path, embedder=embedder) as store:
        store.add(DOCS)
    return path


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("concurrency", ["1", "3"])
def test_a_batch_stopped_by_a_permanent_failure_exits_1_without_aborting(
    tmp_path, store_dir, concurrency
):
    """A 401 on every call stops `batch` after its first 3 queries with exit 1 and whole lines,
    never with SIGABRT/SIGSEGV from a worker still inside a query when the process ends."""
    queries = tmp_path / "q.jsonl"
    with queries.open("w") as fh:
        for i in range(12):
            fh.write(json.dumps({"id": f"q{i:02d}", "query": f"How do bees make honey {i}?"}))
            fh.write("\n")
    out = tmp_path / "r.jsonl"
    with ScriptedLLMServer(faults=lambda request, n: Fault.error(401)) as server:
        command = [
            sys.executable, "-m", "corrective_rag", "batch", str(queries), "--out", str(out),
            "--store", str(store_dir), "--llm-url", server.base_url, "--model", "scripted",
            "--concurrency", concurrency, "--no-progress",
        ]  # fmt: skip
        proc = subprocess.run(
            command, env=ENV, capture_output=True, text=True, timeout=600, check=False
        )
    assert 1 == proc.returncode, proc.stderr
    assert "terminate called" not in proc.stderr
    assert "OPENAI_API_KEY" in proc.stderr
    lines = read_results(out)
    assert 3 <= len(lines) < 12
    assert {"LLMError", INTERRUPTED} >= {r.error["type"] for r in lines}


_FULL_DISK_CHILD = textwrap.dedent(
    """
    import json, resource, signal, sys, threading
    from corrective_rag.evaluate.llm import LLMEvaluator
    from corrective_rag.llm.client import OpenAIChatClient
    from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
    from corrective_rag.rewrite.llm import LLMRewriter
    from corrective_rag.runs.execution.batch import run_batch
    from corrective_rag.runs.execution.queries import Query
    from corrective_rag.testing.fakes import ListRetriever
    from corrective_rag.testing import ScriptedLLMServer
    from corrective_rag.types import Document

    corpus = [Document(f"d{i}", f"Honey bees make honey, note {i}.") for i in range(6)]
    with ScriptedLLMServer() as server:
        chat = OpenAIChatClient(server.base_url, "scripted")
        orch = CorrectiveRAGOrchestrator(
            ListRetriever(corpus), LLMEvaluator(chat, max_workers=1), LLMRewriter(chat),
            top_k=2, max_iterations=3,
        )
        orch.run("warm up the token counter")  # its cache files are written before the limit
        queries = [Query(f"q{i:02d}", f"How do bees make honey? ({i})") for i in range(40)]
        # A file-size limit of one byte: the first results line fails to be written (EFBIG),
        # as on a full disk; SIGXFSZ would otherwise kill the process.
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1, resource.RLIM_INFINITY))
        try:
            run_batch(queries, orch.run, out_path=sys.argv[1], concurrency=4, progress=False)
            error = None
        except OSError as exc:
            error = exc.errno
        resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY,) * 2)
        at_return = server.request_count
        workers = [t for t in threading.enumerate() if t.name == "crag-batch"]
        alive = [t.name for t in workers]
        for t in workers:  # whatever they still do, let them finish: then count their calls
            t.join()
        after = server.request_count - at_return
        print("REPORT", json.dumps({"errno": error, "alive": alive, "after": after}), flush=True)
    """
)


@pytest.mark.timeout(600)
def test_a_recorder_error_stops_every_worker_before_run_batch_returns(tmp_path):
    """When the results file cannot be written (a full disk: EFBIG here), run_batch raises only
    after every worker has left its query, so no LLM call is made for a result nobody records."""
    import errno

    out = tmp_path / "r.jsonl"
    proc = subprocess.run(
        [sys.executable, "-c", _FULL_DISK_CHILD, str(out)],
        check=False,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert 0 == proc.returncode, proc.stderr
    report = next(
        json.loads(line.split(" ", 1)[1])
        for line in proc.stdout.splitlines()
        if line.startswith("REPORT ")
    )
    assert errno.EFBIG == report["errno"]
    assert [] == report["alive"]
    assert 0 == report["after"]  # the server's count: no call once run_batch had returned


# -- a run keeps its work and charges what it spent ------------------------------------------

CORPUS = [
    Document("d0", "Honey bees make honey from flower nectar."),
    Document("d1", "Bees store honey in wax cells of the hive."),
    Document("d2", "Nectar is a sugary liquid that flowers make."),
]
QUESTION = "How do bees make honey from nectar?"


def _chat(server: ScriptedLLMServer) -> Any:
    from corrective_rag.calls import Retries
    from corrective_rag.llm.client import OpenAIChatClient

    return OpenAIChatClient(server.base_url, "scripted", retries=Retries(max_retries=0))


def _strip_call(request: Any) -> bool:
    """A refinement call: its documents are the kept documents' strips."""
    return "strip-0" in json.dumps(request)


def test_a_refinement_failure_keeps_the_run_and_records_the_failure():
    """An LLMError while refining kept documents (after the loop) no longer escapes run(): the
    result keeps its history and kept documents, says why refinement failed and charges it."""
    from structlog.testing import capture_logs

    from corrective_rag.evaluate.llm import LLMEvaluator
    from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
    from corrective_rag.testing.fakes import ListRetriever, ScriptedRewriter

    def faults(request: Any, attempt: int) -> Fault | None:
        return Fault.error(401) if _strip_call(request) else None

    with ScriptedLLMServer(faults=faults) as server, capture_logs() as logs:
        evaluator = LLMEvaluator(_chat(server), strict=True, max_workers=1)
        # Two sentences a document: strips differ from whole documents (no cached verdict).
        docs = [Document(d.id, f"{d.text} It is a fact about bees.") for d in CORPUS]
        orch = CorrectiveRAGOrchestrator(
            ListRetriever(docs), evaluator, ScriptedRewriter([]), top_k=3, refine=True
        )
        result = orch.run(QUESTION)
    assert result.kept_ids and result.history
    assert () == result.strips
    assert result.refinement_error is not None and "401" in result.refinement_error
    assert 1 == result.usage.refinement.failed_calls
    failed = [e for e in logs if e["event"] == "refinement_failed"]
    assert [result.run_id] == [e.get("run_id") for e in failed]


def test_a_strict_grading_failure_charges_the_calls_that_had_succeeded():
    """A strict evaluator failing on its third call (one document per call) charges the run the
    tokens of every call answered before it, not a bare failed call."""
    from corrective_rag.evaluate.llm import LLMEvaluator
    from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
    from corrective_rag.testing.fakes import ListRetriever, ScriptedRewriter

    def run(faults: Any) -> Any:
        with ScriptedLLMServer(faults=faults) as server:
            evaluator = LLMEvaluator(_chat(server), strict=True, batch_size=1, max_workers=1)
            orch = CorrectiveRAGOrchestrator(
                ListRetriever(CORPUS), evaluator, ScriptedRewriter([]), top_k=3, max_iterations=1
            )
            return orch.run(QUESTION), server.request_count

    def third_unreadable(request: Any, attempt: int) -> Fault | None:
        prompts = [m.get("content", "") for m in request.get("messages", [])]
        return Fault.content("not a verdict") if any('id="d2"' in p for p in prompts) else None

    good, _ = run(lambda request, attempt: None)
    failed, calls = run(third_unreadable)
    assert 3 == calls
    grading = failed.usage.grading
    assert 1 == grading.failed_calls
    assert 3 == grading.llm_calls  # every call was answered, the third unreadably
    assert good.usage.grading.prompt_tokens == grading.prompt_tokens


def test_fallback_failed_carries_the_run_id():
    """A failed fallback's event names its run, so concurrent runs in a batch can be told apart."""
    from structlog.testing import capture_logs

    from corrective_rag.errors import SearchError
    from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
    from corrective_rag.testing.fakes import ListRetriever, ScriptedEvaluator, ScriptedRewriter

    class DownSearch:
        """A web search whose provider is down."""

        def retrieve(self, query: str, *, top_k: int = 10, where: Any = None) -> list[Any]:
            raise SearchError("search provider answered 503")

    evaluator = ScriptedEvaluator({"d0": 0.5})
    orch = CorrectiveRAGOrchestrator(
        ListRetriever(CORPUS), evaluator, ScriptedRewriter([]), fallback=DownSearch(),
        max_iterations=1,
    )  # fmt: skip
    with capture_logs() as logs:
        result = orch.run(QUESTION)
    failed = [e for e in logs if e["event"] == "fallback_failed"]
    assert [result.run_id] == [e.get("run_id") for e in failed]


def test_a_strict_generator_failure_charges_the_answered_call():
    """A strict generator whose answer is not JSON gives an abstained answer that still charges
    the answered call's tokens and one failed call, instead of nothing."""
    from corrective_rag.generate.llm import LLMGenerator
    from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
    from corrective_rag.testing.fakes import ListRetriever, ScriptedEvaluator, ScriptedRewriter

    with ScriptedLLMServer(lambda request: "plain prose, not JSON") as server:
        orch = CorrectiveRAGOrchestrator(
            ListRetriever(CORPUS), ScriptedEvaluator({"d0": 0.9}), ScriptedRewriter([]),
            generator=LLMGenerator(_chat(server), strict=True), max_iterations=1,
        )  # fmt: skip
        result = orch.run(QUESTION)
    assert result.answer is not None and result.answer.abstained
    generation = result.usage.generation
    assert (1, 1) == (generation.llm_calls, generation.failed_calls)
    assert generation.prompt_tokens > 0
