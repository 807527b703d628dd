"""How long the local judge takes: ``LocalEvaluator.evaluate`` on 5 documents of about 200 words.

The model is loaded and warmed first; every repetition then judges 5 documents it has never seen
(cut from the standard library's docstrings, so nothing is cached), with one thread and with
the engine's default threads, for each embedder in turn on the same documents: torch
(``SentenceTransformerEmbedder``) and ONNX Runtime (``OnnxEmbedder``, the library's default,
which pools the judge's spans from its own session). Prints p50 and p90 in milliseconds and
writes them as JSON, with
the p50 of the process's CPU time per call beside the wall clock: on a shared machine the wall
clock also counts waiting for a core, the CPU time does not (at one thread the two agree on an
idle machine; with more threads the CPU time is the sum over them).
``--span-precision`` sets the torch embedder's ``span_precision`` (the judge's document passes;
``auto`` is bfloat16 on a CPU with native bfloat16, float32 elsewhere); ``--embedders`` picks
which run.

    python benchmarks/judge_speed.py --json judge_speed.json
    python benchmarks/judge_speed.py --span-precision float32 --json judge_speed_fp32.json
    python benchmarks/judge_speed.py --embedders onnx --json judge_speed_onnx.json
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import structlog
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from corrective_rag.cli.demo import stdlib_documents
from corrective_rag.evaluate.local import LocalEvaluator
from corrective_rag.models.embeddings import PRECISIONS, SentenceTransformerEmbedder
from corrective_rag.models.onnx_embedder import OnnxEmbedder
from corrective_rag.types import Document

WORDS = 200
BATCH = 5
QUESTIONS = (
    "How do I run a shell command and capture its output?",
    "How do I compare two sequences of lines and show their differences?",
    "How do I measure the execution time of a small code snippet?",
)


def documents(count: int) -> list[Document]:
    """``count`` documents of about ``WORDS`` words, cut from the stdlib docstring chunks."""
    words = " ".join(d.text for d in stdlib_documents()).split()
    size = len(words) // WORDS
    if size < count:
        raise SystemExit(f"only {size} documents of {WORDS} words available, {count} wanted")
    return [Document(f"d{i}", " ".join(words[i * WORDS : (i + 1) * WORDS])) for i in range(count)]


def measure(evaluator: LocalEvaluator, docs: list[Document]) -> tuple[list[float], list[float]]:
    """Wall and CPU milliseconds per ``evaluate`` call, each on the next 5 unseen documents."""
    times, cpu = [], []
    for n in range(len(docs) // BATCH):
        batch = docs[n * BATCH : (n + 1) * BATCH]
        question = QUESTIONS[n % len(QUESTIONS)]
        started, cpu_started = time.perf_counter(), time.process_time()
        evaluator.evaluate(question, batch)
        times.append((time.perf_counter() - started) * 1000.0)
        cpu.append((time.process_time() - cpu_started) * 1000.0)
    return times, cpu


EMBEDDERS = ("torch", "onnx")


def embedder_for(name: str, threads: int | None, span_precision: str) -> Any:
    """A fresh embedder with no cache: torch (threads set globally) or ONNX with ``threads``."""
    if name == "torch":
        torch.set_num_threads(threads or torch.get_num_threads())
        return SentenceTransformerEmbedder(cache_size=0, span_precision=span_precision)
    return OnnxEmbedder(cache_size=0, threads=threads)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20, help="calls per thread setting")
    parser.add_argument("--json", default=None, help="write the figures here")
    parser.add_argument("--span-precision", choices=PRECISIONS, default="auto")
    parser.add_argument("--embedders", default=",".join(EMBEDDERS), help="comma list of torch,onnx")
    args = parser.parse_args(argv)
    names = [n for n in args.embedders.split(",") if n]
    if not names or any(n not in EMBEDDERS for n in names):
        parser.error(f"--embedders takes a comma list of {EMBEDDERS}")
    # the judge's per-call debug lines would be timed too
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    default_threads = torch.get_num_threads()
    docs = documents(BATCH * (2 * args.repeats + 1))
    report: dict = {"documents_per_call": BATCH, "words_per_document": WORDS, "embedders": {}}
    settings = (("one_thread", 1), ("default_threads", None))
    for name in names:
        figures_of: dict = {}
        for index, (label, threads) in enumerate(settings):
            # no embedding cache: every call embeds its texts, as a user's first look would
            embedder = embedder_for(name, threads, args.span_precision)
            evaluator = LocalEvaluator(embedder)
            evaluator.evaluate(QUESTIONS[0], docs[:BATCH])  # load and warm the model
            start = BATCH * (1 + index * args.repeats)
            times, cpu = measure(evaluator, docs[start : start + BATCH * args.repeats])
            figures = {
                "threads": threads or "default",
                "span_precision": embedder.span_precision,
                "calls": len(times),
                "p50_ms": float(np.percentile(times, 50)),
                "p90_ms": float(np.percentile(times, 90)),
                "cpu_p50_ms": float(np.percentile(cpu, 50)),
            }
            figures_of[label] = figures
            print(
                f"{name:5s} {label:16s} {figures['span_precision']:8s} "
                f"p50 {figures['p50_ms']:.0f} ms  p90 {figures['p90_ms']:.0f} ms  "
                f"CPU p50 {figures['cpu_p50_ms']:.0f} ms  ({len(times)} calls)"
            )
            torch.set_num_threads(default_threads)
        report["embedders"][name] = figures_of
    report["load_average_1min"] = os.getloadavg()[0]
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
