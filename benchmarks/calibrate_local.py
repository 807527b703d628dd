"""Calibrate and measure the local evaluator against qrels on the top-10 hybrid hits.

For every query of every collection given, retrieve the top 10 documents, judge them with
``LocalEvaluator`` and compare "relevant" with the qrels: precision, recall and F1 per collection.
With ``--fit``, also fit the logistic weights and the threshold on all collections pooled (each
collection weighs the same) and report the agreement with the fitted constants.

    python benchmarks/calibrate_local.py ../shared/data/hotpotqa-dev500-distractor \\
        ../shared/data/classic-cisi ../shared/data/classic-cranfield ../shared/data/classic-cacm \\
        --fit --json calibrate_local.json
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import structlog
from scipy.optimize import minimize

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks.beir_data import load_collection
from benchmarks.retrievers import DiskCachedEmbedder, build_retriever
from corrective_rag.evaluate.local import DEFAULT_WEIGHTS, LocalEvaluator, LocalWeights, title_links
from corrective_rag.store.embeddings import SentenceTransformerEmbedder

TOP_K = 10
BATCH = 5  # the loop's default top_k
L2 = 1e-3  # a touch of ridge so that the fit is unique when a feature barely varies


def collect(folder: str, embedder: DiskCachedEmbedder, limit: int | None) -> dict:
    """Direct features, title links and qrel labels of the top-10 hits of every query."""
    collection = load_collection(folder)
    retriever = build_retriever(collection, embedder)
    evaluator = LocalEvaluator(embedder, idf=retriever.idf, link_titles=False)
    rows, labels, links = [], [], []
    started = time.perf_counter()
    queries = list(collection.queries.items())[:limit]
    for qid, question in queries:
        hits = retriever.retrieve(question, top_k=TOP_K)
        documents = [h.document for h in hits]
        # judged in batches of BATCH, as the loop sends them (the gap features depend on it)
        features = [
            f
            for start in range(0, len(documents), BATCH)
            for f in evaluator.features(question, documents[start : start + BATCH])
        ]
        offset = len(rows)
        rows.extend(_direct(f.vector()) for f in features)
        labels.extend(d.id in collection.qrels[qid] for d in documents)
        links.extend(tuple(offset + j for j in js) for js in title_links(documents))
    seconds = time.perf_counter() - started
    print(f"{collection.name}: {len(queries)} queries in {seconds:.0f} s", flush=True)
    return {
        "name": collection.name,
        "x": np.asarray(rows, dtype=np.float64),
        "y": np.asarray(labels, dtype=bool),
        "links": links,
        "queries": len(queries),
        "seconds_per_query": seconds / max(len(queries), 1),
    }


_DIRECT = ("dense", "sentence", "coverage", "dense_gap", "sentence_gap", "coverage_gap")


def _direct(vector: tuple[float, ...]) -> tuple[float, ...]:
    """The features of ``LocalFeatures.vector()`` but the title link, in ``_DIRECT`` order."""
    return vector[:3] + vector[4:]


def _weights(beta: np.ndarray) -> LocalWeights:
    """Weights from a fitted ``(bias, *_DIRECT, linked)`` vector."""
    values = [round(float(b), 3) for b in beta]
    return LocalWeights(
        bias=values[0], linked=values[-1], **dict(zip(_DIRECT, values[1:-1], strict=True))
    )


def scores(weights: LocalWeights, data: dict) -> np.ndarray:
    """Scores as ``LocalEvaluator`` computes them, linked feature included."""
    w = np.array([getattr(weights, name) for name in _DIRECT])
    direct = 1.0 / (1.0 + np.exp(-(weights.bias + data["x"] @ w)))
    linked = np.array([max((direct[j] for j in js), default=0.0) for js in data["links"]])
    return 1.0 / (1.0 + np.exp(-(weights.bias + data["x"] @ w + weights.linked * linked)))


def agreement(predicted: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    """Precision, recall and F1 of ``predicted`` against ``truth``."""
    tp = float(np.sum(predicted & truth))
    precision = tp / max(float(np.sum(predicted)), 1.0)
    recall = tp / max(float(np.sum(truth)), 1.0)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def _loss(beta: np.ndarray, x: np.ndarray, y: np.ndarray, sample: np.ndarray) -> float:
    """Weighted logistic loss; a vector one short leaves the linked weight at zero."""
    if len(beta) < x.shape[1]:
        beta = np.append(beta, 0.0)
    z = x @ beta
    nll = np.sum(sample * (np.logaddexp(0.0, z) - y * z))
    return float(nll + L2 * np.sum(beta[1:] ** 2))


def fit(datasets: list[dict]) -> LocalWeights:
    """Logistic regression on the pooled collections, then the threshold for the best mean F1."""

    def design(weights: LocalWeights | None, data: dict) -> np.ndarray:
        if weights is None:
            linked = np.zeros(len(data["y"]))
        else:
            w = np.array([getattr(weights, name) for name in _DIRECT])
            direct = 1.0 / (1.0 + np.exp(-(weights.bias + data["x"] @ w)))
            linked = np.array([max((direct[j] for j in js), default=0.0) for js in data["links"]])
        return np.column_stack([np.ones(len(data["y"])), data["x"], linked])

    weights: LocalWeights | None = None
    for _ in range(3):  # the linked feature depends on the direct weights: iterate to a fixpoint
        x = np.vstack([design(weights, d) for d in datasets])
        y = np.concatenate([d["y"] for d in datasets]).astype(float)
        sample = np.concatenate([np.full(len(d["y"]), 1.0 / len(d["y"])) for d in datasets])
        use_link = weights is not None
        start = np.zeros(x.shape[1] if use_link else x.shape[1] - 1)
        beta = minimize(_loss, start, args=(x, y, sample), method="BFGS").x
        beta = beta if use_link else np.append(beta, 0.0)
        weights = _weights(beta)
    assert weights is not None
    weights = replace(weights, linked=fit_link(weights, datasets))
    best = max(
        (float(t) for t in np.arange(0.1, 0.91, 0.02)),
        key=lambda t: np.mean([agreement(scores(weights, d) >= t, d["y"])["f1"] for d in datasets]),
    )
    return LocalWeights(**{**asdict(weights), "threshold": round(best, 2)})


def fit_link(weights: LocalWeights, datasets: list[dict]) -> float:
    """The title link's weight, fitted only on the documents that have a link.

    Only titled collections have links, so in the pooled fit the untitled ones pull the link's
    weight down through the shared bias; here the direct score is a fixed offset and only the
    link's weight is fitted, on the rows where a link exists.
    """
    w = np.array([getattr(weights, name) for name in _DIRECT])
    offsets, values, labels = [], [], []
    for data in datasets:
        z = weights.bias + data["x"] @ w
        direct = 1.0 / (1.0 + np.exp(-z))
        for i, js in enumerate(data["links"]):
            if js:
                offsets.append(z[i])
                values.append(max(direct[j] for j in js))
                labels.append(float(data["y"][i]))
    if not offsets:
        return weights.linked
    z0, v, y = np.array(offsets), np.array(values), np.array(labels)

    def loss(b: np.ndarray) -> float:
        z = z0 + b[0] * v
        return float(np.sum(np.logaddexp(0.0, z) - y * z))

    return round(float(minimize(loss, np.zeros(1), method="BFGS").x[0]), 3)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="+", help="collection folders in BEIR layout")
    parser.add_argument("--fit", action="store_true", help="fit weights and threshold")
    parser.add_argument("--limit", type=int, default=None, help="queries per collection")
    parser.add_argument("--json", default=None, help="write the figures here")
    args = parser.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    embedder = DiskCachedEmbedder(SentenceTransformerEmbedder())
    datasets = []
    for folder in args.data:
        datasets.append(collect(folder, embedder, args.limit))
        embedder.save()
    candidates = {"default": DEFAULT_WEIGHTS}
    if args.fit:
        candidates["fitted"] = fit(datasets)
        print("fitted:", candidates["fitted"])
    report: dict = {"top_k": TOP_K, "weights": {}, "collections": {}}
    for label, weights in candidates.items():
        report["weights"][label] = asdict(weights)
        for data in datasets:
            figures = agreement(scores(weights, data) >= weights.threshold, data["y"])
            entry = report["collections"].setdefault(
                data["name"],
                {
                    "queries": data["queries"],
                    "judged": len(data["y"]),
                    "relevant_share": float(np.mean(data["y"])),
                    "seconds_per_query": data["seconds_per_query"],
                },
            )
            entry[label] = figures
            print(
                f"{label:8s} {data['name']:28s} P {figures['precision']:.3f} "
                f"R {figures['recall']:.3f} F1 {figures['f1']:.3f}"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
