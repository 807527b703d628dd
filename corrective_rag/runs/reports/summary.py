"""Aggregate figures over a batch of runs: pure functions over result records.

The same summary is printed at the end of ``corrective-rag batch`` and by
``corrective-rag history stats``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from corrective_rag.runs.records.results import ResultRecord
from corrective_rag.text.display import cut
from corrective_rag.types import RunResult, Usage

# BatchSummary and summarize: their home is corrective_rag.runs
__all__ = ["PHASES", "mean"]

PHASES = ("grading", "rewriting", "generation", "refinement")


def mean(values: Sequence[float]) -> float:
    """Arithmetic mean; NaN for an empty sequence."""
    return sum(values) / len(values) if values else math.nan


def rewrote(result: RunResult) -> bool:
    """True when any iteration of the run produced an accepted rewrite."""
    return any(r.rewrite is not None and r.rewrite.query is not None for r in result.history)


def used_fallback(result: RunResult) -> bool:
    """True when any iteration of the run used the fallback source."""
    return any(r.fallback is not None for r in result.history)


def _usage_dict(usage: Usage) -> dict[str, Any]:
    return {
        "llm_calls": usage.llm_calls,
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
        "cost_usd": usage.cost_usd,
        "failed_calls": usage.failed_calls,
    }


@dataclass(frozen=True, slots=True)
class BatchSummary:
    """What a batch did, over the last record of every query.

    Attributes:
        queries: queries in the batch (after sharding).
        ok: queries that ran to a result.
        failures: queries whose last attempt failed.
        skipped: queries found already done in the results file and not run again.
        missing: queries with no line at all (the batch was interrupted).
        stop_reasons: how many ok runs ended for each stop reason.
        mean_iterations: mean iterations per ok run.
        rewrite_rate: share of ok runs with at least one accepted rewrite.
        fallback_rate: share of ok runs where any iteration used the fallback.
        usage_by_phase: LLM calls, tokens and cost per phase, summed over ok runs.
        latency_p50: median wall seconds per query (ok runs).
        latency_p95: 95th percentile wall seconds per query (ok runs).
        mean_kept: mean kept documents per ok run.
        wall_seconds: wall time of this invocation (0 when only read back).
        interrupted: True when the batch was stopped before every query ran.
    """

    queries: int
    ok: int
    failures: int
    skipped: int
    missing: int
    stop_reasons: Mapping[str, int]
    mean_iterations: float
    rewrite_rate: float
    fallback_rate: float
    usage_by_phase: Mapping[str, Mapping[str, Any]]
    latency_p50: float
    latency_p95: float
    mean_kept: float
    wall_seconds: float = 0.0
    interrupted: bool = False
    error_types: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "stop_reasons", MappingProxyType(dict(self.stop_reasons)))
        object.__setattr__(self, "error_types", MappingProxyType(dict(self.error_types)))
        phases = {k: MappingProxyType(dict(v)) for k, v in self.usage_by_phase.items()}
        object.__setattr__(self, "usage_by_phase", MappingProxyType(phases))

    @property
    def llm_calls(self) -> int:
        """LLM calls over every phase."""
        return sum(int(u["llm_calls"]) for u in self.usage_by_phase.values())

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens over every phase."""
        return sum(int(u["total_tokens"]) for u in self.usage_by_phase.values())

    @property
    def cost_usd(self) -> float:
        """Cost over every phase."""
        return sum(float(u["cost_usd"]) for u in self.usage_by_phase.values())

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (NaN becomes ``None``)."""

        def clean(x: float) -> float | None:
            return None if math.isnan(x) else x

        return {
            "queries": self.queries,
            "ok": self.ok,
            "failures": self.failures,
            "skipped": self.skipped,
            "missing": self.missing,
            "interrupted": self.interrupted,
            "stop_reasons": dict(self.stop_reasons),
            "error_types": dict(self.error_types),
            "mean_iterations": clean(self.mean_iterations),
            "mean_kept": clean(self.mean_kept),
            "rewrite_rate": clean(self.rewrite_rate),
            "fallback_rate": clean(self.fallback_rate),
            "llm_calls": self.llm_calls,
            "total_tokens": self.total_tokens,
            "cost_usd": self.cost_usd,
            "usage_by_phase": {k: dict(v) for k, v in self.usage_by_phase.items()},
            "latency_p50": clean(self.latency_p50),
            "latency_p95": clean(self.latency_p95),
            "wall_seconds": self.wall_seconds,
        }

    def render(self) -> str:
        """A short human-readable block."""

        def fmt(x: float, spec: str = ".2f") -> str:
            return "-" if math.isnan(x) else format(x, spec)

        reasons = ", ".join(f"{k} {v}" for k, v in sorted(self.stop_reasons.items())) or "-"
        errors = _counts(self.error_types) or "-"
        lines = [
            f"queries      {self.queries}  ok {self.ok}  failed {self.failures}  "
            f"skipped {self.skipped}  missing {self.missing}"
            + ("  (interrupted)" if self.interrupted else ""),
            f"stop reasons {reasons}",
            f"errors       {errors}",
            f"iterations   mean {fmt(self.mean_iterations)}  kept mean {fmt(self.mean_kept)}  "
            f"rewrite rate {fmt(self.rewrite_rate, '.0%')}  "
            f"fallback rate {fmt(self.fallback_rate, '.0%')}",
            f"latency      p50 {fmt(self.latency_p50)} s  p95 {fmt(self.latency_p95)} s",
            f"llm          calls {self.llm_calls}  tokens {self.total_tokens}  "
            f"cost ${self.cost_usd:.4f}",
        ]
        for phase, u in self.usage_by_phase.items():
            if u["llm_calls"]:
                lines.append(
                    f"  {phase:<11}calls {u['llm_calls']}  tokens {u['total_tokens']}  "
                    f"cost ${float(u['cost_usd']):.4f}"
                )
        if self.wall_seconds:
            lines.append(f"wall         {self.wall_seconds:.1f} s")
        return "\n".join(lines)


SHOWN_TYPES = 10  # error types named in the text summary; a crafted file may hold thousands
TYPE_CHARS = 80  # of one error type's name there


def _counts(counts: Mapping[str, int]) -> str:
    """The most frequent ``SHOWN_TYPES`` entries as ``name count``, and how many more."""
    ordered = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    shown = [f"{cut(k, TYPE_CHARS)} {v}" for k, v in ordered[:SHOWN_TYPES]]
    if len(ordered) > SHOWN_TYPES:
        shown.append(f"and {len(ordered) - SHOWN_TYPES} more")
    return ", ".join(shown)


def summarize(
    records: Sequence[ResultRecord],
    *,
    ids: Sequence[str] | None = None,
    skipped: int = 0,
    wall_seconds: float = 0.0,
    interrupted: bool = False,
) -> BatchSummary:
    """Summarize the last record of each query.

    Args:
        records: result records in file order (several per id allowed; the last wins).
        ids: the batch's query ids; records of other ids are ignored, and ids without a record
            count as ``missing``. ``None`` takes every id found in ``records``.
        skipped: how many queries were skipped as already done.
        wall_seconds: wall time of the invocation, reported as-is.
        interrupted: whether the invocation was stopped early.
    """
    last: dict[str, ResultRecord] = {}
    for rec in records:
        last[rec.id] = rec
    wanted = list(dict.fromkeys(ids)) if ids is not None else list(last)
    present = [last[i] for i in wanted if i in last]
    oks = [r.result for r in present if r.ok and r.result is not None]
    fails = [r for r in present if not r.ok]
    usage = {p: Usage() for p in PHASES}
    for res in oks:
        for p in PHASES:
            usage[p] = usage[p] + getattr(res.usage, p)
    n = len(oks)
    latencies = [r.seconds for r in present if r.ok]
    # numpy's default (linear interpolation) percentiles; NaN when no run succeeded
    p50, p95 = np.percentile(latencies, [50, 95]).tolist() if latencies else (math.nan, math.nan)
    return BatchSummary(
        queries=len(wanted),
        ok=n,
        failures=len(fails),
        skipped=skipped,
        missing=len(wanted) - len(present),
        stop_reasons=dict(Counter(res.stop_reason.value for res in oks)),
        mean_iterations=mean([float(res.iterations) for res in oks]),
        rewrite_rate=sum(rewrote(res) for res in oks) / n if n else math.nan,
        fallback_rate=sum(used_fallback(res) for res in oks) / n if n else math.nan,
        usage_by_phase={p: _usage_dict(u) for p, u in usage.items()},
        latency_p50=p50,
        latency_p95=p95,
        mean_kept=mean([float(len(res.kept)) for res in oks]),
        wall_seconds=wall_seconds,
        interrupted=interrupted,
        error_types=dict(Counter(r.error.get("type", "") for r in fails)),
    )
