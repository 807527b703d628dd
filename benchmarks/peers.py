"""Seconds per question beside the LangGraph CRAG design, at a given model latency, in one run.

Three arms answer the same questions over the same in-memory hybrid store (BM25 + dense in
chromadb), against the same scripted model judging from the qrels (``benchmarks/qrels_judge.py``,
in its own process, at ``--latency-ms``):

* ``ours``: the README's wiring, ``CorrectiveRAGOrchestrator(store, LLMEvaluator(chat),
  LLMRewriter(chat), generator=LLMGenerator(chat))`` with ``top_k=k``;
* ``langgraph``: the LangGraph CRAG tutorial's graph, node for node, in plain Python (no
  framework overhead counted against it): retrieve the question's top ``k``; grade each document
  in a call of its own, one after another; when any is irrelevant, rewrite the question (one
  call) and add the rewrite's top 3 hits ungraded (the tutorial's web search, here the same
  store); answer from what is left (one call): 6 calls when a document is dropped;
* ``single_search``: one ``store.retrieve(question, top_k=k)``, the floor any design pays.

Query embeddings are computed live (the embedder's cache is emptied before each arm's run of a
question; the corpus's come from the disk cache), by the library's default embedder (ONNX
Runtime, ``--embedder onnx``) or by torch on one thread (``--embedder torch``, the setting the
figures were first taken with); ``--cached-queries`` takes them from the model's cache instead
(a warm-up pass over every question), leaving each design's own cost. The searches the store
remembers (``store.search.SearchMemo``) are forgotten before each arm's run of a question
either way: no arm reuses another's searches. The arms take turns per question, so that a
change in the machine's load reaches all of them. Each arm reports seconds per question (mean,
p50), LLM calls and their tokens (prompt and completion, as the judge counts them: ``--usage
words`` by default, ``tiktoken`` for cl100k tokens), query texts through the encoder, the
share of questions whose supporting paragraphs (the qrels) are all among the documents it kept
(``all_found``), the share of each question's relevant documents it kept (``recall``), and the
seconds its query texts spent in the encoder (``encoder_seconds``).
``ours_encoder_over_langgraph`` divides the loop's encoder seconds alone by the LangGraph
design's whole seconds per question: a floor under ``ours_over_langgraph`` that no saving
outside the encoder can lower.

    python benchmarks/peers.py DATA --limit 50 --k 4 --latency-ms 0 --json peers.json
    python benchmarks/peers.py DATA --limit 50 --k 4 --latency-ms 0 --embedder torch
    python benchmarks/peers.py DATA --limit 50 --latency-ms 0 --embedder torch --lexical ""

``--lexical LANES`` (repeatable) adds an arm taking its turn beside the others: the README's
wiring with ``Lanes(lexical=LANES)``, those lanes searched by BM25 alone (``""``: every lane on
both legs, as before a model's rewrite and the feedback lane went to BM25 alone).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks.overhead import EMBEDDERS, bench_store, forget_searches, judge_process
from corrective_rag.evaluate.llm import LLMEvaluator
from corrective_rag.generate.llm import LLMGenerator
from corrective_rag.llm import prompts
from corrective_rag.llm.client import OpenAIChatClient
from corrective_rag.loop.lanes import Lanes
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.rewrite.llm import LLMRewriter
from corrective_rag.store.hybrid import HybridStore
from corrective_rag.types import Usage

WEB_RESULTS = 3  # the tutorial's TavilySearchResults(k=3)


class LangGraphDesign:
    """The LangGraph CRAG tutorial's graph: retrieve, grade each, rewrite + search, generate."""

    def __init__(self, store: HybridStore, chat: OpenAIChatClient, k: int) -> None:
        self.store, self.chat, self.k = store, chat, k
        self.usage = Usage()  # its calls and tokens so far

    def _ask(self, messages: list[dict[str, str]], schema: dict[str, Any]) -> dict[str, Any]:
        reply = self.chat.complete(messages, json_schema=schema, max_tokens=256)
        self.usage += Usage(1, reply.usage.prompt_tokens, reply.usage.completion_tokens)
        out: dict[str, Any] = json.loads(reply.text)  # with_structured_output parses it so
        return out

    def run(self, question: str) -> list[str]:
        """The ids of the documents the answer is generated from."""
        hits = self.store.retrieve(question, top_k=self.k)
        kept = []
        for hit in hits:  # grade_documents: one call per document, in a loop
            doc = hit.document
            obj = self._ask(
                prompts.grader_messages(question, [(doc.id, doc.text)]),
                prompts.verdict_schema(),
            )
            verdicts = obj.get("verdicts") or [{}]
            if verdicts[0].get("relevant") is True:
                kept.append(doc)
        if len(kept) < len(hits):  # decide_to_generate: any irrelevant -> transform_query
            obj = self._ask(prompts.rewriter_messages(question, [], []), prompts.rewrite_schema())
            better = str(obj.get("query") or question)
            known = {d.id for d in kept}
            for hit in self.store.retrieve(better, top_k=WEB_RESULTS):  # web_search
                if hit.document.id not in known:
                    kept.append(hit.document)
        ids = [d.id for d in kept]
        self._ask(prompts.generator_messages(question, kept), prompts.answer_schema(ids))
        return ids


