"""Soak run: thousands of questions through ``run_batch`` with injected LLM faults.

A small in-memory corpus (the keyword retriever of ``corrective_rag.testing``), the LLM evaluator
and rewriter on the scripted server, and a deterministic share of requests (``--fault-rate``,
seeded) answered with a fault of a mixed kind: 429 with Retry-After, 500, 503, a hang past the
read timeout, a body cut short (all once, then the retry succeeds), a 503 that outlasts the
retries, a non-JSON or wrong-shape body, a 5 MB body, prose instead of JSON, verdicts for ids
never sent. Checks that every question is accounted for exactly once and counts what became of
the faults. Writes the figures as JSON.

    python benchmarks/soak.py --queries 2000 --fault-rate 0.05 --json OUT.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

TOPICS = [
    ("bees", "honey bees collect flower nectar and ripen honey in wax cells"),
    ("volcano", "volcanoes erupt molten lava and ash when magma pressure rises"),
    ("glacier", "glaciers carve valleys as compacted ice slowly flows downhill"),
    ("violin", "violins have four strings tuned in fifths and played with a bow"),
    ("tides", "ocean tides follow the pull of the moon and the sun"),
    ("bread", "bread dough rises because yeast ferments sugar into gas"),
    ("comet", "comets grow bright tails of dust and gas near the sun"),
    ("coral", "coral reefs are built by tiny animals that secrete limestone"),
]
# Faults a retry gets past (injected on a request's first attempt only) and those it does not.
TRANSIENT = ("429", "500", "503", "hang", "cut body")
PERSISTENT = ("503 always", "non-JSON", "wrong shape", "5 MB body", "prose", "unknown ids")
KINDS = TRANSIENT + PERSISTENT
READ_TIMEOUT = 0.3
MAX_RETRIES = 2


def corpus() -> list[Any]:
    """Per topic: one document that answers, four that share a word, two off-topic."""
    from corrective_rag.types import Document

    docs = []
    for name, text in TOPICS:
        docs.append(Document(name, text.capitalize() + "."))
        words = text.split()
        for k in range(4):
            docs.append(Document(f"{name}-near{k}", f"A note that mentions {words[k * 2]} once."))
        for k in range(2):
            docs.append(Document(f"{name}-off{k}", f"Unrelated remark {k} about {name} trivia."))
    return docs


def queries(n: int) -> list[Any]:
    from corrective_rag.runs.execution.queries import Query

    forms = ("How do {}?", "Why do {}?", "Explain how {}.", "What makes {}?")
    return [
        Query(f"q{i:05d}", forms[i % 4].format(TOPICS[i % len(TOPICS)][1]) + f" (case {i})")
        for i in range(n)
    ]


class FaultPlan:
    """Picks a fault for a share of requests from a hash of (seed, body): same faults every run."""

    def __init__(self, rate: float, seed: int) -> None:
        from corrective_rag.testing import Fault

        self.rate = rate
        self.seed = seed
        self.fault = {
            "429": Fault.rate_limited(retry_after="0"),
            "500": Fault.error(500),
            "503": Fault.error(503),
            "hang": Fault.hang(READ_TIMEOUT * 4),
            "cut body": Fault.close_mid_body(),
            "503 always": Fault.error(503),
            "non-JSON": Fault.non_json(),
            "wrong shape": Fault.wrong_shape(),
            "5 MB body": Fault.huge(5_000_000),
            "prose": Fault.content("All of these documents look relevant to me."),
            "unknown ids": Fault.content(
                json.dumps({"verdicts": [{"id": "ghost", "relevant": True, "score": 1.0}]})
            ),
        }
        self.injected: Counter[str] = Counter()
        self.attempts: dict[str, list[str | None]] = {}  # body -> fault per attempt
        self._lock = threading.Lock()

    def _draw(self, body: str) -> tuple[float, str]:
        digest = hashlib.blake2b(f"{self.seed}:{body}".encode(), digest_size=16).digest()
        u = int.from_bytes(digest[:8], "big") / 2**64
        return u, KINDS[int.from_bytes(digest[8:], "big") % len(KINDS)]

    def __call__(self, request: Mapping[str, Any], attempt: int) -> Any:
        body = json.dumps(request, sort_keys=True)
        u, kind = self._draw(body)
        chosen = kind if u < self.rate and (kind in PERSISTENT or attempt == 0) else None
        with self._lock:
            self.attempts.setdefault(body, []).append(chosen)
            if chosen:
                self.injected[chosen] += 1
        return self.fault[chosen] if chosen else None

    def recovered(self) -> int:
        """Requests that met a fault and then got a normal answer on a retry."""
        return sum(
            1 for tries in self.attempts.values() if tries[0] is not None and tries[-1] is None
        )

    def exhausted(self) -> int:
        """Requests answered with a retryable fault on every one of their 1 + retries tries."""
        return sum(
            1
            for tries in self.attempts.values()
            if len(tries) == 1 + MAX_RETRIES and all(t is not None for t in tries)
        )

    def max_tries(self) -> int:
        return max(len(t) for t in self.attempts.values())


def outcomes(records: list[Any]) -> dict[str, int]:
    """What the results file records about faults, by kind."""
    counts: Counter[str] = Counter()
    for rec in records:
        if not rec.ok:
            counts["failed queries"] += 1
            continue
        result = rec.result
        for it in result.history:
            counts["ungraded verdicts"] += len(it.ungraded_ids)
            if it.rewrite is not None and it.rewrite.query is None:
                reason = it.rewrite.rejected or ""
                if reason.startswith(("llm error", "unparseable reply")):
                    counts["rewrites rejected (llm error / unparseable)"] += 1
                else:
                    counts["rewrites rejected (drift guard)"] += 1
        counts["failed calls recorded in usage"] += result.usage.total.failed_calls
        counts["runs with ungraded verdicts"] += any(it.ungraded_ids for it in result.history)
    return dict(counts)


def run(n_queries: int, fault_rate: float, seed: int, concurrency: int, latency: float) -> dict:
    from corrective_rag.calls import Retries, Timeouts
    from corrective_rag.evaluate.cache import VerdictCache
    from corrective_rag.evaluate.llm import LLMEvaluator
    from corrective_rag.llm.client import OpenAIChatClient
    from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
    from corrective_rag.rewrite.llm import LLMRewriter
    from corrective_rag.runs.execution.batch import run_batch
    from corrective_rag.runs.records.results import read_results
    from corrective_rag.testing import ScriptedLLMServer
    from corrective_rag.testing.fakes import ListRetriever

    plan = FaultPlan(fault_rate, seed)
    todo = queries(n_queries)
    with (
        ScriptedLLMServer(latency=latency, faults=plan) as server,
        tempfile.TemporaryDirectory() as tmp,
    ):
        chat = OpenAIChatClient(
            server.base_url,
            "scripted",
            timeouts=Timeouts(connect=2, read=READ_TIMEOUT),
            retries=Retries(max_retries=MAX_RETRIES, backoff_base=0.01, backoff_max=0.1),
            max_concurrency=32,
        )
        orch = CorrectiveRAGOrchestrator(
            ListRetriever(corpus()),
            LLMEvaluator(chat, batch_size=3, max_workers=2, cache=VerdictCache(0)),
            LLMRewriter(chat),
            top_k=3,
            max_iterations=3,
            min_relevant=2,
        )
        out = Path(tmp) / "results.jsonl"
        started = time.perf_counter()
        summary = run_batch(todo, orch.run, out_path=out, concurrency=concurrency, progress=False)
        wall = time.perf_counter() - started
        records = read_results(out)
        requests = server.request_count
    ids = [r.id for r in records]
    ok = sum(r.ok for r in records)
    return {
        "queries": n_queries,
        "fault_rate": fault_rate,
        "seed": seed,
        "concurrency": concurrency,
        "latency_seconds": latency,
        "wall_seconds": round(wall, 2),
        "throughput_qps": round(n_queries / wall, 2),
        "lines": len(records),
        "ok_lines": ok,
        "error_lines": len(records) - ok,
        "duplicate_ids": len(ids) - len(set(ids)),
        "accounted_for": sorted(ids) == sorted(q.id for q in todo),
        "llm_requests": requests,
        "faults_injected": dict(sorted(plan.injected.items())),
        "faults_injected_total": sum(plan.injected.values()),
        "retried_and_recovered": plan.recovered(),
        "requests_failed_past_retries": plan.exhausted(),
        "most_tries_for_one_request": plan.max_tries(),
        "outcomes": outcomes(records),
        "stop_reasons": dict(summary.stop_reasons),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--fault-rate", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--latency-ms", type=float, default=5.0)
    parser.add_argument("--json", metavar="OUT.json")
    args = parser.parse_args()
    import logging

    logging.disable(logging.WARNING)  # the run logs a warning per fault; the figures are the point
    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    latency = args.latency_ms / 1000
    figures = run(args.queries, args.fault_rate, args.seed, args.concurrency, latency)
    text = json.dumps(figures, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n", encoding="utf-8")
    if not figures["accounted_for"] or figures["duplicate_ids"]:
        raise SystemExit("some questions were lost or answered twice")


if __name__ == "__main__":
    main()
