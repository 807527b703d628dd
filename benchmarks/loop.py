"""Single-shot retrieval vs the corrective loop, at an equal number of documents judged per query.

For every query: *single shot* judges the question's top hits in one evaluator call and keeps what
the filter policy keeps; *corrective* runs ``CorrectiveRAGOrchestrator`` with ``top_k=k``,
``max_iterations=iterations`` and ``min_relevant``. The loop may end before it has judged
``k x iterations`` documents (``enough_relevant``, ``no_progress``, ``rewrite_failed``), so single
shot is reported twice, and a reader sees both:

* ``single_shot``: the question's top ``k x iterations``, a fixed budget (the loop's most);
* ``single_shot_matched``: per query, the question's top *n*, where *n* is the number of documents
  the loop judged for that query: the comparison at an equal number of documents judged, which is
  the one the loop's targets refer to (it asks "did the loop spend its judgements better than
  the question's own ranking would?"; the fixed budget also asks "was stopping early worth it?").

Each arm is scored against the qrels: recall (mean share of a query's relevant documents that were
kept), all_found (share of queries whose relevant documents were all kept), precision (share of
kept documents that are relevant, pooled), documents judged, LLM calls and seconds per query; plus
the evaluator's agreement with the qrels on everything the loop judged, and how many runs ended on
each stop reason (``stop_reasons``: ``enough_relevant`` runs judge fewer documents).

    python benchmarks/loop.py HOTPOTQA_DIR --evaluator local --json loop-hotpotqa-local.json

``--evaluator learned`` judges with ``LearnedEvaluator`` (the learned offline judge) and rewrites
with ``LocalRewriter``; ``--evaluator oracle`` judges from the qrels (an upper bound for the
loop); ``--evaluator llm``
uses ``LLMEvaluator`` / ``LLMRewriter`` over ``--llm-url`` and ``--model``, with ``--grading
default`` (the library's defaults: ``LLMEvaluator(chat)``, ``LLMRewriter(chat)``), ``one-call``
(``propose=True``) or ``two-call`` (``propose=False``); ``benchmarks/qrels_judge.py`` serves a
scripted model that judges from the qrels, and ``--qrels-judge`` serves it in this process
(no ``--llm-url`` needed). The corrective arm also reports LLM calls per iteration and prompt /
completion tokens per query. The single-shot arms judge with an evaluator of their own (its own
verdict cache), so that the loop's calls are counted in full.

A noisy judge: ``--false-negative R`` / ``--false-positive R`` flip that share of relevant /
irrelevant (query, document) pairs, chosen by a hash of the pair (``qrels_judge.flipped``), for
``--evaluator oracle`` and for ``--qrels-judge`` alike; every arm sees the same wrong verdicts.
``--proposer repeat`` makes the qrels judge propose the question plus a fixed hint every time.

    python benchmarks/loop.py DATA --evaluator llm --qrels-judge --latency-ms 0 --k 4 \
        --false-negative 0.2 --false-positive 0.1 --proposer repeat --limit 50
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import structlog

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks.beir import Collection, load_collection
from benchmarks.cache import DiskCachedEmbedder, default_cache_path
from benchmarks.metrics import bootstrap_interval
from benchmarks.qrels_judge import add_noise_flags, noisy_relevant, qrels_reply
from benchmarks.retrievers import build_retriever
from corrective_rag.calls import call_settings
from corrective_rag.errors import ConfigError
from corrective_rag.evaluate.cache import VerdictCache
from corrective_rag.evaluate.learned import LearnedEvaluator
from corrective_rag.evaluate.llm import LLMEvaluator
from corrective_rag.evaluate.local import DEFAULT_WEIGHTS, LocalEvaluator
from corrective_rag.evaluate.policy import Decision, FilterPolicy, decide, get_policy
from corrective_rag.llm.client import OpenAIChatClient
from corrective_rag.llm.local_server import LocalLlamaServer
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.models.embeddings import SentenceTransformerEmbedder
from corrective_rag.rewrite.llm import LLMRewriter
from corrective_rag.rewrite.local import LocalRewriter
from corrective_rag.store.bm25 import BM25Index
from corrective_rag.testing import ScriptedLLMServer
from corrective_rag.types import Document, Evaluation, Hit, LegScore, Relevance, Usage, Verdict

SAMPLES = 20  # the first queries' rewrites, kept in the JSON for reading


class BM25Retriever:
    """BM25 alone over the collection (``--retriever bm25``): no embedding of the corpus.

    For quick runs on a busy machine; the hybrid store is the library's retriever, so figures
    made with this one say so.
    """

    def __init__(self, collection: Collection) -> None:
        self.index = BM25Index()
        self.index.upsert((d.id, d.text) for d in collection.documents)
        self.documents = {d.id: d for d in collection.documents}
        self.idf = self.index.idf

    def retrieve(self, query: str, *, top_k: int = 10, where: Any = None) -> list[Hit]:
        """The ``top_k`` best documents by BM25, ranked 1..n."""
        return [
            Hit(self.documents[i], score, rank, (LegScore("bm25", rank, score),))
            for rank, (i, score) in enumerate(self.index.top_k(query, top_k), start=1)
        ]


class OracleEvaluator:
    """Verdicts read from the qrels: relevant iff the document is a qrel of the question.

    With noise, the pairs :func:`~benchmarks.qrels_judge.flipped` picks are judged wrong, with
    the same certainty (an overconfident judge).
    """

    documents_per_call = None  # no LLM calls

    def __init__(
        self, collection: Collection, false_negative: float = 0.0, false_positive: float = 0.0
    ) -> None:
        self.ids = {text: qid for qid, text in collection.queries.items()}
        self.collection = collection
        self.noise = (false_negative, false_positive)

    def evaluate(self, question: str, documents: Sequence[Document]) -> Evaluation:
        """One certain verdict per document."""
        qid = self.ids.get(question, "")
        truth = self.collection.relevant(qid) if qid else frozenset()
        return Evaluation(
            tuple(
                Verdict(d.id, True, Relevance.HIGH, 1.0, 1.0, reasoning="in the qrels")
                if noisy_relevant(qid, d.id, truth, *self.noise)
                else Verdict(d.id, False, Relevance.LOW, 0.0, 1.0, reasoning="not in the qrels")
                for d in documents
            ),
            Usage(),
        )


def components(args: argparse.Namespace, collection: Collection, retriever: Any) -> tuple:
    """The loop's evaluator and rewriter, and single shot's evaluator, by ``--evaluator``."""
    if args.evaluator == "oracle":
        oracle = OracleEvaluator(collection, args.false_negative, args.false_positive)
        return oracle, LocalRewriter(idf=retriever.idf), oracle
    if args.evaluator == "learned":
        # it remembers nothing between calls: one judge serves both arms
        learned = LearnedEvaluator(retriever.embedder, idf=retriever.idf)
        return learned, LocalRewriter(idf=retriever.idf), learned
    if args.evaluator == "local":
        weights = replace(DEFAULT_WEIGHTS, cap=args.judge_cap)
        local = LocalEvaluator(retriever.embedder, idf=retriever.idf, weights=weights)
        return local, LocalRewriter(idf=retriever.idf), local
    server = args.local_server
    if not server and (not args.llm_url or not args.model):
        raise SystemExit(
            "--evaluator llm needs --llm-url and --model, --qrels-judge, or --local-llm"
        )
    # the CLI's settings: one --timeout bounds every call, tries included
    timeouts, retries = call_settings(
        args.timeout, max_retries=args.max_retries, local=server is not None
    )
    url = server.base_url if server else args.llm_url
    slots = server.n_parallel if server else 8
    client = OpenAIChatClient(
        url, args.model or "local", timeouts=timeouts, retries=retries, max_concurrency=slots
    )
    grading: dict[str, Any] = (
        {"max_workers": slots, "context_tokens": server.slot_context} if server else {}
    )
    if getattr(args, "qrels_judge", False):
        # the qrels judge answers by document id, and a collection may hold one text under
        # several ids (CACM: 333 documents share their text with another), while the verdict
        # cache is keyed by text: it would hand one id's verdict to its twin, in one arm and
        # not the other. A model reading the text cannot tell twins apart, so no cache here.
        grading["cache"] = VerdictCache(0)
    propose = {"default": None, "one-call": True, "two-call": False}[args.grading]
    # single shot gets an evaluator (and verdict cache) of its own: sharing one would let the
    # loop read single shot's verdicts from the cache and hide the loop's own calls
    return (
        LLMEvaluator(client, propose=propose, **grading),
        LLMRewriter(client),
        LLMEvaluator(client, **grading),
    )


def keep_policy(name: str) -> Any:
    """The filter policy by preset name; ``relevant`` keeps exactly what the evaluator calls so."""
    if name == "relevant":
        return FilterPolicy(
            name="relevant",
            high_score=0.5,
            high_confidence=0.0,
            medium_score=0.5,
            medium_confidence=0.0,
        )
    return get_policy(name)


class Tally:
    """Accumulates one arm's figures over queries."""

    def __init__(self) -> None:
        self.recall: list[float] = []
        self.all_found: list[bool] = []
        self.kept_counts: list[int] = []  # per query, for the paired intervals
        self.relevant_counts: list[int] = []
        self.kept = self.kept_relevant = 0
        self.evaluated = self.llm_calls = 0
        self.seconds = 0.0
        self.iterations = self.prompt_tokens = self.completion_tokens = 0
        self.rewrite_calls = self.rewrite_prompt_tokens = 0
        self.stop_reasons: dict[str, int] = {}

    def add(
        self, kept: set[str], truth: frozenset[str], evaluated: int, calls: int, s: float
    ) -> None:
        found = len(kept & truth)
        self.recall.append(found / len(truth))
        self.all_found.append(truth <= kept)
        self.kept_counts.append(len(kept))
        self.relevant_counts.append(found)
        self.kept += len(kept)
        self.kept_relevant += found
        self.evaluated += evaluated
        self.llm_calls += calls
        self.seconds += s

    def figures(self) -> dict[str, float]:
        n = max(len(self.recall), 1)
        return {
            "recall": sum(self.recall) / n,
            "all_found": sum(self.all_found) / n,
            "precision": self.kept_relevant / max(self.kept, 1),
            "kept_per_query": self.kept / n,
            "evaluated_per_query": self.evaluated / n,
            "llm_calls_per_query": self.llm_calls / n,
            "seconds_per_query": self.seconds / n,
            **self.loop_figures(n),
        }

    def at(self, picked: np.ndarray) -> dict[str, float]:
        """Recall, all_found and precision over the queries at ``picked`` (a query may repeat)."""
        kept = float(np.sum(np.asarray(self.kept_counts)[picked]))
        return {
            "recall": float(np.mean(np.asarray(self.recall)[picked])),
            "all_found": float(np.mean(np.asarray(self.all_found, dtype=float)[picked])),
            "precision": float(np.sum(np.asarray(self.relevant_counts)[picked])) / max(kept, 1.0),
        }

    def loop_figures(self, n: int) -> dict[str, Any]:
        """Per-iteration calls, tokens and stop reasons (the corrective arm only)."""
        if not self.iterations:
            return {}
        return {
            "iterations_per_query": self.iterations / n,
            "llm_calls_per_iteration": self.llm_calls / self.iterations,
            "prompt_tokens_per_query": self.prompt_tokens / n,
            "completion_tokens_per_query": self.completion_tokens / n,
            "rewrite_calls_per_query": self.rewrite_calls / n,
            "rewrite_prompt_tokens_per_query": self.rewrite_prompt_tokens / n,
            "stop_reasons": dict(sorted(self.stop_reasons.items())),
        }


