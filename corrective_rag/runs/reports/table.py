"""One run as a table: one row per iteration, then how and why it stopped."""

from __future__ import annotations

from corrective_rag.runs.reports.cells import NONE, rewrite_cell
from corrective_rag.text.display import cut, display_width, pad, printable
from corrective_rag.types import RunResult

# render_table: its home is corrective_rag.runs
__all__: list[str] = []

_COLUMNS = ("it", "query", "new", "kept", "drop", "ungr", "action", "rewrite", "calls/tokens", "s")


TABLE_CELL_WIDTH = 40  # columns of the query and rewrite cells


def render_table(result: RunResult, *, width: int = TABLE_CELL_WIDTH) -> str:
    """One row per iteration: query, new/kept/dropped/ungraded counts, action, rewrite, usage."""
    rows = [list(_COLUMNS)]
    for rec in result.history:
        usage = rec.usage.total
        action = rec.action.value if rec.action else NONE
        if rec.fallback:
            action += f"+{rec.fallback.value}"
        rows.append(
            [
                str(rec.index),
                cut(rec.query, width),
                str(len(rec.verdicts)),
                str(len(rec.kept_ids)),
                str(len(rec.dropped_ids)),
                str(len(rec.ungraded_ids)),
                action,
                cut(rewrite_cell(rec), width),
                f"{usage.llm_calls}/{usage.total_tokens}",
                f"{rec.seconds:.2f}",
            ]
        )
    widths = [max(display_width(row[i]) for row in rows) for i in range(len(_COLUMNS))]
    lines = ["  ".join(pad(cell, w) for cell, w in zip(row, widths, strict=True)) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    total = result.usage.total
    lines.append(
        f"stop: {result.stop_reason.value} ({printable(result.stop_detail)}); "
        f"kept {len(result.kept)}; "
        f"{total.llm_calls} calls, {total.total_tokens} tokens, {result.seconds:.2f} s"
    )
    return "\n".join(line.rstrip() for line in lines)
