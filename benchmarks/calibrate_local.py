"""Calibrate and measure the local evaluator against qrels, beside the trivial rules it must beat.

For every query of every collection given, take the documents the judge would be sent (the top
10 hybrid hits in two calls of 5, or with ``--judged loop`` what the corrective loop at its
defaults sends), judge them with ``LocalEvaluator``'s own scoring (``direct_features`` and
``pool_features``, the later call compared with the earlier documents as the loop does) and
compare "relevant" with the qrels: precision, recall and F1 per collection.

Beside the judge, on the same judged documents, the trivial rules: keep all, keep the first k
(for the k fitted like the judge, and for the best k on the scored collection itself, an
in-sample upper bound of that rule), and keep a document whose dense cosine with the question
reaches a threshold fitted like the judge's.

* ``--fit``: fit the weights and the threshold on all collections given (each weighs the same)
  and report them (in-sample figures).
* ``--ceiling``: fit on each collection itself, five-fold over its queries (what the features
  can do on a collection at best; in-sample for the collection).
* ``--bounds``: also fit the per-question bounds (``LocalWeights.margin`` and ``cap``), which
  the shipped weights leave off.
* ``--loco``: leave one collection out: fit on the others, score on it, for each (out-of-sample
  figures; the rules' k and cosine threshold are fitted the same way). The "best rule" is
  picked among the rules on the scored collection, in hindsight; the "rule chosen out of
  sample" is the one with the best mean F1 on the collections fitted on, as the judge is.

    python benchmarks/calibrate_local.py hotpotqa-dev500-distractor classic-cisi \\
        classic-cranfield classic-cacm --loco --json calibrate_local.json
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import structlog
from scipy.optimize import minimize

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks.beir import load_collection
from benchmarks.cache import DiskCachedEmbedder, default_cache_path
from benchmarks.retrievers import build_retriever
from corrective_rag.errors import InputError
from corrective_rag.evaluate.local import DEFAULT_WEIGHTS, LocalEvaluator
from corrective_rag.evaluate.local_features import LocalFeatures, LocalWeights
from corrective_rag.evaluate.pool import pool_features
from corrective_rag.evaluate.selection import keep_from
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.models.embeddings import SentenceTransformerEmbedder
from corrective_rag.rewrite.local import LocalRewriter
from corrective_rag.store.hybrid import HybridStore
from corrective_rag.types import Document, Evaluation, Judged

TOP_K = 10
BATCH = 5  # the loop's default top_k
L2 = 1e-3  # a touch of ridge so that the fit is unique when a feature barely varies
FLOORS = np.round(np.arange(0.0, 0.51, 0.05), 2)  # the least probability a kept document needs
MARGINS = (0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, math.inf)  # logits below the question's best
CAPS = (1, 2, 3, 4, 5, 6, 8, None)  # the most documents kept of a question's pool (None: all)

# The features that do not depend on the weights, and those that do (through the namers' scores).
DIRECT = (
    "dense",
    "sentence",
    "coverage",
    "dense_gap",
    "sentence_gap",
    "coverage_gap",
    "named",
    "bm25",
)
LINKS = ("linked", "bridge", "bridge_sentence", "bridge_complement", "bridge_top", "bridge_depth")


class _Recorder:
    """Passes the loop's calls to a ``LocalEvaluator``, remembering each batch it was sent."""

    documents_per_call = None  # no LLM calls, as the wrapped evaluator

    def __init__(self, inner: LocalEvaluator) -> None:
        self.inner = inner
        self.batches: list[list[Document]] = []

    def evaluate(self, question: str, documents: Sequence[Document]) -> Evaluation:
        return self.evaluate_in_context(question, documents, ())

    def evaluate_in_context(
        self, question: str, documents: Sequence[Document], judged: Sequence[Judged]
    ) -> Evaluation:
        self.batches.append(list(documents))
        return self.inner.evaluate_in_context(question, documents, judged)


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
    """The top-10 hits of a question in calls of ``BATCH``, as the loop would send them."""

    def batches(question: str) -> list[list[Document]]:
        documents = [h.document for h in retriever.retrieve(question, top_k=TOP_K)]
        return [documents[i : i + BATCH] for i in range(0, len(documents), BATCH)]

    return batches


@dataclass(frozen=True, slots=True)
class Query:
    """One query's judged documents in their calls, with the weight-free evidence."""

    question_weights: dict[str, float]
    batches: tuple[tuple[Document, ...], ...]
    direct: tuple[LocalFeatures, ...]  # of every judged document, in judged order