class Arm:
    """One design's seconds, calls, tokens and kept ids per question."""

    def __init__(self, name: str, run: Callable[[str], tuple[list[str], Usage]]) -> None:
        self.name, self.run = name, run
        self.seconds: list[float] = []
        self.calls: list[int] = []
        self.tokens: list[int] = []  # prompt and completion tokens of its LLM calls
        self.found: list[bool] = []
        self.recall: list[float] = []  # share of the question's relevant documents kept
        self.embedded: list[int] = []  # query texts through the model (its cache missed)
        self.encoding: list[float] = []  # seconds in the model's embed

    def once(self, question: str, relevant: frozenset[str], model: Any, clock: Clock) -> None:
        embedded, encoding = model.texts_embedded, clock.seconds
        started = time.perf_counter()
        kept, usage = self.run(question)
        self.seconds.append(time.perf_counter() - started)
        self.embedded.append(model.texts_embedded - embedded)
        self.encoding.append(clock.seconds - encoding)
        self.calls.append(usage.llm_calls)
        self.tokens.append(usage.total_tokens)
        self.found.append(relevant <= set(kept))
        self.recall.append(len(relevant & set(kept)) / len(relevant) if relevant else 0.0)

    def figures(self) -> dict[str, float]:
        return {
            "mean_seconds": round(statistics.fmean(self.seconds), 4),
            "p50_seconds": round(statistics.median(self.seconds), 4),
            "llm_calls": round(statistics.fmean(self.calls), 2),
            "tokens": round(statistics.fmean(self.tokens), 1),
            "all_found": round(statistics.fmean(self.found), 3),
            "recall": round(statistics.fmean(self.recall), 3),
            "queries_embedded": round(statistics.fmean(self.embedded), 2),
            "encoder_seconds": round(statistics.fmean(self.encoding), 4),
        }


class Clock:
    """Seconds spent in ``model.embed``, added up (the arms run one at a time)."""

    def __init__(self, model: Any) -> None:
        self.seconds = 0.0
        embed = model.embed

        def timed(texts: Any) -> Any:
            started = time.perf_counter()
            try:
                return embed(texts)
            finally:
                self.seconds += time.perf_counter() - started

        model.embed = timed


