"""Batch throughput against a scripted LLM server with fixed latency, at concurrency 1, 2, 4, 8.

The corpus is the demo's stdlib docstrings (no data folder needed), retrieved by the in-memory
keyword retriever of ``corrective_rag.testing``, so the time per query is the LLM latency the
server injects: grading (one call per batch of documents) and rewriting. The evaluator grades a
query's batches one after another (``max_workers=1``) so that every level measures the batch
runner's own concurrency, and each level gets a fresh evaluator (an empty verdict cache).

    python benchmarks/batch.py --latency-ms 200 --queries 64 --json OUT.json

Each level also reports ``scaling_ceiling``: the scaling it would reach if every question took
the time it took at the first level, scheduled in order onto the level's slots. What separates
it from 1 is the last wave's tail, which no saving in the loop removes.

The scripted server runs in a process of its own, as a real model server does, so that its
work (parsing each request, writing each reply) does not compete with the batch for this
process's interpreter; ``--server-in-process`` runs it in a thread of this process instead (how
the figures before December 2026 were taken: about 0.02-0.03 lower scaling at concurrency 8).

With ``--retriever hybrid --evaluator local`` it measures the offline path instead, CPU-bound:
an in-memory ``HybridStore`` over the same docstrings (the real embedding model) and the local
judge and rewriter, no LLM. The embedder's cache is emptied before each level, so that every
level embeds the same texts.

    python benchmarks/batch.py --retriever hybrid --evaluator local --queries 64 --json OUT.json

    python benchmarks/batch.py --engine thread,ray --latency-ms 200 --queries 64 --json OUT.json

``--engine ray`` runs each level on a local Ray instance (started once, before the levels):
as many actors as the level's concurrency, each building its own orchestrator from a picklable
factory. Beside the thread engine at the same level, the difference in wall time per question
and slot is the overhead Ray adds (actor start-up, the factory's build, one round trip each).
"""

from __future__ import annotations

import argparse
import contextlib
import heapq
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

LEVELS = (1, 2, 4, 8)


def _queries(n: int, seed: int) -> list:
    from corrective_rag.cli.demo import stdlib_documents
    from corrective_rag.runs.execution.queries import Query

    docs = [d for d in stdlib_documents() if d.id.endswith("#0") and "." in d.id.split("#")[0]]
    rng = random.Random(seed)
    picked = rng.sample(docs, n)
    # The question is the docstring's first sentence: realistic wording, not the object's name.
    return [
        Query(f"q{i:03d}", d.text.split(": ", 1)[1].split(". ")[0][:200])
        for i, d in enumerate(picked)
    ]


def _entry(level: int, wall: float, n_queries: int, summary: Any) -> dict:
    return {
        "concurrency": level,
        "wall_seconds": round(wall, 3),
        "throughput_qps": round(n_queries / wall, 3),
        "ok": summary.ok,
        "failures": summary.failures,
        "mean_iterations": round(summary.mean_iterations, 3),
        "latency_p50": round(summary.latency_p50, 3),
        "latency_p95": round(summary.latency_p95, 3),
    }


def _timed(queries: list, run_one: Any, out: Path, level: int) -> tuple[float, Any]:
    """Wall seconds and summary of one batch over ``queries`` at concurrency ``level``."""
    from corrective_rag.runs.execution.batch import run_batch

    start = time.perf_counter()
    summary = run_batch(queries, run_one, out_path=out, concurrency=level, progress=False)
    return time.perf_counter() - start, summary


def _add_scaling(by_level: dict, levels: tuple[int, ...]) -> None:
    base = by_level[str(levels[0])]["throughput_qps"] / levels[0]
    for entry in by_level.values():
        entry["scaling_vs_linear"] = round(
            entry["throughput_qps"] / (base * entry["concurrency"]), 3
        )


def _latencies(path: Path) -> list[float]:
    """Each question's wall seconds, in the order the results file recorded them."""
    with path.open(encoding="utf-8") as fh:
        return [float(json.loads(line)["seconds"]) for line in fh if line.strip()]


