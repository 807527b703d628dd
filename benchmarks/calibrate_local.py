"""Calibrate and measure the local evaluator against qrels on the top-10 hybrid hits.

For every query of every collection given, retrieve the top 10 documents, judge them with
``LocalEvaluator`` and compare "relevant" with the qrels: precision, recall and F1 per collection.
With ``--fit``, also fit the logistic weights and the threshold on all collections pooled (each
collection weighs the same) and report the agreement with the fitted constants.

    python benchmarks/calibrate_local.py HOTPOTQA_DIR CISI_DIR CRANFIELD_DIR CACM_DIR \\
        --fit --json calibrate_local.json

Each folder is a collection in BEIR layout (docs/benchmarks.md names the public ones used).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import structlog
from scipy.optimize import minimize

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks.beir import load_collection
from benchmarks.cache import DiskCachedEmbedder, default_cache_path
from benchmarks.retrievers import build_retriever
from corrective_rag.evaluate.links import naming_cosine, title_links
from corrective_rag.evaluate.local import (
    DEFAULT_WEIGHTS,
    LocalEvaluator,
    LocalFeatures,
    LocalWeights,
)
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.models.embeddings import SentenceTransformerEmbedder
from corrective_rag.rewrite.local import LocalRewriter
from corrective_rag.store.hybrid import HybridStore
from corrective_rag.text import content_terms, tokenize
from corrective_rag.text.lexical import complement, term_weights, title_phrase
from corrective_rag.types import Document, Evaluation

TOP_K = 10
BATCH = 5  # the loop's default top_k
L2 = 1e-3  # a touch of ridge so that the fit is unique when a feature barely varies


class _Recorder:
    """Passes the loop's calls to a ``LocalEvaluator``, remembering each batch it was sent."""

    documents_per_call = None  # no LLM calls, as the wrapped evaluator

    def __init__(self, inner: LocalEvaluator) -> None:
        self.inner = inner
        self.batches: list[list[Document]] = []

    def evaluate(self, question: str, documents: Sequence[Document]) -> Evaluation:
        self.batches.append(list(documents))
        return self.inner.evaluate(question, documents)


def _loop_batches(retriever: HybridStore) -> Callable[[str], list[list[Document]]]:
    """The batches the corrective loop at its defaults judges for a question."""
    recorder = _Recorder(LocalEvaluator(retriever.embedder, idf=retriever.idf))
    loop = CorrectiveRAGOrchestrator(retriever, recorder, LocalRewriter(idf=retriever.idf))

    def batches(question: str) -> list[list[Document]]:
        recorder.batches = []
        loop.run(question)
        return recorder.batches

    return batches


def _top10_batches(retriever: HybridStore) -> Callable[[str], list[list[Document]]]:
    """The top-10 hits of a question in batches of ``BATCH``, as the loop would send them."""

    def batches(question: str) -> list[list[Document]]:
        documents = [h.document for h in retriever.retrieve(question, top_k=TOP_K)]
        return [documents[i : i + BATCH] for i in range(0, len(documents), BATCH)]

    return batches


