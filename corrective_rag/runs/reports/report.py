"""Read back what runs did: list runs, show one as a table, diff iterations or runs, export CSV.

Everything here is a pure function from results (or records of a results file) to text or rows,
so the command line only prints what these return.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from corrective_rag.errors import InputError, cut_text
from corrective_rag.runs.records.results import ResultRecord
from corrective_rag.runs.reports.cells import NONE, rewrite_cell
from corrective_rag.runs.reports.table import TABLE_CELL_WIDTH, render_table
from corrective_rag.text.display import cut, display_width, pad, printable
from corrective_rag.text.secrets import redact_tree
from corrective_rag.types import RunResult

__all__ = [
    "CSV_FIELDS",
    "export_csv",
    "find_record",
    "format_table",
    "iteration_rows",
    "list_runs",
    "render_kept",
    "render_run",
]


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Left-aligned plain-text table; numbers are right-aligned.

    Cells are escaped with :func:`~corrective_rag.text.display.printable` and aligned by
    terminal columns, so control characters and wide characters cannot break the layout.
    """
    cells = [[printable(str(c)) for c in row] for row in [headers, *rows]]
    widths = [max(display_width(r[i]) for r in cells) for i in range(len(headers))]
    numeric = [
        all(isinstance(row[i], int | float) for row in rows) if rows else False
        for i in range(len(headers))
    ]

    def line(row: list[str]) -> str:
        parts = [pad(c, w, right=num) for c, w, num in zip(row, widths, numeric, strict=True)]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(cells[0]), rule, *(line(r) for r in cells[1:])])


FULL_REWRITE_WIDTH = 300  # a rewrite and its rationale on one line, cut only when pathological
QUESTION_CHARS = 1000  # of the question above a run's table; a longer one says its length


def render_run(result: RunResult) -> str:
    """The per-iteration table of one run, its question, and in full each rewrite the table cut.

    The table itself is :func:`corrective_rag.runs.reports.table.render_table`.
    """
    # Only the rewrites the table had to cut are repeated in full: a heading over rewrites the
    # reader has just read whole is noise.
    cells = [(rec.index, rewrite_cell(rec)) for rec in result.history if rec.rewrite is not None]
    rewrites = [
        f"  it {index}: {cut(cell, FULL_REWRITE_WIDTH)}"
        for index, cell in cells
        if cut(cell, TABLE_CELL_WIDTH) != cut(cell, len(cell) + 1)
    ]
    question = cut_text(result.question, QUESTION_CHARS)
    lines = [f"question: {printable(question)}", render_table(result)]
    if rewrites:
        lines += ["rewrites:", *rewrites]
    return "\n".join(lines)


def render_kept(result: RunResult, *, text_width: int = 90) -> str:
    """The kept documents, best first: id, where found, score and a cut of the text."""
    if not result.kept:
        return "no documents kept"
    rows = [
        [
            k.document.id,
            k.iteration,
            k.rank,
            f"{k.verdict.score:.2f}" if k.verdict.score is not None else NONE,
            cut(k.document.text, text_width),
        ]
        for k in result.kept
    ]
    return format_table(["id", "it", "rank", "score", "text"], rows)


def list_runs(records: Sequence[ResultRecord], *, query_width: int = 50) -> str:
    """One line per query: id, status, iterations, kept, stop reason (or error), seconds."""
    rows = []
    for rec in records:
        res = rec.result
        if res is not None:
            end = res.stop_reason.value
            rows.append(
                [
                    rec.id,
                    rec.status,
                    res.iterations,
                    len(res.kept),
                    end,
                    f"{rec.seconds:.2f}",
                    cut(rec.query, query_width),
                ]
            )
        else:
            end = f"{rec.error.get('type', '')}: {cut(rec.error.get('message', ''), 40)}"
            rows.append(
                [
                    rec.id,
                    rec.status,
                    NONE,
                    NONE,
                    end,
                    f"{rec.seconds:.2f}",
                    cut(rec.query, query_width),
                ]
            )
    return format_table(["id", "status", "iters", "kept", "stop / error", "secs", "query"], rows)


def find_record(records: Sequence[ResultRecord], key: str) -> ResultRecord:
    """The last record whose query id or run id is ``key``.

    Raises:
        InputError: when no record matches.
    """
    for rec in reversed(records):
        if rec.id == key or (rec.result is not None and rec.result.run_id == key):
            return rec
    raise InputError(f"no run with id {key!r} in the results")


CSV_FIELDS = (
    "id",
    "run_id",
    "question",
    "iteration",
    "query",
    "retrieved",
    "skipped",
    "judged",
    "kept",
    "dropped",
    "ungraded",
    "action",
    "fallback",
    "rewrite_query",
    "rewrite_rejected",
    "llm_calls",
    "grading_calls",
    "rewriting_calls",
    "prompt_tokens",
    "completion_tokens",
    "cost_usd",
    "seconds",
    "stop_reason",
)


def iteration_rows(record: ResultRecord) -> list[dict[str, Any]]:
    """One CSV-ready row per iteration of an ok record (none for an error record)."""
    res = record.result
    if res is None:
        return []
    rows = []
    for rec in res.history:
        total = rec.usage.total
        rows.append(
            {
                "id": record.id,
                "run_id": res.run_id,
                "question": res.question,
                "iteration": rec.index,
                "query": rec.query,
                "retrieved": len(rec.retrieved),
                "skipped": len(rec.skipped_ids),
                "judged": len(rec.verdicts),
                "kept": len(rec.kept_ids),
                "dropped": len(rec.dropped_ids),
                "ungraded": len(rec.ungraded_ids),
                "action": rec.action.value if rec.action else "",
                "fallback": rec.fallback.value if rec.fallback else "",
                "rewrite_query": (rec.rewrite.query or "") if rec.rewrite else "",
                "rewrite_rejected": (rec.rewrite.rejected or "") if rec.rewrite else "",
                "llm_calls": total.llm_calls,
                "grading_calls": rec.usage.grading.llm_calls,
                "rewriting_calls": rec.usage.rewriting.llm_calls,
                "prompt_tokens": total.prompt_tokens,
                "completion_tokens": total.completion_tokens,
                "cost_usd": total.cost_usd,
                "seconds": rec.seconds,
                "stop_reason": res.stop_reason.value,
            }
        )
    return rows


def export_csv(
    records: Sequence[ResultRecord],
    out_path: str | os.PathLike[str],
    *,
    secrets: Sequence[str] = (),
) -> int:
    """Write one CSV row per iteration of every ok record; return the number of rows.

    ``secrets`` (an API key) are replaced by ``***`` in every cell.
    """
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with out.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(CSV_FIELDS))
        writer.writeheader()
        for record in records:
            for row in iteration_rows(record):
                writer.writerow(redact_tree(row, secrets))
                count += 1
    return count
