"""The loop's own cost per question at 0 ms of model latency, with a profile of where it goes.

Everything a run does except waiting for a model: retrieving the question and each rewrite from
the hybrid store (BM25 + dense in chromadb, fused), grading and rewriting through the real
``LLMEvaluator`` / ``LLMRewriter`` and HTTP client against a scripted model answering at once
(``benchmarks/qrels_judge.py``), the loop's bookkeeping, and the result's JSON. Query embeddings
come from the disk cache (a warm-up pass fills it), torch runs one thread. Prints p50 / p90 /
mean seconds per question, then the profile of a second pass grouped by part, and writes JSON.

    python benchmarks/overhead.py DATA --limit 100 --json overhead.json
"""

from __future__ import annotations

import argparse
import cProfile
import json
import logging
import os
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import structlog

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks.beir_data import load_collection
from benchmarks.embedding_cache import cached_embeddings
from benchmarks.qrels_judge import qrels_reply
from benchmarks.retrievers import DiskCachedEmbedder
from corrective_rag.evaluate.cache import VerdictCache
from corrective_rag.evaluate.llm import LLMEvaluator
from corrective_rag.llm.client import OpenAIChatClient
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.models.embeddings import SentenceTransformerEmbedder
from corrective_rag.rewrite.llm import LLMRewriter
from corrective_rag.runs.codec import to_dict
from corrective_rag.store.hybrid import HybridStore
from corrective_rag.testing.server import ScriptedLLMServer

# Where a function's time is counted: the first part whose marker is in its file path or name.
PARTS = (
    ("llm: http client + scripted server", ("llm/client.py", "requests/", "urllib3/", "http/")),
    ("grading prompt + tiktoken", ("evaluate/llm.py", "llm/prompts.py", "tiktoken")),
    ("rewrite + drift guard", ("rewrite/",)),
    ("bm25", ("store/bm25.py", "rank_bm25")),
    ("dense: chromadb query", ("store/dense.py", "chromadb/")),
    ("fusion", ("store/fusion.py",)),
    ("query embedding (cache)", ("embeddings.py", "retrievers.py")),
    ("result JSON", ("runs/codec.py", "json/")),
)


def build_store(data: str) -> tuple[Any, HybridStore, DiskCachedEmbedder]:
    """The collection and an in-memory hybrid store whose embedder answers from the disk cache."""
    collection = load_collection(data)
    embedder = DiskCachedEmbedder(SentenceTransformerEmbedder())
    texts = [d.text for d in collection.documents]
    embedder.add(texts, cached_embeddings(collection.name, collection.documents, embedder.inner))
    store = HybridStore.in_memory(embedder=embedder)
    store.add(collection.documents)
    return collection, store, embedder


def one(loop: CorrectiveRAGOrchestrator, question: str) -> float:
    """Seconds for one run of ``question``, its result turned into JSON included."""
    started = time.perf_counter()
    result = loop.run(question)
    json.dumps(to_dict(result))
    return time.perf_counter() - started


def parts(profile: cProfile.Profile, total: float) -> dict[str, float]:
    """Seconds of the profiled pass by part, from each function's own (not cumulative) time."""
    stats = pstats.Stats(profile)
    out = {name: 0.0 for name, _ in PARTS}
    out["loop bookkeeping + other"] = 0.0
    for (path, _, func), row in stats.stats.items():  # type: ignore[attr-defined]
        own = row[2]
        where = f"{path}:{func}"
        name = next((n for n, marks in PARTS if any(m in where for m in marks)), None)
        out[name or "loop bookkeeping + other"] += own
    return {k: round(v / total, 4) for k, v in out.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", help="collection folder in BEIR layout")
    parser.add_argument("--limit", type=int, default=100, help="first N questions")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--top", type=int, default=15, help="profile rows to print")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    import torch

    torch.set_num_threads(1)
    collection, store, embedder = build_store(args.data)
    questions = list(collection.queries.values())[: args.limit]
    with ScriptedLLMServer(qrels_reply(collection), latency=0.0) as server:
        chat = OpenAIChatClient(server.base_url, "scripted")
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
        profile = cProfile.Profile()
        profile.enable()
        profiled_started = time.perf_counter()
        for question in questions:
            one(loop, question)
        profile.disable()
        profiled = time.perf_counter() - profiled_started
        calls = server.request_count
    share = parts(profile, profiled)
    report = {
        "collection": collection.name,
        "questions": len(questions),
        "k": args.k,
        "iterations": args.iterations,
        "torch_threads": torch.get_num_threads(),
        "bm25": store._bm25.implementation,
        "p50_seconds": statistics.median(seconds),
        "p90_seconds": statistics.quantiles(seconds, n=10)[-1] if len(seconds) > 1 else seconds[0],
        "mean_seconds": statistics.fmean(seconds),
        "llm_requests_all_passes": calls,
        "profile_share_of_time": share,
    }
    print(json.dumps(report, indent=2))
    pstats.Stats(profile).sort_stats("cumulative").print_stats(args.top)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