def collect(folder: str, embedder: DiskCachedEmbedder, limit: int | None, judged: str) -> dict:
    """Direct features, title links and qrel labels of the documents judged for every query.

    ``judged`` is ``top10`` (the question's top-10 hits) or ``loop`` (what the corrective loop
    at its defaults, with the current weights, sends the evaluator).
    """
    collection = load_collection(folder)
    retriever = build_retriever(collection, embedder)
    evaluator = LocalEvaluator(embedder, idf=retriever.idf, link_titles=False)
    batches_of = (_loop_batches if judged == "loop" else _top10_batches)(retriever)
    rows: list[tuple[float, ...]] = []
    labels: list[bool] = []
    links: list[tuple[tuple[int, float, float], ...]] = []
    groups: list[int] = []
    row_ends: list[int] = []
    started = time.perf_counter()
    queries = list(collection.queries.items())[:limit]
    for number, (qid, question) in enumerate(queries):
        batches = batches_of(question)
        documents = [d for batch in batches for d in batch]
        # judged batch by batch, in order: the gap features depend on what came before
        features = [f for batch in batches for f in evaluator.features(question, batch)]
        ends = [sum(len(b) for b in batches[: n + 1]) for n, b in enumerate(batches) for _ in b]
        offset = len(rows)
        rows.extend(_direct(f) for f in features)
        labels.extend(d.id in collection.relevant(qid) for d in documents)
        groups.extend([number] * len(documents))
        row_ends.extend(offset + end for end in ends)
        # a document is linked only from its own batch or earlier ones, as the evaluator links
        weights = term_weights(content_terms(question), retriever.idf)
        terms = [frozenset(tokenize(d.text)) for d in documents]
        links.extend(
            tuple(
                (
                    offset + j,
                    naming_cosine(title_phrase(doc.metadata.get("title")), features[j]),
                    complement(weights, terms[j], terms[i]),
                )
                for j in js
                if j < end
            )
            for i, (doc, js, end) in enumerate(
                zip(documents, title_links(documents), ends, strict=True)
            )
        )
    seconds = time.perf_counter() - started
    print(f"{collection.name}: {len(queries)} queries in {seconds:.0f} s", flush=True)
    return {
        "name": collection.name,
        "x": np.asarray(rows, dtype=np.float64),
        "y": np.asarray(labels, dtype=bool),
        "links": links,
        "groups": np.asarray(groups, dtype=np.int64),  # the query of each row
        "ends": np.asarray(row_ends, dtype=np.int64),  # rows judged by the end of each row's batch
        "queries": len(queries),
        "seconds_per_query": seconds / max(len(queries), 1),
    }


_DIRECT = (
    "dense",
    "sentence",
    "coverage",
    "dense_gap",
    "sentence_gap",
    "coverage_gap",
    "named",
)


def _direct(features: LocalFeatures) -> tuple[float, ...]:
    """The features that do not depend on other documents, in ``_DIRECT`` order."""
    return tuple(getattr(features, name) for name in _DIRECT)


_LINKS = ("linked", "bridge", "bridge_sentence", "bridge_complement", "bridge_top", "bridge_depth")


def _link_terms(weights: LocalWeights, data: dict) -> tuple[np.ndarray, np.ndarray]:
    """Direct logits, then the ``_LINKS`` features as ``LocalEvaluator`` computes them."""
    w = np.array([getattr(weights, name) for name in _DIRECT])
    z = weights.bias + data["x"] @ w
    direct = 1.0 / (1.0 + np.exp(-z))
    links = data["links"]
    linked = np.array([max((direct[j] for j, _, _ in js), default=0.0) for js in links])
    said = np.array([max((direct[j] * c for j, c, _ in js), default=0.0) for js in links])
    adds = np.array([max((direct[j] * a for j, _, a in js), default=0.0) for js in links])
    groups, ends = data["groups"], data["ends"]
    tops = np.array([_top_names(direct, groups, ends, i, js) for i, js in enumerate(links)])
    own = 1.0 - direct
    depth = linked * np.maximum(0.0, -z)
    return z, np.column_stack([linked, linked * own, said * own, adds, tops * own, depth])


def _top_names(direct: np.ndarray, groups: np.ndarray, ends: np.ndarray, i: int, js: tuple) -> bool:
    """Whether row ``i`` is named by the best document its question had judged by its batch."""
    if not js:
        return False
    seen = np.where((groups == groups[i]) & (np.arange(len(direct)) < ends[i]))[0]
    return int(seen[np.argmax(direct[seen])]) in {j for j, _, _ in js}


def scores(weights: LocalWeights, data: dict) -> np.ndarray:
    """Scores as ``LocalEvaluator`` computes them, title links included."""
    z, links = _link_terms(weights, data)
    w = np.array([getattr(weights, name) for name in _LINKS])
    return 1.0 / (1.0 + np.exp(-(z + links @ w)))


