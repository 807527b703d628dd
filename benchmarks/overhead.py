"""The loop's own cost per question at 0 ms of model latency, with a profile of where it goes.

Everything a run does except waiting for a model: retrieving the question and each rewrite from
the hybrid store (BM25 + dense in chromadb, fused), grading and rewriting through the real
``LLMEvaluator`` / ``LLMRewriter`` and HTTP client against a scripted model answering at once
(``benchmarks/qrels_judge.py``, in its own process), the loop's bookkeeping, and the result's
JSON. Query embeddings come from the disk cache (a warm-up pass fills it), torch runs one
thread. Prints p50 / p90 / mean seconds per question beside a plain single search of each
question (``single_search_mean_seconds``, the floor), then the profile of a second pass in
milliseconds per question by part, and writes JSON.

    python benchmarks/overhead.py DATA --limit 100 --json overhead.json
"""

from __future__ import annotations

import argparse
import cProfile
import json
import logging
import os
import pstats
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import structlog

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks.beir import Collection, load_collection
from benchmarks.cache import DiskCachedEmbedder, default_cache_path
from corrective_rag.evaluate.cache import VerdictCache
from corrective_rag.evaluate.llm import LLMEvaluator
from corrective_rag.llm.client import OpenAIChatClient
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.models import OnnxEmbedder
from corrective_rag.models.embeddings import SentenceTransformerEmbedder
from corrective_rag.rewrite.llm import LLMRewriter
from corrective_rag.runs.records.codec import to_dict
from corrective_rag.store.hybrid import HybridStore

# The parts a run's time goes to: (name, file, function), each counted with its callees. "LLM"
# is the HTTP round trip to a model answering at once, in its own process (a real server is).
PARTS = (
    ("llm round trips (client, http, json)", "llm/client.py", "complete"),
    ("grading prompts + tiktoken", "evaluate/llm.py", "_batches"),
    ("retrieval: hybrid store, one query (all legs)", "store/hybrid.py", "retrieve"),
    ("retrieval: hybrid store, an iteration's queries", "store/hybrid.py", "retrieve_many"),
    ("  bm25 leg", "store/bm25.py", "top_k"),
    ("  dense leg: chromadb query", "store/chroma.py", "dense_many"),
    ("  dense leg: query embedding (cache)", "benchmarks/retrievers.py", "embed"),
    ("  fetching hit documents", "store/search.py", "hit_documents"),
    ("multi-query fusion", "loop/multiquery.py", "search_queries"),
    ("rewrite check (drift guard)", "rewrite/llm.py", "rewrite"),
    ("result to JSON", "benchmarks/overhead.py", "to_json"),
)


EMBEDDERS = ("torch", "onnx")  # the model through torch, or the library's default (ONNX Runtime)


def bench_store(
    data: str, embedder: str = "torch"
) -> tuple[Collection, SentenceTransformerEmbedder, DiskCachedEmbedder, HybridStore]:
    """The set-up the loop-cost benchmarks share: warnings only, one torch thread (so that
    figures do not depend on the machine's cores), the collection in a store whose embeddings
    come from the disk cache. Returns the collection, the model, its cached wrapper, the store.

    ``embedder``: ``"torch"`` (one thread), or ``"onnx"``, the library's default
    (:class:`~corrective_rag.models.OnnxEmbedder` with its own choice of threads), for the texts
    the disk cache does not hold (queries, once caching is off). The corpus's vectors come from
    the same cache either way (ONNX's are torch's to within 2e-5).
    """
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    import torch

    torch.set_num_threads(1)
    collection = load_collection(data)
    if embedder not in EMBEDDERS:
        raise SystemExit(f"embedder must be one of {EMBEDDERS}, got {embedder!r}")
    model = SentenceTransformerEmbedder() if embedder == "torch" else OnnxEmbedder()
    cached = DiskCachedEmbedder(model, default_cache_path(model))
    return collection, model, cached, build_store(collection, cached)


def build_store(collection: Collection, embedder: DiskCachedEmbedder) -> HybridStore:
    """An in-memory hybrid store over ``collection`` embedding from the disk cache.

    Unlike ``build_retriever`` it does not embed every sentence of the corpus ahead: only the
    local evaluator needs those.
    """
    embedder.embed([d.text for d in collection.documents])  # from the disk cache after one run
    embedder.save()
    store = HybridStore.in_memory(embedder=embedder)
    store.add(collection.documents)
    return store


def to_json(result: Any) -> str:
    """The run's result as the JSON a history store writes."""
    return json.dumps(to_dict(result))