def _makespan(latencies: list[float], slots: int) -> float:
    """When ``slots`` workers taking the questions in order (each the next free one) finish."""
    free = [0.0] * slots
    for seconds in latencies:
        heapq.heapreplace(free, free[0] + seconds)
    return max(free)


def _add_ceilings(by_level: dict, latencies: list[float]) -> None:
    """The scaling each level would reach if every question took its time at the first level.

    The questions are scheduled greedily, in order, onto the level's slots: what is left below
    1 is the last wave's tail (some slots idle while the longest questions finish), which no
    saving in the loop removes.
    """
    total = sum(latencies)
    for entry in by_level.values():
        level = entry["concurrency"]
        entry["scaling_ceiling"] = round(total / (level * _makespan(latencies, level)), 3)


def run_local(n_queries: int, levels: tuple[int, ...], seed: int) -> dict:
    """The offline path at each concurrency: HybridStore retrieval and the local judge."""
    from corrective_rag.cli.demo import stdlib_documents
    from corrective_rag.evaluate.local import LocalEvaluator
    from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
    from corrective_rag.models.embeddings import SentenceTransformerEmbedder
    from corrective_rag.rewrite.local import LocalRewriter
    from corrective_rag.store.hybrid import HybridStore

    queries = _queries(n_queries, seed)
    embedder = SentenceTransformerEmbedder()
    by_level = {}
    with HybridStore.in_memory(embedder=embedder) as store, tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        store.add(stdlib_documents())
        print(json.dumps({"indexed": len(store), "seconds": round(time.perf_counter() - start, 1)}))
        for level in levels:
            embedder.clear_cache()
            orch = CorrectiveRAGOrchestrator(
                store,
                LocalEvaluator(embedder, idf=store.idf),
                LocalRewriter(idf=store.idf),
                max_iterations=3,
                top_k=5,
            )
            wall, summary = _timed(queries, orch.run, Path(tmp) / f"c{level}.jsonl", level)
            by_level[str(level)] = _entry(level, wall, n_queries, summary)
            print(json.dumps(by_level[str(level)]))
    _add_scaling(by_level, levels)
    return {
        "benchmark": "batch",
        "retriever": "hybrid",
        "evaluator": "local",
        "queries": n_queries,
        "by_concurrency": by_level,
    }


class _Factory:
    """Picklable: builds the benchmark's orchestrator where it runs (a thread or a Ray actor)."""

    def __init__(self, base_url: str, documents: list) -> None:
        self.base_url = base_url
        self.documents = documents

    def __call__(self) -> Any:
        from corrective_rag.evaluate.llm import LLMEvaluator
        from corrective_rag.llm.client import OpenAIChatClient
        from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
        from corrective_rag.rewrite.llm import LLMRewriter
        from corrective_rag.testing.fakes import ListRetriever

        chat = OpenAIChatClient(self.base_url, "scripted", max_concurrency=64)
        return CorrectiveRAGOrchestrator(
            ListRetriever(self.documents),
            LLMEvaluator(chat, batch_size=5, max_workers=1),
            LLMRewriter(chat),
            max_iterations=3,
            top_k=5,
            min_relevant=3,
        ).run


def _overhead(thread: dict, ray: dict, n: int) -> dict:
    """Ray's extra start-up, and its extra time per question once workers are up (ms).

    Start-up: the difference on a batch of one question per worker. Per question: the rest of
    the difference on the whole batch, per question and worker slot.
    """
    level = ray["concurrency"]
    startup = ray["one_question_per_worker_seconds"] - thread["one_question_per_worker_seconds"]
    steady = (ray["wall_seconds"] - ray["one_question_per_worker_seconds"]) - (
        thread["wall_seconds"] - thread["one_question_per_worker_seconds"]
    )
    return {
        "startup_seconds": round(startup, 3),
        "per_question_ms": round(steady * level / max(1, n - level) * 1000, 1),
    }