def agreement(predicted: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    """Precision, recall and F1 of ``predicted`` against ``truth``."""
    tp = float(np.sum(predicted & truth))
    precision = tp / max(float(np.sum(predicted)), 1.0)
    recall = tp / max(float(np.sum(truth)), 1.0)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def _loss(beta: np.ndarray, x: np.ndarray, y: np.ndarray, sample: np.ndarray) -> float:
    """Weighted logistic loss with a light ridge (the first column, the bias, is not shrunk)."""
    z = x @ beta
    nll = np.sum(sample * (np.logaddexp(0.0, z) - y * z))
    return float(nll + L2 * np.sum(beta[1:] ** 2))


def fit(datasets: list[dict]) -> LocalWeights:
    """Logistic regression on the pooled collections, then the links, then the best threshold.

    Each collection weighs the same in the direct fit; the title-link weights are fitted after,
    on the linked documents only (see :func:`fit_links`); the threshold is the one with the best
    F1 averaged over the collections.
    """
    x = np.vstack([np.column_stack([np.ones(len(d["y"])), d["x"]]) for d in datasets])
    y = np.concatenate([d["y"] for d in datasets]).astype(float)
    sample = np.concatenate([np.full(len(d["y"]), 1.0 / len(d["y"])) for d in datasets])
    beta = minimize(_loss, np.zeros(x.shape[1]), args=(x, y, sample), method="BFGS").x
    values = [round(float(b), 3) for b in beta]
    weights = LocalWeights(
        bias=values[0], linked=0.0, **dict(zip(_DIRECT, values[1:], strict=True))
    )
    weights = replace(weights, **fit_links(weights, datasets))
    best = max(
        (float(t) for t in np.arange(0.1, 0.91, 0.02)),
        key=lambda t: np.mean([agreement(scores(weights, d) >= t, d["y"])["f1"] for d in datasets]),
    )
    return replace(weights, threshold=round(best, 2))


def fit_links(weights: LocalWeights, datasets: list[dict]) -> dict[str, float]:
    """The weights of the ``_LINKS`` features, fitted only on the documents that have a link.

    Only titled collections have links, so in a pooled fit the untitled ones would pull these
    weights down through the shared bias; here the direct logit is a fixed offset and only the
    link weights are fitted, on the rows where a link exists. ``linked`` and ``bridge`` are both
    needed: a link lifts a document that looks unlike the question (a multi-hop bridge) but
    hardly one that already looks like it (a sibling page the on-topic document also mentions).
    """
    parts = [_link_terms(weights, d) for d in datasets]
    has = [np.array([bool(js) for js in d["links"]], dtype=bool) for d in datasets]
    if not any(h.any() for h in has):
        return {name: getattr(weights, name) for name in _LINKS}
    z0 = np.concatenate([z[h] for (z, _), h in zip(parts, has, strict=True)])
    v = np.vstack([links[h] for (_, links), h in zip(parts, has, strict=True)])
    y = np.concatenate([d["y"][h] for d, h in zip(datasets, has, strict=True)]).astype(float)

    def loss(b: np.ndarray) -> float:
        z = z0 + v @ b
        return float(np.sum(np.logaddexp(0.0, z) - y * z) + L2 * np.sum(b**2))

    beta = minimize(loss, np.zeros(len(_LINKS)), method="BFGS").x
    return {name: round(float(b), 3) for name, b in zip(_LINKS, beta, strict=True)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="+", help="collection folders in BEIR layout")
    parser.add_argument("--fit", action="store_true", help="fit weights and threshold")
    parser.add_argument("--limit", type=int, default=None, help="queries per collection")
    parser.add_argument(
        "--judged",
        choices=["top10", "loop"],
        default="top10",
        help="documents to judge: the top-10 hits, or what the corrective loop sends",
    )
    parser.add_argument("--json", default=None, help="write the figures here")
    args = parser.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    model = SentenceTransformerEmbedder()
    embedder = DiskCachedEmbedder(model, default_cache_path(model))
    datasets = []
    for folder in args.data:
        datasets.append(collect(folder, embedder, args.limit, args.judged))
        embedder.save()
    candidates = {"default": DEFAULT_WEIGHTS}
    if args.fit:
        candidates["fitted"] = fit(datasets)
        print("fitted:", candidates["fitted"])
    report: dict = {"judged": args.judged, "top_k": TOP_K, "weights": {}, "collections": {}}
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