def forget_searches(store: object) -> None:
    """Forget the searches ``store`` remembers, so that a question asked again searches afresh.

    Each pass of these benchmarks asks the same questions: without this, a later pass (or arm)
    would find the earlier one's searches remembered (``store.search.SearchMemo``), which a new
    question never does.
    """
    memo = getattr(store, "_memo", None)  # a HybridStore's; other retrievers remember nothing
    if memo is not None:
        memo.forget()


def one(loop: CorrectiveRAGOrchestrator, question: str) -> float:
    """Seconds for one run of ``question`` with no search remembered, its JSON included."""
    forget_searches(loop.retriever)
    started = time.perf_counter()
    to_json(loop.run(question))
    return time.perf_counter() - started


def searched(store: HybridStore, question: str, k: int) -> float:
    """Seconds for one plain search of ``question`` (its ``k`` best hits): the floor."""
    forget_searches(store)
    started = time.perf_counter()
    store.retrieve(question, top_k=k)
    return time.perf_counter() - started


def parts(profile: cProfile.Profile, questions: int) -> dict[str, float]:
    """Milliseconds per question of each part (cumulative: a part includes its callees)."""
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    out = {}
    for name, path, func in PARTS:
        cumulative = sum(
            row[3] for (p, _, f), row in stats.items() if p.endswith(path) and f == func
        )
        out[name] = round(1000 * cumulative / questions, 2)
    return out


def judge_process(
    data: str, *, latency_ms: float = 0.0, usage: str = "words"
) -> tuple[subprocess.Popen[str], str]:
    """Start ``qrels_judge.py`` (0 ms latency by default) in its own process, with its URL.

    ``usage``: what the judge counts in its replies' usage, ``words`` (cheap: the model's own
    bookkeeping is not the loop's cost) or ``tiktoken`` (cl100k tokens).
    """
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    script = Path(__file__).resolve().parent / "qrels_judge.py"
    command = [sys.executable, str(script), data, "--latency-ms", str(latency_ms)]
    command += ["--port", str(port)]
    command += ["--usage", usage]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline() if proc.stdout else ""  # "serving URL" once it listens
    if not line.startswith("serving "):
        proc.kill()
        raise SystemExit(f"the qrels judge did not start: {line!r}")
    return proc, line.split()[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", help="collection folder in BEIR layout")
    parser.add_argument("--limit", type=int, default=100, help="first N questions")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--top", type=int, default=15, help="profile rows to print")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    collection, _, embedder, store = bench_store(args.data)
    import torch  # already loaded by the store: only to report its threads

    questions = list(collection.queries.values())[: args.limit]
    judge, url = judge_process(args.data)
    try:
        chat = OpenAIChatClient(url, "scripted")
        loop = CorrectiveRAGOrchestrator(
            store,
            LLMEvaluator(chat, propose=True, cache=VerdictCache(0)),  # every pass grades
            LLMRewriter(chat),
            top_k=args.k,
            max_iterations=args.iterations,
        )
        for question in questions:  # warm-up: embeds every query once (tiktoken, pools too)
            one(loop, question)
        embedder.save()
        seconds = [one(loop, q) for q in questions]
        single = [searched(store, q, args.k) for q in questions]
        profile = cProfile.Profile()
        profile.enable()
        profiled_started = time.perf_counter()
        for question in questions:
            one(loop, question)
        profile.disable()
        profiled = time.perf_counter() - profiled_started
    finally:
        judge.terminate()
        judge.wait(timeout=30)
    report = {
        "collection": collection.name,
        "questions": len(questions),
        "k": args.k,
        "iterations": args.iterations,
        "torch_threads": torch.get_num_threads(),
        "bm25": store._bm25.implementation if store._bm25 is not None else None,
        "p50_seconds": statistics.median(seconds),
        "p90_seconds": statistics.quantiles(seconds, n=10)[-1] if len(seconds) > 1 else seconds[0],
        "mean_seconds": statistics.fmean(seconds),
        # the floor: one search of the question, what a run without the loop pays
        "single_search_mean_seconds": statistics.fmean(single),
        "loop_over_single_search": statistics.fmean(seconds) / statistics.fmean(single),
        "load_average_1min": os.getloadavg()[0],
        "profiled_ms_per_question": round(1000 * profiled / len(questions), 2),
        "profile_ms_per_question": parts(profile, len(questions)),
    }
    print(json.dumps(report, indent=2))
    pstats.Stats(profile).sort_stats("cumulative").print_stats(args.top)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
