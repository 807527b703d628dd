"""Hand-built RunResults for tests of the batch runner, history tools and plots.

Also usable from child processes (crash tests): put this folder on PYTHONPATH.
"""

from __future__ import annotations

import hashlib
import time

from corrective_rag.types import (
    CragAction,
    Document,
    FallbackMode,
    IterationRecord,
    KeptDocument,
    PhaseUsage,
    Relevance,
    Retrieved,
    Rewrite,
    RunResult,
    StopReason,
    Usage,
    Verdict,
)

GRADING = Usage(2, 100, 20, 0.002, 0.4)
REWRITING = Usage(1, 50, 10, 0.001, 0.1)


def make_result(
    question: str,
    *,
    kept_per_iteration: tuple[int, ...] = (1, 2),
    stop: StopReason = StopReason.ENOUGH_RELEVANT,
    fallback_at: int | None = None,
    grading: Usage = GRADING,
    rewriting: Usage = REWRITING,
    seconds: float = 0.5,
) -> RunResult:
    """A result with one iteration per entry of ``kept_per_iteration`` (kept docs found there).

    Every iteration but the last ends with an accepted rewrite; usage is the same each time.
    """
    tag = hashlib.md5(question.encode()).hexdigest()[:6]
    history = []
    kept = []
    query = question
    for i, n_kept in enumerate(kept_per_iteration, start=1):
        ids = [f"{tag}-{i}-{k}" for k in range(3)]
        verdicts = tuple(
            Verdict(
                d,
                k < n_kept,
                Relevance.HIGH if k < n_kept else Relevance.LOW,
                0.9 if k < n_kept else 0.1,
                0.8,
                f"reason {k}",
            )
            for k, d in enumerate(ids)
        )
        last = i == len(kept_per_iteration)
        rewrite = None if last else Rewrite(f"{question} rewrite {i}", "add terms", usage=rewriting)
        usage = PhaseUsage(grading=grading, rewriting=Usage() if last else rewriting)
        history.append(
            IterationRecord(
                index=i,
                query=query,
                searched=(query,),
                retrieved=tuple(Retrieved(d, 1.0 / (r + 1), r + 1) for r, d in enumerate(ids)),
                skipped_ids=(),
                verdicts=verdicts,
                kept_ids=tuple(ids[:n_kept]),
                dropped_ids=tuple(ids[n_kept:]),
                ungraded_ids=(),
                action=CragAction.CORRECT if n_kept >= 2 else CragAction.AMBIGUOUS,
                fallback=FallbackMode.SUPPLEMENTED if fallback_at == i else None,
                rewrite=rewrite,
                usage=usage,
                seconds=seconds / len(kept_per_iteration),
            )
        )
        for k in range(n_kept):
            kept.append(KeptDocument(Document(ids[k], f"text of {ids[k]}"), verdicts[k], i, k + 1))
        if rewrite is not None and rewrite.query:
            query = rewrite.query
    total = PhaseUsage()
    for rec in history:
        total = total + rec.usage
    return RunResult(
        run_id=f"run-{tag}",
        question=question,
        final_query=query,
        kept=tuple(kept),
        stop_reason=stop,
        stop_detail=stop.value,
        history=tuple(history),
        usage=total,
        seconds=seconds,
        policy={"min_relevant": 3},
    )


def slow_run(question: str, delay: float = 0.05) -> RunResult:
    """A run_one that takes ``delay`` seconds, then returns a fixed-shape result."""
    time.sleep(delay)
    if "fail" in question:
        raise RuntimeError(f"cannot answer {question!r}")
    return make_result(question)


SCRIPTED_DOCS = tuple(
    Document(f"d{i}", text)
    for i, text in enumerate(
        [
            "Python lists are mutable sequences that keep insertion order.",
            "Tuples are immutable sequences; a tuple can be a dictionary key.",
            "Dictionaries map hashable keys to values and keep insertion order.",
            "Sets hold unique hashable elements and support union and intersection.",
            "Generators produce values lazily with the yield statement.",
            "The GIL lets one thread run Python bytecode at a time.",
        ]
    )
)


class ScriptedFactory:
    """A picklable runner factory: the corrective loop over a scripted LLM server.

    Each call builds a fresh orchestrator (a keyword retriever over :data:`SCRIPTED_DOCS`, LLM
    evaluator and rewriter on ``base_url``). A question containing ``fail`` raises; the first
    time any worker runs a question containing ``crash``, that worker's process is SIGKILLed
    (``crash_marker`` is the file recording that it happened).
    """

    def __init__(self, base_url: str, crash_marker: str | None = None) -> None:
        self.base_url = base_url
        self.crash_marker = crash_marker

    def __call__(self):
        import os
        import signal

        from corrective_rag.evaluate.llm import LLMEvaluator
        from corrective_rag.llm.client import OpenAIChatClient
        from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
        from corrective_rag.rewrite.llm import LLMRewriter
        from corrective_rag.testing.fakes import ListRetriever

        chat = OpenAIChatClient(self.base_url, "scripted")
        orch = CorrectiveRAGOrchestrator(
            ListRetriever(SCRIPTED_DOCS),
            LLMEvaluator(chat, batch_size=5, max_workers=1),
            LLMRewriter(chat),
            max_iterations=2,
            top_k=3,
            min_relevant=2,
        )

        def run(question: str) -> RunResult:
            if "fail" in question:
                raise RuntimeError(f"cannot answer {question!r}")
            if "crash" in question and self.crash_marker:
                try:
                    os.close(os.open(self.crash_marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
                except FileExistsError:
                    pass  # crashed once already: answer this time
                else:
                    os.kill(os.getpid(), signal.SIGKILL)
            return orch.run(question)

        return run
