"""Does the offline judge know how many of a question's top 10 are relevant? Out of sample.

A per-question decision can only beat "keep the first k" on a collection it has never seen if
the judge's probabilities say how many documents a question should keep: the F1-best count
differs from one collection to the next (two on HotpotQA, all ten on CISI, about one on a
collection with one relevant document per question). For every collection left out (weights,
floor and the trivial rules fitted on the others, exactly as ``calibrate_local.py --loco``),
on the top 10 hybrid hits judged in calls of 5:

* how the number of relevant documents in a question's top 10 is spread, and its Spearman
  correlation with the judge's summed probability over those 10 (the judge's own estimate of
  that number); the mean summed probability of the questions with one relevant document beside
  those with four or more;
* the questions with exactly one relevant document in their top 10 (the regime of a collection
  with one relevant document per question): the judge's precision, recall, F1 and documents
  kept per question, beside keeping the first one or two;
* the judge held to at most 1, 2, 3 or 5 documents per question (``LocalWeights.cap``, the
  CLI's ``--judge-cap``): what a user who knows how many documents a question needs gains;
* a 95% bootstrap interval (2,000 resamples of the questions, seed 0) of the judge's F1 minus
  the best trivial rule's (keep all, the first k fitted, the cosine threshold fitted).

    python benchmarks/judge_counts.py HOTPOTQA CISI CRANFIELD CACM --json judge_counts.json

With one collection (your own questions and qrels in BEIR layout), the shipped weights judge it
and the rules are fitted on it: the figures are in-sample for the rules, and the "held to at
most N" line says which ``--judge-cap`` suits the collection.

    python benchmarks/judge_counts.py MY_COLLECTION
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import os
import sys
from pathlib import Path

import numpy as np
import structlog
from scipy.stats import spearmanr

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks.calibrate_local import (
    Dataset,
    Rules,
    agreement,
    cut_decisions,
    decisions,
    fit,
    fit_rules,
    judged_features,
    load_datasets,
    matrix,
    pools,
)
from benchmarks.metrics import bootstrap_interval
from corrective_rag.evaluate.local import DEFAULT_WEIGHTS
from corrective_rag.evaluate.local_features import LocalWeights

RESAMPLES = 2000
CAPS = (1, 2, 3, 5)


def question_slices(data: Dataset) -> list[slice]:
    """Each query's rows in the judged-document arrays."""
    bounds = np.cumsum([0, *(len(q.direct) for q in data.queries)])
    return [slice(int(a), int(b)) for a, b in itertools.pairwise(bounds)]


def summed_probabilities(found: list[tuple[int, list[float]]], data: Dataset) -> np.ndarray:
    """Per query, the judge's probabilities summed over everything judged for it.

    ``found``: the calls' pools (``calibrate_local.pools``). The last call of a query is judged
    among all the query's documents, so its pool holds them all.
    """
    sums: list[float] = []
    call = 0
    for query in data.queries:
        call += len(query.batches)
        sums.append(float(np.sum(found[call - 1][1])))
    return np.asarray(sums)


def bootstrap_difference(
    first: np.ndarray, second: np.ndarray, truth: np.ndarray, rows: list[slice], seed: int = 0
) -> tuple[float, float]:
    """95% interval of F1(first) - F1(second), resampling whole queries."""
    index = [np.arange(s.start, s.stop) for s in rows]

    def gap(picked: np.ndarray) -> float:
        pick = np.concatenate([index[i] for i in picked])
        return (
            agreement(first[pick], truth[pick])["f1"] - agreement(second[pick], truth[pick])["f1"]
        )

    return bootstrap_interval(gap, len(rows), resamples=RESAMPLES, seed=seed)