def paired(loop: Tally, other: Tally) -> dict[str, dict[str, Any]]:
    """``loop`` minus ``other`` per figure, with a 95% bootstrap interval over the queries.

    Both arms answered the same queries in the same order, so each resample draws a query's two
    outcomes together (``metrics.bootstrap_interval``, seed 0): an interval that holds zero says
    the difference is within what another draw of queries could give.
    """
    n = len(loop.recall)
    found: dict[str, dict[str, Any]] = {}
    for key in ("recall", "all_found", "precision"):

        def gap(picked: np.ndarray, key: str = key) -> float:
            return loop.at(picked)[key] - other.at(picked)[key]

        found[key] = {
            "difference": round(gap(np.arange(n)), 4),
            "interval_95": [round(x, 4) for x in bootstrap_interval(gap, n)],
        }
    return found


def _brief(tally: Tally) -> dict[str, float]:
    figures = tally.figures()
    keys = ("recall", "all_found", "precision", "evaluated_per_query")
    return {key: round(figures[key], 4) for key in keys}


def summary(report: dict[str, Any]) -> str:
    """The three arms side by side, and how the loop's runs ended."""
    rows = [
        f"{report['collection']}, {report['evaluator']}, {report['queries']} queries, "
        f"noise fn={report['false_negative']} fp={report['false_positive']}, "
        f"proposer {report['proposer']}",
        "arm                  recall  all_found  precision  judged/query",
    ]
    for arm in ("single_shot", "single_shot_matched", "corrective"):
        f = report[arm]
        rows.append(
            f"{arm:<20} {f['recall']:.4f}  {f['all_found']:.4f}     {f['precision']:.4f}"
            f"     {f['evaluated_per_query']:.1f}"
        )
    gaps = report["corrective_minus_matched"]
    rows.append(
        "corrective - matched, 95% interval: "
        + ", ".join(
            f"{key} {g['difference']:+.4f} [{g['interval_95'][0]:+.4f}, {g['interval_95'][1]:+.4f}]"
            for key, g in gaps.items()
        )
    )
    stops = ", ".join(f"{k} {v}" for k, v in report["stop_reasons"].items())
    rows.append(f"stop reasons: {stops}")
    fruitless = report["enough_relevant_after_fruitless_iteration"]
    rows.append(f"  of enough_relevant, after an iteration that kept nothing new: {fruitless}")
    return "\n".join(rows)


