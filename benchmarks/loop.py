"""Single-shot retrieval vs the corrective loop, at an equal number of documents judged per query.

For every query: *single shot* judges the top ``k x iterations`` hits of the question in one
evaluator call and keeps what the filter policy keeps; *corrective* runs
``CorrectiveRAGOrchestrator`` with ``top_k=k``, ``max_iterations=iterations`` and
``min_relevant``. Both are scored against the qrels: recall (mean share of a query's relevant
documents that were kept), all_found (share of queries whose relevant documents were all kept),
precision (share of kept documents that are relevant, pooled), documents judged, LLM calls and
seconds per query; plus the evaluator's agreement with the qrels on everything it judged.

    python benchmarks/loop.py HOTPOTQA_DIR --evaluator local --json loop-hotpotqa-local.json

``--evaluator oracle`` judges from the qrels (an upper bound for the loop); ``--evaluator llm``
uses ``LLMEvaluator`` / ``LLMRewriter`` over ``--llm-url`` and ``--model``, in ``--grading
one-call`` (judge and propose, the default) or ``two-call`` mode; ``benchmarks/qrels_judge.py``
serves a scripted model that judges from the qrels. The corrective arm also reports LLM calls
per iteration and prompt / completion tokens per query.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import structlog

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks.beir import Collection, load_collection
from benchmarks.cache import DiskCachedEmbedder, default_cache_path
from benchmarks.retrievers import build_retriever
from corrective_rag.errors import ConfigError
from corrective_rag.evaluate.llm import LLMEvaluator
from corrective_rag.evaluate.local import LocalEvaluator
from corrective_rag.evaluate.policy import Decision, FilterPolicy, decide, get_policy
from corrective_rag.llm.client import OpenAIChatClient
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.models.embeddings import SentenceTransformerEmbedder
from corrective_rag.rewrite.llm import LLMRewriter
from corrective_rag.rewrite.local import LocalRewriter
from corrective_rag.types import Document, Evaluation, Relevance, Usage, Verdict

SAMPLES = 20  # the first queries' rewrites, kept in the JSON for reading


class OracleEvaluator:
    """Verdicts read from the qrels: relevant iff the document is a qrel of the question."""

    documents_per_call = None  # no LLM calls

    def __init__(self, collection: Collection) -> None:
        self.by_text = {text: collection.relevant(qid) for qid, text in collection.queries.items()}

    def evaluate(self, question: str, documents: Sequence[Document]) -> Evaluation:
        """One certain verdict per document."""
        relevant = self.by_text.get(question, frozenset())
        return Evaluation(
            tuple(
                Verdict(d.id, True, Relevance.HIGH, 1.0, 1.0, reasoning="in the qrels")
                if d.id in relevant
                else Verdict(d.id, False, Relevance.LOW, 0.0, 1.0, reasoning="not in the qrels")
                for d in documents
            ),
            Usage(),
        )


def components(args: argparse.Namespace, collection: Collection, retriever: Any) -> tuple:
    """The evaluator and rewriter the ``--evaluator`` flag names."""
    if args.evaluator == "oracle":
        return OracleEvaluator(collection), LocalRewriter(idf=retriever.idf)
    if args.evaluator == "local":
        return LocalEvaluator(retriever.embedder, idf=retriever.idf), LocalRewriter(
            idf=retriever.idf
        )
    if not args.llm_url or not args.model:
        raise SystemExit("--evaluator llm needs --llm-url and --model")
    client = OpenAIChatClient(args.llm_url, model=args.model)
    if args.grading == "two-call":
        return LLMEvaluator(client), LLMRewriter(client)
    return LLMEvaluator(client, propose=True), LLMRewriter(client)


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


def agreement(pairs: list[tuple[bool, bool]]) -> dict[str, float]:
    """Precision, recall and F1 of (predicted relevant, truly relevant) pairs."""
    tp = sum(p and t for p, t in pairs)
    precision = tp / max(sum(p for p, _ in pairs), 1)
    recall = tp / max(sum(t for _, t in pairs), 1)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "judged": len(pairs)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", help="collection folder in BEIR layout")
    parser.add_argument("--evaluator", choices=["local", "oracle", "llm"], default="local")
    parser.add_argument("--k", type=int, default=5, help="documents judged per iteration")
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--min-relevant", type=int, default=3)
    parser.add_argument("--policy", default="general", help="preset name, or 'relevant'")
    parser.add_argument("--limit", type=int, default=None, help="first N queries only")
    parser.add_argument("--llm-url", default=None)
    parser.add_argument("--model", default=None)
    parser.add_argument("--grading", choices=["one-call", "two-call"], default="one-call")
    parser.add_argument("--json", default=None, help="write the figures here")
    args = parser.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))

    collection = load_collection(args.data)
    model = SentenceTransformerEmbedder()
    embedder = DiskCachedEmbedder(model, default_cache_path(model))
    if args.evaluator == "local":
        retriever = build_retriever(collection, embedder)
    else:  # the corpus's sentences are embedded ahead for the local judge only
        from benchmarks.overhead import build_store

        retriever = build_store(collection, embedder)
    evaluator, rewriter = components(args, collection, retriever)
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
    single, corrective = Tally(), Tally()
    judged_pairs: list[tuple[bool, bool]] = []
    stops: Counter[str] = Counter()
    samples: list[dict[str, Any]] = []
    queries = list(collection.queries.items())[: args.limit]
    for qid, question in queries:
        truth = collection.relevant(qid)
        started = time.perf_counter()
        hits = retriever.retrieve(question, top_k=args.k * args.iterations)
        evaluation = evaluator.evaluate(question, [h.document for h in hits])
        kept = {v.document_id for v in evaluation.verdicts if decide(v, policy) is Decision.KEEP}
        single.add(
            kept,
            truth,
            len(hits),
            evaluation.usage.llm_calls,
            time.perf_counter() - started,
        )
        started = time.perf_counter()
        result = loop.run(question)
        stops[result.stop_reason.value] += 1
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
        judged_pairs.extend((bool(v.relevant), v.document_id in truth) for v in verdicts)
        corrective.add(
            set(result.kept_ids),
            truth,
            len(verdicts),
            result.usage.total.llm_calls,
            time.perf_counter() - started,
        )
        corrective.iterations += result.iterations
        corrective.prompt_tokens += result.usage.total.prompt_tokens
        corrective.completion_tokens += result.usage.total.completion_tokens
        corrective.rewrite_calls += result.usage.rewriting.llm_calls
        corrective.rewrite_prompt_tokens += result.usage.rewriting.prompt_tokens
        reason = result.stop_reason.value
        corrective.stop_reasons[reason] = corrective.stop_reasons.get(reason, 0) + 1
    embedder.save()
    report = {
        "collection": collection.name,
        "evaluator": args.evaluator,
        "grading": args.grading if args.evaluator == "llm" else None,
        "policy": args.policy,
        "k": args.k,
        "iterations": args.iterations,
        "min_relevant": args.min_relevant,
        "queries": len(queries),
        "single_shot": single.figures(),
        "corrective": corrective.figures(),
        "evaluator_agreement": agreement(judged_pairs),
        # how the corrective runs ended: enough_relevant stops judge fewer documents
        "stop_reasons": dict(sorted(stops.items())),
        "sample_runs": samples,
    }
    print(json.dumps({k: v for k, v in report.items() if k != "sample_runs"}, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
