"""Grading latency: one call per document in sequence (naive) vs LLMEvaluator's batches.

All grade the same documents against the same ScriptedLLMServer (fixed latency per request), so
the difference is the number of round trips in series. ``two-call`` is LLMEvaluator grading
only (batches sized by the context budget; a rewrite would be a second call), ``one-call`` the
judge-and-propose mode, whose grading call also proposes the next query. The verdicts of every
design must be identical. Prints a table and writes JSON.

    python benchmarks/grading.py --latency-ms 200 --docs 10 --json OUT.json
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from typing import Any

import structlog

from corrective_rag.evaluate.cache import VerdictCache
from corrective_rag.evaluate.llm import LLMEvaluator
from corrective_rag.llm.client import OpenAIChatClient
from corrective_rag.testing import ScriptedLLMServer
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


def run(evaluator: LLMEvaluator, server: ScriptedLLMServer, docs: list[Document]) -> dict[str, Any]:
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
        "proposal": evaluation.proposal.query if evaluation.proposal else None,
        "verdicts": [key(v) for v in evaluation.verdicts],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--docs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=None, help="default: context budget")
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
        designs = {
            "naive": naive,
            **{
                name: LLMEvaluator(
                    OpenAIChatClient(server.base_url, "scripted"),
                    batch_size=args.batch_size,
                    max_workers=args.workers,
                    cache=VerdictCache(0),
                    propose=propose,
                )
                for name, propose in (("two-call", False), ("one-call", True))
            },
        }
        # One unmeasured call each warms tiktoken and the HTTP connection pools.
        for evaluator in designs.values():
            evaluator.evaluate(QUESTION, docs[:1])
        results = {name: run(evaluator, server, docs) for name, evaluator in designs.items()}
    verdicts = [r.pop("verdicts") for r in results.values()]
    identical = all(v == verdicts[0] for v in verdicts)
    speedup = results["naive"]["wall_seconds"] / results["one-call"]["wall_seconds"]
    out = {
        "latency_ms": args.latency_ms,
        "docs": args.docs,
        "batch_size": args.batch_size,
        "workers": args.workers,
        **results,
        "speedup": round(speedup, 2),
        "identical_verdicts": identical,
    }
    print(f"{'design':<9} {'wall s':>8} {'calls':>6} {'prompt tok':>11} {'compl tok':>10}")
    for name, r in results.items():
        print(
            f"{name:<9} {r['wall_seconds']:>8.3f} {r['llm_calls']:>6} {r['prompt_tokens']:>11}"
            f" {r['completion_tokens']:>10}"
        )
    print(f"one-call proposal: {results['one-call']['proposal']!r}")
    print(f"speedup one-call vs naive {speedup:.1f}x, identical verdicts: {identical}")
    if args.json_path:
        with open(args.json_path, "w", encoding="utf-8") as fh:
            json.dump(out, fh, indent=2)


if __name__ == "__main__":
    main()
