"""The learned judge against the current offline judge, leave one collection out.

For each collection given, the learned judge's logistic layer is fitted on the others exactly as
``scripts/train_judge.py`` fits the shipped one (their check pairs, each collection weighing
the same, the threshold the best F1 on those pairs), and scored on the left-out collection's
check pairs: every question's relevant documents (up to 3) and BM25's 3 best-ranked
non-relevant ones, as ``judge-check --pairs`` is asked. The held-out collection's questions are
never seen in fitting (held out by collection, hence by question). Beside it, on the same pairs:

* ``local``: the current offline judge (``LocalEvaluator``: each question's pairs in one call,
  its verdict scores; threshold fitted on the training collections);
* ``all relevant``: calling every pair relevant;
* ``fused rank``: the pair's rank in the fused (BM25 + dense, RRF k=60) ranking of the whole
  collection for the question (scored ``1 / (1 + rank)``), cut at a rank fitted on the
  training collections;
* ``dense``: the question-document cosine alone, cut where it fits the training collections.

``in_sample`` is the learned layer's AUC and F1 on its own training collections. ``pool`` scores
the same fitted judge and rules on the held-out collection's *pool pairs*, both sides from what a
loop judges: the relevant and non-relevant documents (up to 3 each) among the question's 20
best fused ranks (``train_judge.pool_pairs``). Figures: AUC,
accuracy and F1 at the fitted threshold, and one JSON object (``--json``)::

    python benchmarks/learned_judge.py DATA/hotpotqa-dev500-distractor DATA/classic-cisi \\
        DATA/classic-cranfield DATA/classic-cacm --json learned-judge.json

The local judge's scores are kept on disk between runs (it is fixed and slow: ~0.7 s a pair on
a loaded 2-core machine).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from train_judge import (  # noqa: E402
    Corpus,
    Rows,
    check_pairs,
    commit,
    fit_logistic,
    judge_embed,
    judge_with_cache,
    load_corpus,
    pool_pairs,
    probabilities,
    rows_of,
    run_record,
    save_cache,
)

from corrective_rag.evaluate.check.fit import auc, f1_at, fit_threshold  # noqa: E402
from corrective_rag.evaluate.check.grading import grade_pairs  # noqa: E402
from corrective_rag.evaluate.check.pairs import CheckPair  # noqa: E402
from corrective_rag.evaluate.local import LocalEvaluator  # noqa: E402

LOCAL_CACHE = Path(tempfile.gettempdir()) / "corrective_rag_bench" / "judge-local-scores.json"


def local_scores(corpus: Corpus, rows: Rows, embedder: Any) -> np.ndarray:
    """The local judge's verdict score of each pair, from the disk cache or computed."""
    stored: dict[str, Any] = {"scores": {}}
    if LOCAL_CACHE.is_file():
        stored = json.loads(LOCAL_CACHE.read_text(encoding="utf-8"))
    scores = stored["scores"]
    if not all(k in scores for k in rows.keys):
        checks = []
        for question in corpus.questions:
            for i, relevant in check_pairs(question):
                checks.append((f"{corpus.name}\t{question.text}\t{i}", question.text, i, relevant))
        pairs = [CheckPair(q, corpus.documents[i], r) for _, q, i, r in checks]
        grading = grade_pairs(LocalEvaluator(embedder), pairs)
        verdicts, seconds = grading.verdicts, grading.seconds
        if grading.errors:
            raise SystemExit(f"the local judge failed: {grading.errors[:3]}")
        for (key, *_), v in zip(checks, verdicts, strict=True):
            scores[key] = float(v.score if v is not None and v.score is not None else 0.0)
        stored["seconds_per_pair"] = seconds / max(1, len(pairs))
        LOCAL_CACHE.parent.mkdir(parents=True, exist_ok=True)
        LOCAL_CACHE.write_text(json.dumps(stored), encoding="utf-8")
    return np.asarray([scores[k] for k in rows.keys], dtype=np.float64)


def figures(scores: np.ndarray, labels: np.ndarray, threshold: float) -> dict[str, float]:
    """AUC, accuracy and F1 of ``scores`` cut at ``threshold``."""
    kept = scores >= threshold
    return {
        "auc": round(float(auc(list(scores), list(labels)) or 0.5), 4),
        "accuracy": round(float((kept == labels).mean()), 4),
        "f1": round(float(f1_at(list(scores), list(labels), threshold)), 4),
        "threshold": round(float(threshold), 4),
    }


def rule(
    train: Sequence[np.ndarray],
    labels: Sequence[np.ndarray],
    test: np.ndarray,
    test_labels: np.ndarray,
) -> dict[str, float]:
    """A one-score rule cut where it fits the training collections, scored on the test one."""
    threshold = fit_threshold(list(np.concatenate(train)), list(np.concatenate(labels)))
    return figures(test, test_labels, threshold)