def judge_top(
    evaluator: Any, policy: FilterPolicy, question: str, hits: Sequence[Any]
) -> tuple[set[str], int, int]:
    """Single shot: judge ``hits`` in one call; the kept ids, documents judged and LLM calls."""
    if not hits:
        return set(), 0, 0
    evaluation = evaluator.evaluate(question, [h.document for h in hits])
    kept = {v.document_id for v in evaluation.verdicts if decide(v, policy) is Decision.KEEP}
    return kept, len(hits), evaluation.usage.llm_calls


def agreement(verdicts: list[tuple[bool | None, bool]]) -> dict[str, float]:
    """Precision, recall, F1 and accuracy of (said relevant, truly relevant) over graded pairs.

    ``None`` (ungraded) is left out of the others and counted in ``ungraded_share``.
    """
    pairs = [(p, t) for p, t in verdicts if p is not None]
    tp = sum(p and t for p, t in pairs)
    precision = tp / max(sum(p for p, _ in pairs), 1)
    recall = tp / max(sum(t for _, t in pairs), 1)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "accuracy": sum(p == t for p, t in pairs) / max(len(pairs), 1),
        "judged": len(verdicts),
        "ungraded_share": (len(verdicts) - len(pairs)) / max(len(verdicts), 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", help="collection folder in BEIR layout")
    parser.add_argument(
        "--evaluator", choices=["local", "learned", "oracle", "llm"], default="local"
    )
    parser.add_argument("--k", type=int, default=5, help="documents judged per iteration")
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--min-relevant", type=int, default=3)
    parser.add_argument("--policy", default="general", help="preset name, or 'relevant'")
    parser.add_argument(
        "--judge-cap",
        type=int,
        default=None,
        metavar="N",
        help="--evaluator local: keep at most N documents of a question's judged ones",
    )
    parser.add_argument("--limit", type=int, default=None, help="first N queries only")
    parser.add_argument("--llm-url", default=None)
    parser.add_argument("--model", default=None)
    parser.add_argument("--grading", choices=["default", "one-call", "two-call"], default="default")
    parser.add_argument(
        "--qrels-judge",
        action="store_true",
        help="serve benchmarks/qrels_judge.py in this process for --evaluator llm",
    )
    parser.add_argument("--latency-ms", type=float, default=0.0, help="--qrels-judge latency")
    parser.add_argument(
        "--retriever",
        choices=["hybrid", "bm25"],
        default="hybrid",
        help="bm25: BM25 alone, no corpus embedding (not with --evaluator local)",
    )
    add_noise_flags(parser)
    parser.add_argument("--local-llm", metavar="GGUF", help="start llama.cpp on this model")
    parser.add_argument("--timeout", type=float, default=None, help="seconds per LLM call")
    parser.add_argument("--max-retries", type=int, default=None)
    parser.add_argument("--json", default=None, help="write the figures here")
    args = parser.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    with contextlib.ExitStack() as stack:
        args.local_server = None
        if args.local_llm:  # the CLI's embedded server, for the run's length
            args.local_server = stack.enter_context(LocalLlamaServer(args.local_llm))
        return run(args)


def trace(result: Any) -> dict[str, Any]:
    """What a run did, id for id: compare two trees' ``per_query`` traces to show that a change
    left the loop's behaviour alone (same searches, verdicts, keeps, stops, calls and tokens)."""
    return {
        "iterations": [
            {
                "query": record.query,
                "searched": list(record.searched),
                "judged": [v.document_id for v in record.verdicts],
                # the whole verdict: a change that keeps the flag but not the reason shows
                "verdicts": [
                    {
                        "relevant": v.relevant,
                        "score": v.score,
                        "confidence": v.confidence,
                        "reasoning": v.reasoning,
                        "missing": list(v.missing),
                    }
                    for v in record.verdicts
                ],
                "kept": list(record.kept_ids),
                "action": record.action.value if record.action else None,
            }
            for record in result.history
        ],
        "stop_detail": result.stop_detail,
        "kept_ids": list(result.kept_ids),
        "prompt_tokens": result.usage.total.prompt_tokens,
        "completion_tokens": result.usage.total.completion_tokens,
    }


def run(args: argparse.Namespace) -> int:
    """Run the three arms over the collection and print (and write) the figures."""

    collection = load_collection(args.data)
    embedder: Any = None
    if args.retriever == "bm25":
        if args.evaluator in ("local", "learned"):
            raise SystemExit(f"--retriever bm25 does not go with --evaluator {args.evaluator}")
        retriever: Any = BM25Retriever(collection)
    else:
        model = SentenceTransformerEmbedder()
        embedder = DiskCachedEmbedder(model, default_cache_path(model))
    if embedder is not None and args.evaluator in ("local", "learned"):
        retriever = build_retriever(collection, embedder)
    elif embedder is not None:  # the corpus's sentences are embedded ahead for the local judge
        from benchmarks.overhead import build_store

        retriever = build_store(collection, embedder)
    server = None
    if args.qrels_judge:
        reply = qrels_reply(
            collection,
            false_negative=args.false_negative,
            false_positive=args.false_positive,
            proposer=args.proposer,
        )
        server = ScriptedLLMServer(reply, latency=args.latency_ms / 1e3)
        server.start()
        args.llm_url, args.model = server.base_url, args.model or "qrels-judge"
    try:
        return _run(args, collection, embedder, retriever)
    finally:
        if server is not None:
            server.stop()


def _run(args: argparse.Namespace, collection: Collection, embedder: Any, retriever: Any) -> int:
    evaluator, rewriter, single_evaluator = components(args, collection, retriever)
    policy = keep_policy(args.policy)
    try:
        loop = CorrectiveRAGOrchestrator(
            retriever,
            evaluator,
            rewriter,
            policy=policy,
            max_iterations=args.iterations,
            top_k=args.k,
            min_relevant=args.min_relevant,
        )
    except ConfigError as exc:
        raise SystemExit(f"bad loop settings: {exc}") from exc
    single, matched, corrective = Tally(), Tally(), Tally()
    judged_pairs: list[tuple[bool | None, bool]] = []
    stops: Counter[str] = Counter()
    fruitless = 0  # enough_relevant runs ended by an iteration that kept nothing new
    by_stop: dict[str, tuple[Tally, Tally]] = {}  # stop reason -> (corrective, matched)
    samples: list[dict[str, Any]] = []
    per_query: list[dict[str, Any]] = []
    queries = list(collection.queries.items())[: args.limit]
    for qid, question in queries:
        truth = collection.relevant(qid)
        started = time.perf_counter()
        hits = retriever.retrieve(question, top_k=args.k * args.iterations)
        fixed = judge_top(single_evaluator, policy, question, hits)
        fixed_seconds = time.perf_counter() - started
        single.add(fixed[0], truth, fixed[1], fixed[2], fixed_seconds)
        started = time.perf_counter()
        result = loop.run(question)
        loop_seconds = time.perf_counter() - started
        judged = sum(len(record.verdicts) for record in result.history)
        started = time.perf_counter()
        # the same call as the fixed arm when the loop judged as many (a batch-aware judge's
        # verdicts depend on the batch, so a shorter list is judged on its own)
        same = judged >= len(hits)
        matched_run = (
            fixed if same else judge_top(single_evaluator, policy, question, hits[:judged])
        )
        seconds = fixed_seconds if same else time.perf_counter() - started
        matched.add(matched_run[0], truth, matched_run[1], matched_run[2], seconds)
        stops[result.stop_reason.value] += 1
        fruitless += "kept nothing new" in result.stop_detail
        per_query.append(
            {
                "query": qid,
                "stop_reason": result.stop_reason.value,
                "judged": judged,
                "kept_per_iteration": [len(r.kept_ids) for r in result.history],
                "kept": {
                    "single_shot": len(fixed[0]),
                    "single_shot_matched": len(matched_run[0]),
                    "corrective": len(set(result.kept_ids)),
                },
                "relevant_kept": {
                    "single_shot": len(fixed[0] & truth),
                    "single_shot_matched": len(matched_run[0] & truth),
                    "corrective": len(set(result.kept_ids) & truth),
                },
            }
        )
        arms = by_stop.setdefault(result.stop_reason.value, (Tally(), Tally()))
        arms[0].add(set(result.kept_ids), truth, judged, result.usage.total.llm_calls, 0.0)
        arms[1].add(matched_run[0], truth, matched_run[1], matched_run[2], 0.0)
        if len(samples) < SAMPLES:
            samples.append(
                {
                    "question": question,
                    "rewrites": [r.query for r in result.history[1:]],
                    "kept_per_iteration": [len(r.kept_ids) for r in result.history],
                    "stop_reason": result.stop_reason.value,
                }
            )
        verdicts = [v for record in result.history for v in record.verdicts]
        judged_pairs.extend((v.relevant, v.document_id in truth) for v in verdicts)
        per_query[-1].update(  # and a line per query as it ends: a slow model's run is long
            llm_calls=result.usage.total.llm_calls,
            seconds=round(loop_seconds, 2),
            ungraded=sum(not v.graded for v in verdicts),
            agreeing=sum(v.graded and v.relevant == (v.document_id in truth) for v in verdicts),
            trace=trace(result),
        )
        line = {key: value for key, value in per_query[-1].items() if key != "trace"}
        print(json.dumps(line), file=sys.stderr, flush=True)
        corrective.add(
            set(result.kept_ids),
            truth,
            len(verdicts),
            result.usage.total.llm_calls,
            loop_seconds,
        )
        corrective.iterations += result.iterations
        corrective.prompt_tokens += result.usage.total.prompt_tokens
        corrective.completion_tokens += result.usage.total.completion_tokens
        corrective.rewrite_calls += result.usage.rewriting.llm_calls
        corrective.rewrite_prompt_tokens += result.usage.rewriting.prompt_tokens
        reason = result.stop_reason.value
        corrective.stop_reasons[reason] = corrective.stop_reasons.get(reason, 0) + 1
    if embedder is not None:
        embedder.save()
    report = {
        "collection": collection.name,
        "evaluator": args.evaluator,
        "retriever": args.retriever,
        "grading": args.grading if args.evaluator == "llm" else None,
        "judge": "qrels-judge" if args.qrels_judge else args.model,
        "proposer": args.proposer if args.qrels_judge else None,
        "false_negative": args.false_negative,
        "false_positive": args.false_positive,
        "policy": args.policy,
        "k": args.k,
        "iterations": args.iterations,
        "min_relevant": args.min_relevant,
        "judge_cap": args.judge_cap,
        "queries": len(queries),
        "single_shot": single.figures(),
        "single_shot_matched": matched.figures(),
        "corrective": corrective.figures(),
        "corrective_minus_matched": paired(corrective, matched),
        "evaluator_agreement": agreement(judged_pairs),
        # how the corrective runs ended: enough_relevant stops judge fewer documents
        "stop_reasons": dict(sorted(stops.items())),
        # of the enough_relevant stops: min_relevant kept, not all confidently, and an iteration
        # that kept nothing new (the rest had min_relevant confident keeps)
        "enough_relevant_after_fruitless_iteration": fruitless,
        # per stop reason: the loop beside single shot at the same documents judged
        "by_stop_reason": {
            reason: {
                "queries": len(arms[0].recall),
                "corrective": _brief(arms[0]),
                "single_shot_matched": _brief(arms[1]),
            }
            for reason, arms in sorted(by_stop.items())
        },
        "sample_runs": samples,
        "per_query": per_query,
    }
    shown = {k: v for k, v in report.items() if k not in ("sample_runs", "per_query")}
    print(json.dumps(shown, indent=2))
    print(summary(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
