"""Grading latency: one call per document in sequence (naive) vs LLMEvaluator's parallel batches.

Both grade the same documents against the same ScriptedLLMServer (fixed latency per request),
so the difference is the number of round trips in series. Prints a table and writes JSON.

    python benchmarks/grading.py --latency-ms 200 --docs 10 --json OUT.json
"""

from __future__ import annotations

import argparse
import json
import logging
import time

import structlog

from corrective_rag.evaluate.cache import VerdictCache
from corrective_rag.evaluate.llm import LLMEvaluator
from corrective_rag.llm.client import OpenAIChatClient
from corrective_rag.testing.server import ScriptedLLMServer
from corrective_rag.types import Document, Verdict

QUESTION = "How do volcanoes form magma chambers beneath the crust?"
TOPICS = [
    "Volcanoes form magma chambers when molten rock rises and pools beneath the crust.",
    "Bank earnings lifted the stock market on Tuesday afternoon.",
    "Magma chambers under volcanoes fill over centuries before an eruption.",
    "The recipe needs two cups of flour and a pinch of salt.",
    "Crust deformation above a magma chamber warns of volcanoes waking.",
]


def documents(n: int) -> list[Document]:
    return [Document(f"doc{i}", f"{TOPICS[i % len(TOPICS)]} (note {i})") for i in range(n)]


def key(v: Verdict) -> tuple:
    return (v.document_id, v.relevant, v.label, v.score, v.confidence)


def run(evaluator: LLMEvaluator, server: ScriptedLLMServer, docs: list[Document]) -> dict:
    before = server.request_count
    started = time.perf_counter()
    evaluation = evaluator.evaluate(QUESTION, docs)
    wall = time.perf_counter() - started
    return {
        "wall_seconds": round(wall, 4),
        "llm_calls": evaluation.usage.llm_calls,
        "http_requests": server.request_count - before,
        "prompt_tokens": evaluation.usage.prompt_tokens,
        "completion_tokens": evaluation.usage.completion_tokens,
        "verdicts": [key(v) for v in evaluation.verdicts],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--docs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--json", dest="json_path", default=None)
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    docs = documents(args.docs)
    with ScriptedLLMServer(latency=args.latency_ms / 1000) as server:
        naive = LLMEvaluator(
            OpenAIChatClient(server.base_url, "scripted"),
            batch_size=1,
            max_workers=1,
            cache=VerdictCache(0),
        )
        ours = LLMEvaluator(
            OpenAIChatClient(server.base_url, "scripted"),
            batch_size=args.batch_size,
            max_workers=args.workers,
            cache=VerdictCache(0),
        )
        # One unmeasured call each warms tiktoken and the HTTP connection pools.
        naive.evaluate(QUESTION, docs[:1])
        ours.evaluate(QUESTION, docs[:1])
        result_naive = run(naive, server, docs)
        result_ours = run(ours, server, docs)
    identical = result_naive.pop("verdicts") == result_ours.pop("verdicts")
    speedup = result_naive["wall_seconds"] / result_ours["wall_seconds"]
    out = {
        "latency_ms": args.latency_ms,
        "docs": args.docs,
        "batch_size": args.batch_size,
        "workers": args.workers,
        "naive": result_naive,
        "ours": result_ours,
        "speedup": round(speedup, 2),
        "identical_verdicts": identical,
    }
    print(f"{'design':<8} {'wall s':>8} {'calls':>6} {'prompt tok':>11}")
    for name in ("naive", "ours"):
        r = out[name]
        print(f"{name:<8} {r['wall_seconds']:>8.3f} {r['llm_calls']:>6} {r['prompt_tokens']:>11}")
    print(f"speedup {speedup:.1f}x, identical verdicts: {identical}")
    if args.json_path:
        with open(args.json_path, "w", encoding="utf-8") as fh:
            json.dump(out, fh, indent=2)


if __name__ == "__main__":
    main()