def run_engines(
    latency_ms: float, n_queries: int, levels: tuple[int, ...], seed: int, engines: list[str]
) -> dict:
    """Each engine at each level, one orchestrator per worker (thread or actor) from a factory."""
    from corrective_rag.cli.demo import stdlib_documents
    from corrective_rag.runs.execution.batch import run_batch
    from corrective_rag.testing import ScriptedLLMServer

    documents = stdlib_documents()
    queries = _queries(n_queries, seed)
    result: dict = {}
    with (
        ScriptedLLMServer(latency=latency_ms / 1000) as server,
        tempfile.TemporaryDirectory() as tmp,
    ):
        factory = _Factory(server.base_url, documents)
        for name in engines:
            engine = None
            if name == "ray":
                import ray

                from corrective_rag.runs.execution.ray_engine import RayEngine

                started = time.perf_counter()
                ray.init(include_dashboard=False, configure_logging=False, log_to_driver=False)
                result["ray_init_seconds"] = round(time.perf_counter() - started, 3)
                engine = RayEngine()
            by_level = {}
            for level in levels:

                def timed(
                    part: list, tag: str, level: int = level, name: str = name, engine: Any = engine
                ) -> tuple[float, Any]:
                    start = time.perf_counter()
                    summary = run_batch(
                        part,
                        runner_factory=factory,
                        out_path=Path(tmp) / f"{name}-{level}-{tag}.jsonl",
                        concurrency=level,
                        progress=False,
                        engine=engine,
                    )
                    return time.perf_counter() - start, summary

                # One question per worker: start-up (workers, factories) plus one question.
                first_wall, _ = timed(queries[:level], "first")
                wall, summary = timed(queries, "all")
                by_level[str(level)] = {
                    "concurrency": level,
                    "wall_seconds": round(wall, 3),
                    "one_question_per_worker_seconds": round(first_wall, 3),
                    "throughput_qps": round(n_queries / wall, 3),
                    "ok": summary.ok,
                    "failures": summary.failures,
                    "latency_p50": round(summary.latency_p50, 3),
                }
                print(json.dumps({"engine": name, **by_level[str(level)]}), flush=True)
            result[name] = by_level
            if name == "ray":
                ray.shutdown()
    if "thread" in result and "ray" in result:
        result["ray_overhead"] = {
            level: _overhead(result["thread"][level], result["ray"][level], n_queries)
            for level in result["ray"]
        }
    return {"benchmark": "batch-engines", "latency_ms": latency_ms, "queries": n_queries, **result}


# The scripted server in a child process: prints its URL, then its request count for every line
# read on stdin; it stops when stdin closes.
_SERVE = """
import sys
from corrective_rag.testing import ScriptedLLMServer
server = ScriptedLLMServer(latency=float(sys.argv[1])).start()
print(server.base_url, flush=True)
for _ in sys.stdin:
    print(server.request_count, flush=True)
server.stop()
"""


class _ServerProcess:
    """A ``ScriptedLLMServer`` in a process of its own, with the same two members the runs use."""

    def __init__(self, latency: float) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _SERVE, str(latency)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._stdin, self._stdout = self._proc.stdin, self._proc.stdout
        self.base_url = self._stdout.readline().strip()
        if not self.base_url.startswith("http"):
            self._proc.kill()
            raise SystemExit(f"the scripted server did not start: {self.base_url!r}")

    @property
    def request_count(self) -> int:
        self._stdin.write("count\n")
        self._stdin.flush()
        return int(self._stdout.readline())

    def close(self) -> None:
        self._stdin.close()
        self._proc.wait(timeout=30)


@contextlib.contextmanager
def _server(latency: float, in_process: bool) -> Iterator:
    """The scripted server answering after ``latency`` seconds, in a thread or a process."""
    if in_process:
        from corrective_rag.testing import ScriptedLLMServer

        with ScriptedLLMServer(latency=latency) as server:
            yield server
        return
    child = _ServerProcess(latency)
    try:
        yield child
    finally:
        child.close()


