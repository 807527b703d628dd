"""What the learned judge costs: ``LearnedEvaluator.evaluate`` on one iteration's 12 documents.

The documents (about 200 words each, cut from the standard library's docstrings as
``judge_speed.py`` cuts them) are indexed in a chromadb store in a folder, which is then opened
again with an ONNX embedder on one thread and no embedding cache, as ``corrective-rag run
--store`` opens an indexed store. Each call judges 12 documents it has not judged before, twice
side by side (the order alternating): embedding every document, as the judge does without a
store, and reading the store's vectors (``LearnedEvaluator(stored=store.vectors)``, what
``--judge learned`` does with a store), which embeds the question alone. Prints the p50 of the
process's CPU time per call (the wall clock beside it: on a shared machine it also counts the
wait for a core) and writes them as JSON.

    python benchmarks/learned_speed.py --json learned_speed.json
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import structlog

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks.judge_speed import QUESTIONS, WORDS, documents
from corrective_rag.evaluate.learned import LearnedEvaluator, model_text
from corrective_rag.models.onnx_embedder import OnnxEmbedder
from corrective_rag.store.hybrid import HybridStore
from corrective_rag.types import Document

BATCH = 12  # one iteration's documents: top_k 12 new documents judged in one call
TARGET_MS = 150.0  # issue 47: one iteration's 12 documents in at most 150 ms on one core


def timed(judge: LearnedEvaluator, question: str, batch: list[Document]) -> tuple[float, float]:
    """Wall and CPU milliseconds of one ``evaluate`` call."""
    started, cpu_started = time.perf_counter(), time.process_time()
    judge.evaluate(question, batch)
    return (time.perf_counter() - started) * 1000.0, (time.process_time() - cpu_started) * 1000.0


def figures(wall: list[float], cpu: list[float]) -> dict[str, float]:
    return {
        "calls": len(wall),
        "cpu_p50_ms": float(np.percentile(cpu, 50)),
        "cpu_p90_ms": float(np.percentile(cpu, 90)),
        "p50_ms": float(np.percentile(wall, 50)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20, help="calls, each way")
    parser.add_argument("--json", default=None, help="write the figures here")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    # the judge's per-call debug lines would be timed too
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    docs = documents(BATCH * (args.repeats + 1))
    with tempfile.TemporaryDirectory(prefix="learned-speed-") as folder:
        with HybridStore.open(folder, embedder=OnnxEmbedder(cache_size=0)) as store:
            store.add(docs)  # indexed on every thread, as `corrective-rag index` does
        one = OnnxEmbedder(cache_size=0, threads=1)
        with HybridStore.open(folder, embedder=one, create=False) as store:
            embedding = LearnedEvaluator(one)
            reading = LearnedEvaluator(one, stored=store.vectors)
            runs: dict[str, tuple[list[float], list[float]]] = {
                "embedded": ([], []),
                "stored": ([], []),
            }
            judges = {"embedded": embedding, "stored": reading}
            embedding.evaluate(QUESTIONS[0], docs[:BATCH])  # load and warm the model
            reading.evaluate(QUESTIONS[0], docs[:BATCH])
            reused = sum(v is not None for v in store.vectors(_as_read(docs)))
            for n in range(args.repeats):
                batch = docs[BATCH * (n + 1) : BATCH * (n + 2)]
                question = QUESTIONS[n % len(QUESTIONS)]
                order = ("embedded", "stored") if n % 2 == 0 else ("stored", "embedded")
                for name in order:
                    wall, cpu = timed(judges[name], question, batch)
                    runs[name][0].append(wall)
                    runs[name][1].append(cpu)
    report: dict = {
        "documents_per_call": BATCH,
        "words_per_document": WORDS,
        "threads": 1,
        "embedder": "OnnxEmbedder(cache_size=0, threads=1)",
        "documents_with_a_stored_vector": f"{reused}/{len(docs)}",
        "target_cpu_ms": TARGET_MS,
        "judges": {name: figures(*runs[name]) for name in runs},
        "load_average_1min": os.getloadavg()[0],
    }
    for name, row in report["judges"].items():
        print(
            f"{name:9s} CPU p50 {row['cpu_p50_ms']:.0f} ms  p90 {row['cpu_p90_ms']:.0f} ms  "
            f"wall p50 {row['p50_ms']:.0f} ms  ({row['calls']} calls of {BATCH})"
        )
    ratio = report["judges"]["embedded"]["cpu_p50_ms"] / report["judges"]["stored"]["cpu_p50_ms"]
    report["cpu_p50_ratio"] = ratio
    print(
        f"stored vectors: {ratio:.1f}x less CPU; {reused}/{len(docs)} documents had one; "
        f"load average {report['load_average_1min']:.1f}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


def _as_read(docs: list[Document]) -> list[Document]:
    """The documents as the judge reads them (title in front, cut to its bound)."""
    return [Document(d.id, model_text(d), d.metadata) for d in docs]


if __name__ == "__main__":
    raise SystemExit(main())
