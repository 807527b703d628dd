"""Does the offline judge decide the same with ONNX Runtime's span vectors as with torch's?

For the first ``--limit`` questions of a BEIR collection, the question's ``--k`` best BM25 hits
(the same documents for every arm, no embedding involved in choosing them) are judged by
``LocalEvaluator`` three times, each with a fresh embedder: torch with ``span_precision="auto"``
(bfloat16 on a CPU that multiplies it natively, float32 elsewhere), torch in float32, and the
library's default ``OnnxEmbedder`` (spans pooled from its own session). Prints, for each arm
against the ONNX one, how many verdicts differ in ``relevant`` and the largest score and
confidence differences, and writes JSON.

    python benchmarks/judge_embedders.py DATA --limit 50 --k 10 --json OUT.json
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

import structlog

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks.beir import load_collection
from corrective_rag.evaluate.local import LocalEvaluator
from corrective_rag.models.embeddings import SentenceTransformerEmbedder
from corrective_rag.models.onnx_embedder import OnnxEmbedder
from corrective_rag.store.bm25 import BM25Index
from corrective_rag.types import Verdict


def judged(arm: object, idf: object, cases: list) -> list[Verdict]:
    """Every verdict of ``LocalEvaluator(arm)`` over ``cases`` (question, documents), in order."""
    evaluator = LocalEvaluator(arm, idf=idf)  # type: ignore[arg-type]
    return [v for question, docs in cases for v in evaluator.evaluate(question, docs).verdicts]


def compare(base: list[Verdict], other: list[Verdict]) -> dict[str, float]:
    """How far ``other``'s verdicts are from ``base``'s, pair by pair."""
    pairs = list(zip(base, other, strict=True))
    return {
        "verdicts": len(pairs),
        "relevant_differs": sum(a.relevant != b.relevant for a, b in pairs),
        "max_score_diff": max(abs((a.score or 0.0) - (b.score or 0.0)) for a, b in pairs),
        "max_confidence_diff": max(
            abs((a.confidence or 0.0) - (b.confidence or 0.0)) for a, b in pairs
        ),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", help="collection folder in BEIR layout")
    parser.add_argument("--limit", type=int, default=50, help="first N questions")
    parser.add_argument("--k", type=int, default=10, help="BM25 hits judged per question")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    collection = load_collection(args.data)
    bm25 = BM25Index()
    bm25.upsert((d.id, d.text) for d in collection.documents)
    by_id = {d.id: d for d in collection.documents}
    cases = []
    for qid in list(collection.queries)[: args.limit]:
        question = collection.queries[qid]
        hits = bm25.top_k(question, args.k)
        cases.append((question, [by_id[doc_id] for doc_id, _ in hits]))
    onnx = OnnxEmbedder(cache_size=0)
    arms = {
        "torch_auto": SentenceTransformerEmbedder(cache_size=0),
        "torch_float32": SentenceTransformerEmbedder(cache_size=0, span_precision="float32"),
    }
    base = judged(onnx, bm25.idf, cases)
    report: dict = {"collection": collection.name, "questions": len(cases), "k": args.k}
    for name, arm in arms.items():
        report[f"{name}_vs_onnx"] = {
            "span_precision": arm.span_precision,
            **compare(base, judged(arm, bm25.idf, cases)),
        }
    print(json.dumps(report, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