def pool_figures(
    fitted: dict[str, Any], pool: Rows, train: Sequence[Rows], labels: Sequence[np.ndarray]
) -> dict[str, Any]:
    """The fold's judge and rules on the held-out collection's pool pairs (what a loop judges).

    The thresholds are those fitted on the training collections' check pairs, as the run would
    apply them; the local judge is left out here (about 0.7 s a pair).
    """
    return {
        "pairs": len(pool.labels),
        "relevant": int(pool.labels.sum()),
        "learned": figures(probabilities(fitted, pool.features), pool.labels, fitted["threshold"]),
        "fused_rank": rule([_by_rank(r) for r in train], labels, _by_rank(pool), pool.labels),
        "dense": rule([r.features[:, 0] for r in train], labels, pool.features[:, 0], pool.labels),
        "all_relevant": figures(np.ones(len(pool.labels)), pool.labels, 0.5),
    }


def _by_rank(rows: Rows) -> np.ndarray:
    """The fused rank as a score in (0, 1], higher for better-ranked (thresholds live in 0..1)."""
    return 1.0 / (1.0 + rows.fused_rank)


def _fit_rows(check: Rows, pool: Rows, fit_on: str) -> Rows:
    """A training collection's pairs to fit on: its check pairs, its pool pairs, or both."""
    if fit_on == "check":
        return check
    if fit_on == "pool":
        return pool
    return Rows(
        check.collection,
        np.vstack([check.features, pool.features]),
        np.r_[check.labels, pool.labels],
        np.r_[check.fused_rank, pool.fused_rank],
        check.keys + pool.keys,
        check.questions + pool.questions,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="+", help="BEIR folders (at least two)")
    parser.add_argument("--json", default=None, metavar="FILE")
    parser.add_argument(
        "--fit-on",
        choices=["check", "pool", "both"],
        default="check",
        help="the training collections' pairs the layer is fitted on (default: check pairs, as "
        "scripts/train_judge.py fits the shipped judge)",
    )
    args = parser.parse_args(argv)
    if len(args.data) < 2:
        raise SystemExit("leave one out needs at least two collections")
    wall, cpu = time.perf_counter(), time.process_time()
    judge = judge_with_cache()
    embed = judge_embed(judge)
    corpora, rows, local, pools = {}, {}, {}, {}
    for folder in args.data:
        corpus = load_corpus(folder, embed)
        corpora[corpus.name] = corpus
        rows[corpus.name] = rows_of(corpus, judge)
        pools[corpus.name] = rows_of(corpus, judge, pool_pairs)
        save_cache(judge)
        local[corpus.name] = local_scores(corpus, rows[corpus.name], judge.embedder)
    folds = {}
    for test, held in rows.items():
        train = [r for name, r in rows.items() if name != test]
        fitted = fit_logistic([_fit_rows(r, pools[r.collection], args.fit_on) for r in train])
        learned = probabilities(fitted, held.features)
        in_sample = [probabilities(fitted, r.features) for r in train]
        labels = [r.labels for r in train]
        fold = {
            "trained_on": [r.collection for r in train],
            "pairs": len(held.labels),
            "relevant": int(held.labels.sum()),
            "learned": figures(learned, held.labels, fitted["threshold"]),
            "local": rule([local[r.collection] for r in train], labels, local[test], held.labels),
            "all_relevant": figures(np.ones(len(held.labels)), held.labels, 0.5),
            "fused_rank": rule([_by_rank(r) for r in train], labels, _by_rank(held), held.labels),
            "dense": rule(
                [r.features[:, 0] for r in train], labels, held.features[:, 0], held.labels
            ),
            "in_sample": figures(
                np.concatenate(in_sample), np.concatenate(labels), fitted["threshold"]
            ),
            "weights": dict(zip(fitted["features"], fitted["weights"], strict=True)),
            "pool": pool_figures(fitted, pools[test], train, labels),
        }
        folds[test] = fold
        print(f"\n{test} (out of sample: trained on {', '.join(fold['trained_on'])})")
        print(f"  {'judge':14s} {'AUC':>6s} {'acc':>6s} {'F1':>6s} {'thr':>7s}")
        for name in ("learned", "local", "fused_rank", "dense", "all_relevant", "in_sample"):
            f = fold[name]
            print(
                f"  {name:14s} {f['auc']:6.3f} {f['accuracy']:6.3f} {f['f1']:6.3f} "
                f"{f['threshold']:7.3f}"
            )
        pool = fold["pool"]
        print(f"  pool pairs ({pool['pairs']}, {pool['relevant']} relevant), out of sample:")
        for name in ("learned", "fused_rank", "dense", "all_relevant"):
            f = pool[name]
            print(
                f"  {name:14s} {f['auc']:6.3f} {f['accuracy']:6.3f} {f['f1']:6.3f} "
                f"{f['threshold']:7.3f}"
            )
    result = {
        "fit_on": args.fit_on,
        "commit": commit(),
        "collections": list(rows),
        "folds": folds,
        **run_record("benchmarks/learned_judge.py", argv, wall, cpu),
    }
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