def run(
    latency_ms: float,
    n_queries: int,
    levels: tuple[int, ...],
    seed: int,
    keep: str | None = None,
    *,
    in_process: bool = False,
) -> dict:
    from corrective_rag.cli.demo import stdlib_documents
    from corrective_rag.evaluate.llm import LLMEvaluator
    from corrective_rag.llm.client import OpenAIChatClient
    from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
    from corrective_rag.rewrite.llm import LLMRewriter
    from corrective_rag.testing.fakes import ListRetriever

    retriever = ListRetriever(stdlib_documents())
    queries = _queries(n_queries, seed)
    by_level = {}
    with (
        _server(latency_ms / 1000, in_process) as server,
        tempfile.TemporaryDirectory() as tmp,
    ):
        for level in levels:
            chat = OpenAIChatClient(server.base_url, "scripted", max_concurrency=64)
            orch = CorrectiveRAGOrchestrator(
                retriever,
                LLMEvaluator(chat, batch_size=5, max_workers=1),
                LLMRewriter(chat),
                max_iterations=3,
                top_k=5,
                min_relevant=3,
            )
            before = server.request_count
            wall, summary = _timed(queries, orch.run, Path(tmp) / f"c{level}.jsonl", level)
            if keep:  # the results file of each level, for `corrective-rag history ...`
                Path(keep).mkdir(parents=True, exist_ok=True)
                shutil.copy(Path(tmp) / f"c{level}.jsonl", Path(keep) / f"c{level}.jsonl")
            by_level[str(level)] = {
                **_entry(level, wall, n_queries, summary),
                "llm_requests": server.request_count - before,
            }
            print(json.dumps(by_level[str(level)]))
        _add_ceilings(by_level, _latencies(Path(tmp) / f"c{levels[0]}.jsonl"))
    _add_scaling(by_level, levels)
    return {
        "benchmark": "batch",
        "latency_ms": latency_ms,
        "queries": n_queries,
        "server": "thread of this process" if in_process else "process of its own",
        "by_concurrency": by_level,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--queries", type=int, default=64)
    parser.add_argument("--levels", default="1,2,4,8")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", metavar="OUT.json")
    parser.add_argument("--keep-results", metavar="DIR", help="copy each level's results file here")
    parser.add_argument(
        "--server-in-process",
        action="store_true",
        help="run the scripted server in a thread of this process (sharing its interpreter)",
    )
    parser.add_argument("--retriever", choices=("list", "hybrid"), default="list")
    parser.add_argument("--evaluator", choices=("llm", "local"), default="llm")
    parser.add_argument(
        "--engine",
        default=None,
        help="comma list of thread,ray: one orchestrator per worker built by a factory "
        "(default: the original shared-orchestrator thread run)",
    )
    args = parser.parse_args()
    from corrective_rag.cli.main import configure_logging

    configure_logging(verbose=False)  # per-iteration log lines would swamp the figures
    levels = tuple(int(x) for x in args.levels.split(","))
    if args.engine:
        engines = args.engine.split(",")
        if "ray" in engines and "thread" not in engines:
            engines.insert(0, "thread")  # Ray's figures mean something only beside threads
        report = run_engines(args.latency_ms, args.queries, levels, args.seed, engines)
        print(json.dumps(report.get("ray_overhead", {})))
        if args.json:
            Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
        return
    if (args.retriever, args.evaluator) == ("hybrid", "local"):
        report = run_local(args.queries, levels, args.seed)
    elif (args.retriever, args.evaluator) == ("list", "llm"):
        report = run(
            args.latency_ms,
            args.queries,
            levels,
            args.seed,
            args.keep_results,
            in_process=args.server_in_process,
        )
    else:
        parser.error("combine --retriever hybrid with --evaluator local, or neither")
    print(json.dumps({k: v["throughput_qps"] for k, v in report["by_concurrency"].items()}))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
