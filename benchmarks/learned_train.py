"""``judge-check --train`` on a collection the learned judge never saw, leave one collection out.

For each collection given, a learned judge is fitted on the *others* exactly as
``scripts/train_judge.py`` fits the shipped one: the judge a user of an unseen collection has.
Then the collection's labelled pairs for ``--questions`` questions (from ``--skip`` on; written
and read as a user's ``--pairs`` file: relevant documents up to 3 and BM25's 3 best-ranked
non-relevant ones, titles apart) go through the library call ``judge-check --pairs FILE
--train`` makes (:func:`~corrective_rag.evaluate.check.train.compare_trained`), starting from
that judge: its questions split in halves by a stable hash, the judge fine-tuned on one half,
every figure reported on the other, beside the current offline judge and keeping everything.

    python benchmarks/learned_train.py DATA/hotpotqa-dev500-distractor DATA/classic-cisi \\
        DATA/classic-cranfield DATA/classic-cacm --questions 40 --json learned-train.json

``before`` is out of sample twice over (other collections); ``after`` is out of sample by
question (the held-out half's questions were not trained on). ``--draws N`` repeats with the
next ``--questions`` questions each time (different questions, different halves).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from train_judge import (  # noqa: E402
    commit,
    fit_logistic,
    judge_embed,
    judge_with_cache,
    load_corpus,
    rows_of,
    run_record,
    save_cache,
)

from benchmarks import pairs_file  # noqa: E402
from corrective_rag.evaluate import get_policy  # noqa: E402
from corrective_rag.evaluate.check.pairs import read_pairs  # noqa: E402
from corrective_rag.evaluate.check.train import compare_trained  # noqa: E402
from corrective_rag.evaluate.learned import parse_learned_judge  # noqa: E402


def _figures(judge: Any) -> dict[str, Any]:
    return {"auc": judge.auc, "held_out_f1": judge.held_out_f1, "refused": judge.refused}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="+", help="BEIR folders (at least two)")
    parser.add_argument("--questions", type=int, default=40)
    parser.add_argument("--draws", type=int, default=1)
    parser.add_argument("--json", default=None, metavar="FILE")
    args = parser.parse_args(argv)
    if len(args.data) < 2:
        raise SystemExit("leave one out needs at least two collections")
    wall, cpu = time.perf_counter(), time.process_time()
    judge = judge_with_cache()
    embed = judge_embed(judge)
    rows = {}
    for folder in args.data:
        corpus = load_corpus(folder, embed)
        rows[folder] = rows_of(corpus, judge)
        save_cache(judge)
    results = []
    print(
        f"{'collection':28s} {'draw':>4s} {'offline AUC/F1':>15s} {'before AUC/F1':>14s} "
        f"{'after AUC/F1':>13s} {'keep all':>8s}  kept"
    )
    for folder in args.data:
        start = parse_learned_judge(
            fit_logistic([r for f, r in rows.items() if f != folder]), "leave-one-out"
        )
        for draw in range(args.draws):
            with tempfile.TemporaryDirectory() as tmp:
                path = os.path.join(tmp, "pairs.jsonl")
                skip = str(draw * args.questions)
                pairs_file.main(
                    [folder, "--questions", str(args.questions), "--skip", skip, "--out", path]
                )
                if os.path.getsize(path) == 0:
                    print(f"{Path(folder).name}: no questions left for draw {draw}")
                    break
                pairs = read_pairs(path)
            training = compare_trained(
                ["offline", "learned"],
                pairs,
                model="offline",
                policy=get_policy("general"),
                source=Path(folder).name,
                start=start,
            )
            offline = next(f for f in training.comparison.judges if f.name == "offline")
            after = training.after
            result = {
                "collection": Path(folder).name,
                "draw": draw,
                "pairs": len(pairs),
                "fit_questions": training.fit_questions,
                "offline": _figures(offline),
                "before": _figures(training.before),
                "after": None if after is None else _figures(after),
                "keep_all_f1": training.comparison.trivial_f1,
                "kept": training.kept,
                "why": training.why,
                "chosen": training.comparison.chosen,
            }
            results.append(result)

            def pair(f: dict[str, Any] | None) -> str:
                return "-" if f is None else f"{f['auc'] or 0:.2f}/{f['held_out_f1']:.2f}"

            print(
                f"{result['collection']:28s} {draw:4d} {pair(result['offline']):>15s} "
                f"{pair(result['before']):>14s} {pair(result['after']):>13s} "
                f"{result['keep_all_f1']:8.2f}  {training.kept}"
            )
    record = {
        "commit": commit(),
        "results": results,
        **run_record("benchmarks/learned_train.py", argv, wall, cpu),
    }
    if args.json:
        Path(args.json).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