@dataclass(frozen=True, slots=True)
class Dataset:
    """A collection's judged documents: qrel labels, order judged, and the queries' evidence."""

    name: str
    queries: tuple[Query, ...]
    y: np.ndarray  # bool per judged document
    position: np.ndarray  # 1-based place of the document in its query's judged order
    seconds_per_query: float


def collect(folder: str, embedder: DiskCachedEmbedder, limit: int | None, judged: str) -> Dataset:
    """The documents judged for every query, with their direct evidence and qrel labels."""
    collection = load_collection(folder)
    retriever = build_retriever(collection, embedder)
    evaluator = LocalEvaluator(embedder, idf=retriever.idf)
    batches_of = (_loop_batches if judged == "loop" else _top10_batches)(retriever)
    queries: list[Query] = []
    labels: list[bool] = []
    positions: list[int] = []
    started = time.perf_counter()
    items = list(collection.queries.items())[:limit]
    for qid, question in items:
        batches = tuple(tuple(b) for b in batches_of(question) if b)
        documents = [d for batch in batches for d in batch]
        direct = tuple(evaluator.direct_features(question, documents))
        queries.append(Query(evaluator.term_weights(question), batches, direct))
        labels.extend(d.id in collection.relevant(qid) for d in documents)
        positions.extend(range(1, len(documents) + 1))
    seconds = time.perf_counter() - started
    print(f"{collection.name}: {len(items)} queries in {seconds:.0f} s", flush=True)
    return Dataset(
        collection.name,
        tuple(queries),
        np.asarray(labels, dtype=bool),
        np.asarray(positions, dtype=np.int64),
        seconds / max(len(items), 1),
    )


def load_datasets(folders: Sequence[str], limit: int | None, judged: str) -> list[Dataset]:
    """Every folder's judged documents, embedded through the benchmarks' disk cache."""
    model = SentenceTransformerEmbedder()
    embedder = DiskCachedEmbedder(model, default_cache_path(model))
    datasets = []
    for folder in folders:
        try:
            data = collect(folder, embedder, limit, judged)
        except InputError as exc:
            raise SystemExit(f"{folder}: {exc}") from exc
        if not data.queries:
            raise SystemExit(f"{folder}: no query has a relevant document in qrels/test.tsv")
        datasets.append(data)
        embedder.save()
    return datasets


def _calls(
    weights: LocalWeights, data: Dataset, link_titles: bool | None
) -> list[tuple[list[LocalFeatures], list[float]]]:
    """Per call of every query: the call's documents' features, and the pool's probabilities.

    Each call is judged among the documents judged before it for the same query (the context
    the orchestrator passes), through the evaluator's own :func:`pool_features`.
    """
    found = []
    for query in data.queries:
        documents = [d for b in query.batches for d in b]
        end = 0
        for batch in query.batches:
            start, end = end, end + len(batch)
            # the evaluator puts the call's documents first, then the context
            order = [*range(start, end), *range(start)]
            pool = pool_features(
                weights,
                query.question_weights,
                [documents[i] for i in order],
                [query.direct[i] for i in order],
                link_titles=link_titles,
            )
            found.append((pool[: len(batch)], [weights.score(f) for f in pool]))
    return found


def judged_features(
    weights: LocalWeights, data: Dataset, *, link_titles: bool | None = None
) -> list[LocalFeatures]:
    """Every judged document's features as ``LocalEvaluator`` computes them in the loop's calls."""
    return [f for features, _ in _calls(weights, data, link_titles) for f in features]


def pools(weights: LocalWeights, data: Dataset) -> list[tuple[int, list[float]]]:
    """Per call: how many documents the call judged, and the probabilities of its whole pool."""
    return [(len(features), pool) for features, pool in _calls(weights, data, None)]


def cut_decisions(
    found: Sequence[tuple[int, list[float]]],
    floor: float,
    margin: float,
    cap: int | None,
    keep_at: float = DEFAULT_WEIGHTS.keep_at,
) -> np.ndarray:
    """Whether the judge keeps each judged document, given its calls' pools (``keep_from``)."""
    kept: list[bool] = []
    for n, pool in found:
        cut = keep_from(pool, floor, keep_at, margin=margin, cap=cap)
        kept.extend(p >= cut for p in pool[:n])
    return np.asarray(kept, dtype=bool)