def arms(store: HybridStore, url: str, k: int, *, lexical: Sequence[str] = ()) -> list[Arm]:
    """The arms, in the order they take turns; each of ``lexical`` adds an arm: the README's
    wiring with ``Lanes(lexical=...)`` those lanes (comma-separated; ``""``: none) searched
    by BM25 alone, named ``ours_lexical_<lanes>``."""
    chat = OpenAIChatClient(url, "scripted")
    peer = LangGraphDesign(store, OpenAIChatClient(url, "scripted"), k)

    def wiring(lanes: Lanes) -> Callable[[str], tuple[list[str], Usage]]:
        loop = CorrectiveRAGOrchestrator(
            store,
            LLMEvaluator(chat),
            LLMRewriter(chat),
            generator=LLMGenerator(chat),
            top_k=k,
            lanes=lanes,
        )

        def run(question: str) -> tuple[list[str], Usage]:
            result = loop.run(question)
            return list(result.kept_ids), result.usage.total

        return run

    def run_peer(question: str) -> tuple[list[str], Usage]:
        peer.usage = Usage()
        kept = peer.run(question)
        return kept, peer.usage

    def run_single(question: str) -> tuple[list[str], Usage]:
        return [h.document.id for h in store.retrieve(question, top_k=k)], Usage()

    out = [Arm("ours", wiring(Lanes())), Arm("langgraph", run_peer)]
    out.append(Arm("single_search", run_single))
    for spec in lexical:
        lanes = tuple(n for n in spec.split(",") if n)
        out.append(Arm(f"ours_lexical_{'_'.join(lanes) or 'none'}", wiring(Lanes(lexical=lanes))))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", help="collection folder in BEIR layout")
    parser.add_argument("--limit", type=int, default=50, help="first N questions")
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--warm-up", type=int, default=3, help="questions run first, unmeasured")
    parser.add_argument(
        "--cached-queries",
        action="store_true",
        help="every query's embedding from the model's cache (a warm-up pass over all questions):"
        " the designs' own cost without the encoder",
    )
    parser.add_argument(
        "--embedder",
        choices=EMBEDDERS,
        default="onnx",
        help="what encodes the queries: the library's default (onnx) or torch on one thread",
    )
    parser.add_argument(
        "--lexical",
        action="append",
        default=[],
        metavar="LANES",
        help="one more arm: ours with these lanes (comma-separated, '' for none) by BM25 alone",
    )
    parser.add_argument(
        "--usage",
        choices=["words", "tiktoken"],
        default="words",
        help="what the judge counts as tokens: words (cheap) or cl100k tokens",
    )
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    collection, model, embedder, store = bench_store(args.data, args.embedder)
    # queries from here on go through the model (the corpus's vectors came from the disk
    # cache): with the cache on, a question embedded by the first arm was free for the others
    embedder.caching = False
    import torch  # already loaded by the store: only to report its threads

    ids = list(collection.queries)[: args.limit]
    judge, url = judge_process(args.data, latency_ms=args.latency_ms, usage=args.usage)
    try:
        designs = arms(store, url, args.k, lexical=args.lexical)
        warm = ids if args.cached_queries else ids[: args.warm_up]
        for qid in warm:  # tiktoken, the pools, the model's first pass (or every query's)
            for arm in designs:
                arm.run(collection.queries[qid])
        # empty verdict caches: each run grades again
        designs = arms(store, url, args.k, lexical=args.lexical)
        clock = Clock(model)
        for qid in ids:
            for arm in designs:
                if not args.cached_queries:
                    model.clear_cache()
                forget_searches(store)
                arm.once(collection.queries[qid], collection.relevant(qid), model, clock)
    finally:
        judge.terminate()
        judge.wait(timeout=30)
    figures = {arm.name: arm.figures() for arm in designs}
    ours, peer = figures["ours"]["mean_seconds"], figures["langgraph"]["mean_seconds"]
    report = {
        "collection": collection.name,
        "questions": len(ids),
        "k": args.k,
        "latency_ms": args.latency_ms,
        "query_embeddings": "cached" if args.cached_queries else "live",
        "embedder": type(model).__name__,
        "torch_threads": torch.get_num_threads(),
        "tokens_counted_as": args.usage,
        "load_average_1min": os.getloadavg()[0],
        **figures,
        "ours_over_langgraph": round(ours / peer, 3),
        "ours_encoder_over_langgraph": round(figures["ours"]["encoder_seconds"] / peer, 3),
        **{
            f"{name}_over_langgraph": round(arm["mean_seconds"] / peer, 3)
            for name, arm in figures.items()
            if name.startswith("ours_lexical_")
        },
    }
    print(json.dumps(report, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
