"""Which signals tell relevant from irrelevant documents *within* one question's top hits.

A judge that keeps documents from a question's top 10 can only beat "keep them all" or "keep the
first k" with evidence that orders the 10 better than retrieval already did. This benchmark
measures that directly: for every question whose top ``--top-k`` hybrid hits hold both relevant
and irrelevant documents (by the qrels), the AUC of each signal over those hits (1.0: every
relevant hit scores above every irrelevant one; 0.5: no better than chance; below 0.5: the signal
points the wrong way), averaged over the questions. Signals:

- ``fused_rank``, ``bm25_rank``, ``dense_rank``: the hybrid rank and each leg's own rank;
- ``dense_cosine``: the question's cosine with the whole document;
- ``coverage``: the share of the question's idf weight that the document's words cover;
- ``length``: the document's length in tokens (above 0.5: longer documents are the relevant ones);
- ``centroid``: the document's cosine with the mean of the top hits' vectors;
- ``judge``: ``LocalEvaluator``'s score with the hits judged in one call, as the loop's first
  iteration would (its weights were fitted on HotpotQA, CISI, Cranfield and CACM: on those
  collections this row is in sample).

    python benchmarks/judge_signals.py DATA_DIR [DATA_DIR ...] --json judge_signals.json
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import structlog

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks.beir import load_collection
from benchmarks.cache import DiskCachedEmbedder, default_cache_path
from benchmarks.retrievers import build_retriever
from corrective_rag.evaluate.local import LocalEvaluator
from corrective_rag.models.embeddings import SentenceTransformerEmbedder
from corrective_rag.store.hybrid import HybridStore
from corrective_rag.text import content_terms, tokenize
from corrective_rag.text.lexical import coverage, term_weights
from corrective_rag.types import Hit

SIGNALS = (
    "fused_rank",
    "bm25_rank",
    "dense_rank",
    "dense_cosine",
    "coverage",
    "length",
    "centroid",
    "judge",
)


def within_auc(scores: Sequence[float], labels: Sequence[bool]) -> float | None:
    """The share of (relevant, irrelevant) pairs that ``scores`` orders right, ties half.

    ``None`` when ``labels`` holds only one class (no pair to order).
    """
    if len(scores) != len(labels):
        raise ValueError(f"{len(scores)} scores for {len(labels)} labels")
    pos = [s for s, y in zip(scores, labels, strict=True) if y]
    neg = [s for s, y in zip(scores, labels, strict=True) if not y]
    if not pos or not neg:
        return None
    right = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return right / (len(pos) * len(neg))


def _leg_rank(hit: Hit, leg: str, missing: int) -> float:
    """Minus the hit's rank on ``leg`` (higher is better); ``-missing`` when the leg missed it."""
    ranks = {score.leg: score.rank for score in hit.legs}
    return -float(ranks.get(leg, missing))


def signals(
    question: str, hits: Sequence[Hit], store: HybridStore, evaluator: LocalEvaluator
) -> dict[str, list[float]]:
    """Every signal's score for each of ``hits`` (higher: more likely relevant)."""
    embed = evaluator.embedder.embed
    docs = [h.document for h in hits]
    q = np.asarray(embed([question])[0], dtype=np.float64)
    vectors = np.asarray(embed([d.text for d in docs]), dtype=np.float64)
    centroid = vectors.mean(axis=0)
    weights = term_weights(content_terms(question), store.idf)  # the judge's own weighting
    tokens = [tokenize(d.text) for d in docs]
    verdicts = evaluator.evaluate(question, docs).verdicts
    missing = len(hits) + 1
    return {
        "fused_rank": [-float(h.rank) for h in hits],
        "bm25_rank": [_leg_rank(h, "bm25", missing) for h in hits],
        "dense_rank": [_leg_rank(h, "dense", missing) for h in hits],
        "dense_cosine": [float(v @ q) for v in vectors],
        "coverage": [coverage(weights, words).share for words in tokens],
        "length": [float(len(words)) for words in tokens],
        "centroid": [float(v @ centroid) for v in vectors],
        "judge": [float(v.score) if v.score is not None else 0.0 for v in verdicts],
    }


def measure(folder: str, top_k: int, embedder: DiskCachedEmbedder) -> dict[str, Any]:
    """Mean within-question AUC per signal on one collection, with how many questions counted."""
    collection = load_collection(folder)
    store = build_retriever(collection, embedder)
    evaluator = LocalEvaluator(store.embedder, idf=store.idf)
    aucs: dict[str, list[float]] = {name: [] for name in SIGNALS}
    relevant_share: list[float] = []
    for qid, question in collection.queries.items():
        truth = collection.relevant(qid)
        hits = store.retrieve(question, top_k=top_k)
        if not hits:
            continue
        labels = [h.document.id in truth for h in hits]
        relevant_share.append(sum(labels) / len(labels))
        if all(labels) or not any(labels):
            continue
        for name, scores in signals(question, hits, store, evaluator).items():
            auc = within_auc(scores, labels)
            if auc is not None:
                aucs[name].append(auc)
    embedder.save()
    counted = len(aucs["fused_rank"])
    return {
        "collection": collection.name,
        "top_k": top_k,
        "questions": len(collection.queries),
        "questions_counted": counted,
        "relevant_share_of_top_k": round(float(np.mean(relevant_share)), 4),
        "auc": {name: round(float(np.mean(v)), 4) if v else None for name, v in aucs.items()},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="+", help="collection folders in BEIR layout")
    parser.add_argument("--top-k", type=int, default=10, help="hits per question (default 10)")
    parser.add_argument("--json", default=None, help="write the figures here")
    args = parser.parse_args(argv)
    if args.top_k < 2:
        parser.error("--top-k must be at least 2")
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    model = SentenceTransformerEmbedder()
    embedder = DiskCachedEmbedder(model, default_cache_path(model))
    reports = [measure(folder, args.top_k, embedder) for folder in args.data]
    width = max(len(name) for name in SIGNALS)
    header = f"{'signal':{width}}  " + "  ".join(f"{r['collection'][:12]:>12}" for r in reports)
    print(f"mean AUC within a question's top {args.top_k} (0.5: chance)")
    print(header)
    for name in SIGNALS:
        row = "  ".join(f"{_cell(r, name):>12}" for r in reports)
        print(f"{name:{width}}  {row}")
    counted = "  ".join(f"{r['questions_counted']:>12}" for r in reports)
    print(f"{'questions':{width}}  {counted}")
    if args.json:
        Path(args.json).write_text(json.dumps(reports, indent=2) + "\n", encoding="utf-8")
    return 0


def _cell(report: dict[str, Any], name: str) -> str:
    value = report["auc"][name]
    return "-" if value is None else f"{value:.3f}"


if __name__ == "__main__":
    raise SystemExit(main())
