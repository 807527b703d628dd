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
