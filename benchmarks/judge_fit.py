"""How long does judge-check take to fit a threshold and rank pairs? CPU seconds by pair count.

``judge-check --pairs`` takes up to 100,000 labelled pairs; each thresholded judge's threshold is
fitted on half of them under the run's filter policy and its AUC computed on the other half. The
last round's fit tried every candidate against every pair (quadratic: about 200 s per judge at
100,000 pairs); this one sorts once. Prints one JSON line per size (``--json OUT`` writes them
all), with the quadratic reference timed up to ``--reference-up-to`` pairs beside it::

    python benchmarks/judge_fit.py --json OUT.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from corrective_rag.evaluate import get_policy
from corrective_rag.evaluate.check.fit import auc, f1_at, fit_threshold
from corrective_rag.evaluate.scoring import kept_from_each


def _quadratic_fit(scores: list[float], labels: list[bool]) -> float:
    """The last round's fit: every midpoint, F1 computed over every pair for each."""
    distinct = sorted(set(scores))
    cuts = [distinct[0] / 2, (distinct[-1] + 1) / 2]
    cuts += [(a + b) / 2 for a, b in itertools.pairwise(distinct)]
    return max(cuts, key=lambda t: (round(f1_at(scores, labels, t), 12), t))


def _pairs(n: int, seed: int = 7) -> tuple[list[float], list[bool]]:
    rng = random.Random(seed)
    labels = [rng.random() < 0.3 for _ in range(n)]
    scores = [min(1.0, max(0.0, rng.gauss(0.7 if y else 0.4, 0.15))) for y in labels]
    return scores, labels


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="pair counts, comma-separated")
    parser.add_argument("--reference-up-to", type=int, default=2000, metavar="N")
    parser.add_argument("--json", metavar="OUT", help="also write the rows to this file")
    args = parser.parse_args(argv)
    general = get_policy("general")
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        scores, labels = _pairs(n)
        started = time.process_time()
        t = fit_threshold(scores, labels, cut=lambda x: kept_from_each(x, general))
        fit_seconds = time.process_time() - started
        started = time.process_time()
        ranked = auc(scores, labels)
        row = {
            "pairs": n,
            "fit_cpu_seconds": round(fit_seconds, 4),
            "auc_cpu_seconds": round(time.process_time() - started, 4),
            "threshold": round(t, 4),
            "auc": None if ranked is None else round(ranked, 4),
        }
        if n <= args.reference_up_to:
            started = time.process_time()
            _quadratic_fit(scores, labels)
            row["quadratic_fit_cpu_seconds"] = round(time.process_time() - started, 4)
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