def counts(weights: LocalWeights, rules: Rules, held: Dataset) -> dict:
    """The count figures for ``held``, judged with ``weights`` beside the ``rules``."""
    rows = question_slices(held)
    relevant = np.array([int(held.y[s].sum()) for s in rows])
    found = pools(weights, held)
    sums = summed_probabilities(found, held)
    kept = decisions(weights, held)
    cosine = matrix(judged_features(weights, held), ["dense"])[:, 0]
    trivial = {
        "keep_all": np.ones(len(held.y), dtype=bool),
        f"first_{rules.top_k}_fitted": held.position <= rules.top_k,
        f"cosine_{rules.cosine:.2f}_fitted": cosine >= rules.cosine,
    }
    best = max(trivial, key=lambda name: agreement(trivial[name], held.y)["f1"])
    one = [s for s, n in zip(rows, relevant, strict=True) if n == 1]
    single = np.concatenate([np.arange(s.start, s.stop) for s in one]) if one else np.array([], int)
    capped = {
        cap: cut_decisions(found, weights.threshold, weights.margin, cap, weights.keep_at)
        for cap in CAPS
    }
    rho = spearmanr(relevant, sums).statistic if len(set(relevant)) > 1 else float("nan")
    return {
        "questions": len(rows),
        "relevant_in_top10": np.bincount(relevant, minlength=11).tolist(),
        "spearman_relevant_vs_summed_probability": float(rho),
        "summed_probability_one_relevant": float(np.mean(sums[relevant == 1]))
        if np.any(relevant == 1)
        else None,
        "summed_probability_four_or_more": float(np.mean(sums[relevant >= 4]))
        if np.any(relevant >= 4)
        else None,
        "one_relevant": {
            "questions": len(one),
            "judge": agreement(kept[single], held.y[single]),
            "judge_kept_per_question": float(kept[single].sum()) / max(len(one), 1),
            "first_1": agreement(held.position[single] <= 1, held.y[single]),
            "first_2": agreement(held.position[single] <= 2, held.y[single]),
        },
        "capped": {
            str(cap): {
                "f1": agreement(k, held.y)["f1"],
                "one_relevant_f1": agreement(k[single], held.y[single])["f1"],
                "kept_per_question": float(k.sum()) / len(rows),
            }
            for cap, k in capped.items()
        },
        "judge_f1": agreement(kept, held.y)["f1"],
        "judge_kept_per_question": float(kept.sum()) / len(rows),
        "best_trivial": best,
        "best_trivial_f1": agreement(trivial[best], held.y)["f1"],
        "difference_95": bootstrap_difference(kept, trivial[best], held.y, rows),
    }


def _print(name: str, f: dict) -> None:
    one = f["one_relevant"]
    low, high = f["difference_95"]
    print(
        f"{name:28s} relevant in top 10 (0..10): {f['relevant_in_top10']}\n"
        f"    rho(relevant, summed p) {f['spearman_relevant_vs_summed_probability']:.2f}; "
        f"summed p, one relevant {f['summed_probability_one_relevant'] or float('nan'):.2f}, "
        f"four or more {f['summed_probability_four_or_more'] or float('nan'):.2f}\n"
        f"    one relevant ({one['questions']} questions): judge P {one['judge']['precision']:.2f} "
        f"R {one['judge']['recall']:.2f} F1 {one['judge']['f1']:.3f}, "
        f"{one['judge_kept_per_question']:.1f} kept per question; first 1 F1 "
        f"{one['first_1']['f1']:.3f}, first 2 {one['first_2']['f1']:.3f}\n"
        "    held to at most N per question: "
        + "; ".join(
            f"{n}: F1 {c['f1']:.3f} (one relevant {c['one_relevant_f1']:.3f}), "
            f"{c['kept_per_question']:.1f} kept"
            for n, c in f["capped"].items()
        )
        + "\n"
        f"    judge F1 {f['judge_f1']:.3f} ({f['judge_kept_per_question']:.1f} kept per question)"
        f" - {f['best_trivial']} {f['best_trivial_f1']:.3f} = "
        f"{f['judge_f1'] - f['best_trivial_f1']:+.3f}, 95% [{low:+.3f}, {high:+.3f}]",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="+", help="collection folders in BEIR layout")
    parser.add_argument("--limit", type=int, default=None, help="queries per collection")
    parser.add_argument("--json", default=None, help="write the figures here")
    args = parser.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    datasets = load_datasets(args.data, args.limit, "top10")
    report: dict = {"out_of_sample": len(datasets) > 1}
    if len(datasets) == 1:
        print("one collection: the shipped weights; the rules fitted on it (in-sample)")
    for held in datasets:
        if len(datasets) > 1:
            train = [d for d in datasets if d is not held]
            weights, rules = fit(train), fit_rules(train)
        else:  # the shipped weights; the rules fitted on the collection itself (in-sample)
            weights, rules = DEFAULT_WEIGHTS, fit_rules([held])
        figures = counts(weights, rules, held)
        report[held.name] = figures
        _print(held.name, figures)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
