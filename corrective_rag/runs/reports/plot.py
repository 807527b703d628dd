"""One figure of a batch: what each iteration found, why runs stopped, and what they cost.

matplotlib is an optional extra (``pip install corrective_rag[plot]``), imported only when a
plot is drawn, with the headless Agg backend.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from corrective_rag.errors import ConfigError, InputError
from corrective_rag.inputs import is_int
from corrective_rag.runs.records.paths import check_output
from corrective_rag.runs.records.results import ResultRecord, latest_records, read_results
from corrective_rag.types import RunResult

__all__ = ["plot", "plot_records"]

_MAX_TICK_LABELS = 40  # beyond this, query ids overlap and only clutter the axis
_ITER_COLOURS = ("#4C72B0", "#55A868", "#C44E52", "#8172B2", "#CCB974", "#64B5CD")
_PHASE_COLOURS = {
    "grading": "#4C72B0",
    "rewriting": "#DD8452",
    "generation": "#55A868",
    "refinement": "#8172B2",
}


def _cost_metric(results: Sequence[RunResult]) -> tuple[str, str]:
    """Pick what the cost panel shows: dollars when any were spent, else calls, else seconds."""
    if any(r.usage.total.cost_usd > 0 for r in results):
        return "cost_usd", "cost per query (USD)"
    if any(r.usage.total.llm_calls > 0 for r in results):
        return "llm_calls", "LLM calls per query"
    return "seconds", "seconds per query"


def plot(results_path: str | os.PathLike[str], out_png: str | os.PathLike[str]) -> Path:
    """Draw the batch figure of a results JSONL file into ``out_png``.

    Raises:
        InputError: when the file is missing, malformed or holds no successful run.
        ConfigError: when matplotlib is not installed.
    """
    check_output(out_png, inputs=[("results file", results_path)], folder_must_exist=False)
    return plot_records(
        latest_records(read_results(results_path)), out_png, title=Path(results_path).name
    )


def plot_records(
    records: Sequence[ResultRecord], out_png: str | os.PathLike[str], *, title: str = ""
) -> Path:
    """Draw the batch figure for already-read records (the last one per id)."""
    ok = [r for r in records if r.result is not None]
    if not ok:
        raise InputError("nothing to plot: no successful run in the results")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.backend_bases import FigureCanvasBase
    except ImportError as exc:
        raise ConfigError("plotting needs matplotlib: pip install 'corrective_rag[plot]'") from exc
    kinds = FigureCanvasBase.get_supported_filetypes()
    suffix = Path(out_png).suffix.lower().lstrip(".")
    if suffix and suffix not in kinds:
        raise InputError(
            f"cannot draw a figure into a .{suffix} file {out_png}; "
            f"use one of: {', '.join('.' + k for k in sorted(kinds))}"
        )

    ok.sort(key=lambda r: (r.result.iterations, len(r.result.kept), r.id))  # type: ignore[union-attr]
    results = [r.result for r in ok if r.result is not None]
    failed = [r for r in records if r.result is None]
    n = len(ok)
    xs = list(range(n))
    fig = plt.figure(figsize=(13, 8.5), layout="constrained")
    grid = fig.add_gridspec(2, 2, width_ratios=(4, 1.3))
    ax_kept = fig.add_subplot(grid[0, 0])
    ax_cost = fig.add_subplot(grid[1, 0], sharex=ax_kept)
    ax_stop = fig.add_subplot(grid[0, 1])
    ax_iter = fig.add_subplot(grid[1, 1])

    _kept_panel(ax_kept, results, xs)
    _cost_panel(ax_cost, results, xs, [r.seconds for r in ok])
    _stop_panel(ax_stop, results, failed)
    _iterations_panel(ax_iter, results)

    if n <= _MAX_TICK_LABELS:
        ax_cost.set_xticks(xs, [r.id for r in ok], rotation=60, ha="right", fontsize=8)
    else:
        ax_cost.set_xticks([])
    ax_cost.set_xlabel("queries, sorted by iterations then documents kept")
    plt.setp(ax_kept.get_xticklabels(), visible=False)
    fig.suptitle(
        f"{title or 'batch'}: {n} runs, {len(failed)} failed", fontsize=14, fontweight="bold"
    )
    out = Path(out_png)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def _kept_panel(ax: Any, results: Sequence[RunResult], xs: Sequence[int]) -> None:
    depth = max(r.iterations for r in results)
    bottoms = [0] * len(results)
    for it in range(1, depth + 1):
        heights = [len(r.history[it - 1].kept_ids) if it <= r.iterations else 0 for r in results]
        ax.bar(
            xs,
            heights,
            bottom=bottoms,
            width=0.85,
            label=f"iteration {it}",
            color=_ITER_COLOURS[(it - 1) % len(_ITER_COLOURS)],
        )
        bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
    targets = {r.policy.get("min_relevant") for r in results}
    target = targets.pop() if len(targets) == 1 else None
    if is_int(target):
        ax.axhline(
            target, color="#333333", linestyle="--", linewidth=1, label=f"min_relevant = {target}"
        )
    ax.set_ylabel("relevant documents kept")
    ax.set_title("relevant documents found, by the iteration that found them", loc="left")
    ax.legend(loc="upper left", fontsize=9, frameon=False)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)


def _cost_panel(
    ax: Any, results: Sequence[RunResult], xs: Sequence[int], wall: Sequence[float]
) -> None:
    metric, label = _cost_metric(results)
    if metric == "seconds":
        ax.bar(xs, wall, width=0.85, color="#937860")
    else:
        bottoms = [0.0] * len(results)
        for phase, colour in _PHASE_COLOURS.items():
            values = [float(getattr(getattr(r.usage, phase), metric)) for r in results]
            if not any(values):
                continue
            ax.bar(xs, values, bottom=bottoms, width=0.85, label=phase, color=colour)
            bottoms = [b + v for b, v in zip(bottoms, values, strict=True)]
        ax.legend(loc="upper left", fontsize=9, frameon=False)
    ax.set_ylabel(label)
    ax.set_title(label + (", by phase" if metric != "seconds" else ""), loc="left")
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)


def _stop_panel(ax: Any, results: Sequence[RunResult], failed: Sequence[ResultRecord]) -> None:
    counts = Counter(r.stop_reason.value.replace("_", " ") for r in results)
    if failed:
        counts["failed (error)"] = len(failed)
    labels = sorted(counts, key=lambda k: -counts[k])
    values = [counts[k] for k in labels]
    colours = ["#C44E52" if k.startswith("failed") else "#4C72B0" for k in labels]
    ax.barh(labels, values, color=colours)
    ax.invert_yaxis()
    for y, v in enumerate(values):
        ax.text(v, y, f" {v}", va="center", fontsize=10)
    ax.set_xlim(0, max(values) * 1.25)
    ax.set_title("why runs stopped", loc="left")
    ax.tick_params(axis="y", labelsize=9)


def _iterations_panel(ax: Any, results: Sequence[RunResult]) -> None:
    counts = Counter(r.iterations for r in results)
    its = list(range(1, max(counts) + 1))
    values = [counts.get(i, 0) for i in its]
    ax.bar(its, values, color=[_ITER_COLOURS[(i - 1) % len(_ITER_COLOURS)] for i in its])
    for i, v in zip(its, values, strict=True):
        ax.text(i, v, str(v), ha="center", va="bottom", fontsize=10)
    ax.set_xticks(its)
    ax.set_xlabel("iterations")
    ax.set_ylabel("runs")
    ax.set_ylim(0, max(values) * 1.2)
    ax.set_title("iterations per run", loc="left")
