"""The reports are bounded for any input: long fields are cut with their length shown, and a
results file of thousands of questions gives a page of a few MB that says what it left out."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.runs.records.results import ResultRecord, error_line, ok_line, read_results
from corrective_rag.runs.reports.html import render_html
from corrective_rag.runs.reports.report import render_run
from corrective_rag.runs.reports.summary import summarize
from corrective_rag.testing.fakes import ListRetriever, ScriptedEvaluator, ScriptedRewriter
from corrective_rag.types import Document, RunResult

CORPUS = [Document("bees", "Honey bees make honey."), Document("wasp", "Wasps hunt insects.")]
FEW_MB = 5_000_000


def _result(question: str = "How do bees make honey?") -> RunResult:
    orch = CorrectiveRAGOrchestrator(
        ListRetriever(CORPUS),
        ScriptedEvaluator({"bees": 0.9, "wasp": 0.1}),
        ScriptedRewriter(["bees honey nectar"]),
        top_k=2,
        max_iterations=2,
        min_relevant=5,
    )
    return orch.run(question)


def _bloated(result: RunResult) -> RunResult:
    """Every verdict with a 100 KB reasoning and three 50 KB `missing` entries."""
    history = tuple(
        dataclasses.replace(
            rec,
            verdicts=tuple(
                dataclasses.replace(v, reasoning="r" * 100_000, missing=("m" * 50_000,) * 3)
                for v in rec.verdicts
            ),
        )
        for rec in result.history
    )
    return dataclasses.replace(result, question="q" * 200_000, history=history)


def _records(path: Path, lines: list[dict]) -> list[ResultRecord]:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return read_results(path)


def test_long_fields_are_cut_with_their_length_shown(tmp_path):
    """A 100 KB reasoning, 3 x 50 KB `missing` and a 200 KB question give a page of kilobytes."""
    result = _bloated(_result())
    lines = [ok_line(f"q{n}", "q" * 200_000, result, 1.0) for n in range(4)]
    lines.append(error_line("e", "x", RuntimeError("boom " * 100_000), 0.1))
    page = render_html(_records(tmp_path / "r.jsonl", lines))
    assert len(page.encode()) < 1_000_000
    # the reasoning: capped when the verdict is made (1,000 characters), cut again by the page
    assert "r" * 600 not in page
    assert "of 200,000 characters)" in page
    assert "of 500,000 characters)" in page  # the error message


def test_thousands_of_questions_give_a_page_of_a_few_mb(tmp_path):
    """3,000 questions: the summary counts them all; the table and timelines say what is left."""
    result = _result()
    lines = [ok_line(f"q{n}", f"question {n}", result, 1.0) for n in range(3000)]
    records = _records(tmp_path / "r.jsonl", lines)
    page = render_html(records)
    assert len(page.encode()) < FEW_MB
    assert 'id="rows-left-out"' in page and 'id="runs-left-out"' in page
    assert "<b>3000</b><span>questions</span>" in page
    assert 3000 == summarize(records).queries


def test_many_error_types_are_summarised(tmp_path):
    """A file of 500 distinct error types draws at most 30 bars, and says how many more."""
    errors = [type(f"E{n}" * 50, (Exception,), {})("m") for n in range(500)]
    records = _records(
        tmp_path / "r.jsonl", [error_line(f"e{n}", "x", e, 0.1) for n, e in enumerate(errors)]
    )
    assert "470 more reasons and error types, 470 runs" in render_html(records)
    text = summarize(records).render()
    assert len(text) < 5_000
    assert "490 more" in text


def test_the_text_report_cuts_a_long_question():
    """`history show` prints a 200 KB question as a cut line with its length."""
    shown = render_run(_bloated(_result()))
    assert len(shown) < 50_000
    assert "of 200,000 characters)" in shown