def decisions(weights: LocalWeights, data: Dataset) -> np.ndarray:
    """Whether the judge keeps each judged document (its own cut, per call, as the evaluator)."""
    found = pools(weights, data)
    return cut_decisions(found, weights.threshold, weights.margin, weights.cap, weights.keep_at)


def matrix(features: Sequence[LocalFeatures], names: Sequence[str]) -> np.ndarray:
    """The named features of each document, one row each."""
    return np.array([[getattr(f, n) for n in names] for f in features], dtype=np.float64)


def probabilities(weights: LocalWeights, features: Sequence[LocalFeatures]) -> np.ndarray:
    """The judge's probability of relevance for each document (``LocalWeights.score``)."""
    return np.array([weights.score(f) for f in features])


def agreement(predicted: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    """Precision, recall and F1 of ``predicted`` against ``truth``."""
    tp = float(np.sum(predicted & truth))
    precision = tp / max(float(np.sum(predicted)), 1.0)
    recall = tp / max(float(np.sum(truth)), 1.0)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def _logistic(x: np.ndarray, y: np.ndarray, sample: np.ndarray, offset: np.ndarray) -> np.ndarray:
    """Weighted logistic regression with a light ridge; the first column (bias) is not shrunk."""

    def loss(beta: np.ndarray) -> float:
        z = offset + x @ beta
        nll = np.sum(sample * (np.logaddexp(0.0, z) - y * z))
        return float(nll + L2 * np.sum(beta[1:] ** 2))

    return np.asarray(minimize(loss, np.zeros(x.shape[1]), method="BFGS").x)


_V = TypeVar("_V")


def _best(values: Sequence[_V], score: Callable[[_V], float]) -> _V:
    """The value of ``values`` with the highest ``score`` (the first on ties)."""
    return max(values, key=score)


def fit(datasets: Sequence[Dataset], *, bounds: bool = False) -> LocalWeights:
    """Fit the weights and the threshold on ``datasets`` pooled (each collection weighs the same).

    The direct features (gaps included) do not depend on the weights: one logistic regression.
    The link features do, through the namers' scores: they are computed with the current
    weights by the evaluator's own code (they depend on the direct weights only) and their
    weights fitted on the linked documents only (collections whose titles are never named
    have none, and would pull these weights down through the shared bias), the direct logit a
    fixed offset. The
    threshold is the one with the best F1 averaged over the collections; with ``bounds`` the
    per-question margin and cap are fitted with it (off in the shipped weights: out of sample
    they lowered F1).
    """
    unlinked = [judged_features(DEFAULT_WEIGHTS, d, link_titles=False) for d in datasets]
    x = np.vstack([np.column_stack([np.ones(len(f)), matrix(f, DIRECT)]) for f in unlinked])
    y = np.concatenate([d.y for d in datasets]).astype(float)
    sample = np.concatenate([np.full(len(d.y), 1.0 / len(d.y)) for d in datasets])
    beta = _logistic(x, y, sample, np.zeros(len(y)))
    direct: dict[str, Any] = {n: round(float(b), 3) for n, b in zip(DIRECT, beta[1:], strict=True)}
    weights = LocalWeights(bias=round(float(beta[0]), 3), linked=0.0, **direct)
    direct_logit = x @ np.array([weights.bias, *(getattr(weights, n) for n in DIRECT)])
    # the namers' scores are their direct scores, so the links depend on the direct weights only
    links = np.vstack([matrix(judged_features(weights, d), LINKS) for d in datasets])
    has = np.any(links != 0.0, axis=1)
    if has.any():
        v = np.column_stack([np.zeros(int(has.sum())), links[has]])  # no second bias
        beta = _logistic(v, y[has], np.ones(int(has.sum())), direct_logit[has])[1:]
        linked: dict[str, Any] = {n: round(float(b), 3) for n, b in zip(LINKS, beta, strict=True)}
        weights = replace(weights, **linked)
    floor, margin, cap = fit_cut(weights, datasets, bounds=bounds)
    return replace(weights, threshold=floor, margin=margin, cap=cap)


def fit_cut(
    weights: LocalWeights, datasets: Sequence[Dataset], *, bounds: bool = False
) -> tuple[float, float, int | None]:
    """The floor (and with ``bounds`` the margin and cap) with the best mean F1 on ``datasets``."""
    found = [pools(weights, d) for d in datasets]

    def mean_f1(cut: tuple[float, float, int | None]) -> float:
        return float(
            np.mean(
                [
                    agreement(cut_decisions(f, *cut, weights.keep_at), d.y)["f1"]
                    for f, d in zip(found, datasets, strict=True)
                ]
            )
        )

    margins, caps = (MARGINS, CAPS) if bounds else ((math.inf,), (None,))
    grid = [(float(f), m, c) for f in FLOORS for m in margins for c in caps]
    return _best(grid, mean_f1)


@dataclass(frozen=True, slots=True)
class Rules:
    """The trivial rules' settings, fitted like the judge (best mean F1 over the collections)."""

    top_k: int
    cosine: float


def fit_rules(datasets: Sequence[Dataset]) -> Rules:
    """The first-k and dense-cosine thresholds with the best F1 averaged over ``datasets``."""
    cosines = [
        matrix(judged_features(DEFAULT_WEIGHTS, d, link_titles=False), ["dense"])[:, 0]
        for d in datasets
    ]
    top_k = _best(
        list(range(1, TOP_K + 1)),
        lambda k: float(np.mean([agreement(d.position <= k, d.y)["f1"] for d in datasets])),
    )
    grid = [float(c) for c in np.round(np.arange(0.0, 0.95, 0.01), 2)]
    cosine = _best(
        grid,
        lambda c: float(
            np.mean(
                [agreement(cos >= c, d.y)["f1"] for cos, d in zip(cosines, datasets, strict=True)]
            )
        ),
    )
    return Rules(int(top_k), cosine)


def score(weights: LocalWeights, rules: Rules, data: Dataset) -> dict[str, dict[str, float]]:
    """The judge's and the trivial rules' agreement with the qrels on ``data``."""
    features = judged_features(weights, data)
    cosine = matrix(features, ["dense"])[:, 0]
    best_k = _best(list(range(1, TOP_K + 1)), lambda k: agreement(data.position <= k, data.y)["f1"])
    return {
        "judge": agreement(decisions(weights, data), data.y),
        "keep_all": agreement(np.ones(len(data.y), dtype=bool), data.y),
        f"top_{rules.top_k}_fitted": agreement(data.position <= rules.top_k, data.y),
        f"top_{best_k}_best_in_sample": agreement(data.position <= best_k, data.y),
        f"cosine_{rules.cosine:.2f}_fitted": agreement(cosine >= rules.cosine, data.y),
    }


def chosen_rule(weights: LocalWeights, rules: Rules, train: Sequence[Dataset]) -> str:
    """The trivial rule picked without the scored collection: best mean F1 on ``train``.

    The judge is chosen without seeing the collection it is scored on; so is this rule (keep
    all, the first k fitted, the cosine threshold fitted), which makes it the like-for-like
    competitor. The "best rule" of the printed line picks among them on the scored collection
    itself, in hindsight.
    """
    found = [score(weights, rules, d) for d in train]
    names = [n for n in found[0] if n != "judge" and not n.endswith("_best_in_sample")]
    return max(names, key=lambda n: float(np.mean([f[n]["f1"] for f in found])))


def subset(data: Dataset, keep: Sequence[int]) -> Dataset:
    """``data`` restricted to the queries at the indices ``keep``."""
    bounds = np.cumsum([0, *(len(q.direct) for q in data.queries)])
    rows = np.concatenate([np.arange(bounds[i], bounds[i + 1]) for i in keep])
    return replace(
        data,
        queries=tuple(data.queries[i] for i in keep),
        y=data.y[rows],
        position=data.position[rows],
    )


def ceiling(data: Dataset, folds: int = 5) -> dict[str, float]:
    """How well the judge's features do when fitted on the collection itself.

    Five-fold cross-validation over the collection's queries: fit on four fifths, decide on the
    fifth with the judge's own rule; beside it the best fixed probability threshold in hindsight
    on those cross-validated probabilities (optimistic), and the best first-k and keep-all on
    the whole collection (in-sample). If even these cannot clear a rule, no weights can.
    """
    kept = np.zeros(len(data.y), dtype=bool)
    scores = np.zeros(len(data.y))
    bounds = np.cumsum([0, *(len(q.direct) for q in data.queries)])
    for fold in range(folds):
        train = [i for i in range(len(data.queries)) if i % folds != fold]
        test = [i for i in range(len(data.queries)) if i % folds == fold]
        weights = fit([subset(data, train)])
        held = subset(data, test)
        rows = np.concatenate([np.arange(bounds[i], bounds[i + 1]) for i in test])
        kept[rows] = decisions(weights, held)
        scores[rows] = probabilities(weights, judged_features(weights, held))
    grid = np.round(np.arange(0.02, 0.99, 0.01), 2)
    return {
        "judge_cv": agreement(kept, data.y)["f1"],
        "best_threshold_cv": max(agreement(scores >= t, data.y)["f1"] for t in grid),
        "best_top_k": max(agreement(data.position <= k, data.y)["f1"] for k in range(1, TOP_K + 1)),
        "keep_all": agreement(np.ones(len(data.y), dtype=bool), data.y)["f1"],
    }


def _print(label: str, name: str, figures: dict[str, dict[str, float]]) -> None:
    judge = figures["judge"]["f1"]
    rules = {k: v["f1"] for k, v in figures.items() if k != "judge"}
    best = max(rules, key=lambda k: rules[k])
    print(
        f"{label:6s} {name:28s} judge F1 {judge:.3f} (P {figures['judge']['precision']:.3f} "
        f"R {figures['judge']['recall']:.3f})  best rule {best} {rules[best]:.3f}  "
        f"margin {judge - rules[best]:+.3f}  |  "
        + "  ".join(f"{k} {v:.3f}" for k, v in rules.items())
    )


def _finite(value: object) -> object:
    """``value`` with infinite floats (no margin, no cap) as ``None``, which JSON can hold."""
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    if isinstance(value, float) and math.isinf(value):
        return None
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="+", help="collection folders in BEIR layout")
    parser.add_argument("--fit", action="store_true", help="fit on all collections given")
    parser.add_argument("--loco", action="store_true", help="leave one collection out")
    parser.add_argument(
        "--ceiling",
        action="store_true",
        help="fit on each collection itself (5-fold over its queries): what the features can do",
    )
    parser.add_argument(
        "--bounds",
        action="store_true",
        help="fit the per-question margin and cap beside the floor (off in the shipped weights)",
    )
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
    datasets = load_datasets(args.data, args.limit, args.judged)
    report: dict = {
        "judged": args.judged,
        "bounds": args.bounds,
        "top_k": TOP_K,
        "collections": {
            d.name: {
                "queries": len(d.queries),
                "judged": len(d.y),
                "relevant_share": float(np.mean(d.y)),
                "seconds_per_query": d.seconds_per_query,
            }
            for d in datasets
        },
    }
    all_rules = fit_rules(datasets)
    report["default"] = {"weights": asdict(DEFAULT_WEIGHTS), "in_sample_rules": asdict(all_rules)}
    for data in datasets:
        figures = score(DEFAULT_WEIGHTS, all_rules, data)
        report["default"][data.name] = figures
        _print("commit", data.name, figures)
    if args.fit:
        fitted = fit(datasets, bounds=args.bounds)
        print("fitted on all (in-sample):", fitted)
        report["fitted"] = {"weights": asdict(fitted)}
        for data in datasets:
            figures = score(fitted, all_rules, data)
            report["fitted"][data.name] = figures
            _print("fit", data.name, figures)
    if args.loco:
        report["loco"] = {}
        for held in datasets:
            train = [d for d in datasets if d is not held]
            weights, rules = fit(train, bounds=args.bounds), fit_rules(train)
            figures = score(weights, rules, held)
            chosen = chosen_rule(weights, rules, train)
            report["loco"][held.name] = {
                "weights": asdict(weights),
                "rules": asdict(rules),
                "rule_chosen_out_of_sample": chosen,
                **figures,
            }
            _print("loco", held.name, figures)
            cut = f"floor {weights.threshold} margin {weights.margin} cap {weights.cap}"
            gap = figures["judge"]["f1"] - figures[chosen]["f1"]
            print(f"       cut: {cut}")
            print(
                f"       rule chosen out of sample: {chosen} {figures[chosen]['f1']:.3f}, "
                f"judge - it {gap:+.3f}"
            )
    if args.ceiling:
        report["ceiling"] = {}
        for data in datasets:
            found = ceiling(data)
            report["ceiling"][data.name] = found
            print(
                f"ceil   {data.name:28s} " + "  ".join(f"{k} {v:.3f}" for k, v in found.items()),
                flush=True,
            )
    if args.json:
        Path(args.json).write_text(json.dumps(_finite(report), indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
