import dataclasses
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corrective_rag.errors import InputError
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.runs.records.history import HistoryStore, result_from_json, result_to_json
from corrective_rag.runs.reports.diff import diff_iterations, diff_runs
from corrective_rag.runs.reports.table import render_table
from corrective_rag.testing.fakes import (
    ListRetriever,
    ScriptedEvaluator,
    ScriptedGenerator,
    ScriptedRewriter,
)
from corrective_rag.types import Document, RunResult

QUESTION = "How do tides depend on the moon?"
CORPUS = [
    Document(f"t{i}", f"Tide note {i}: the moon pulls the ocean. Second sentence {i}.", {"n": i})
    for i in range(10)
]


def run(
    scores: dict[str, float | None], *, max_iterations: int = 3, refine: bool = False
) -> RunResult:
    orch = CorrectiveRAGOrchestrator(
        ListRetriever(CORPUS),
        ScriptedEvaluator(scores),
        ScriptedRewriter(["moon tide pull ocean", "tidal force moon"]),
        generator=ScriptedGenerator("The moon's pull raises tides."),
        top_k=2,
        max_iterations=max_iterations,
        refine=refine,
    )
    return orch.run(QUESTION)


score_maps = st.dictionaries(
    st.sampled_from([d.id for d in CORPUS]),
    st.one_of(st.none(), st.floats(min_value=0.0, max_value=1.0, allow_nan=False)),
)


@settings(max_examples=40, deadline=None)
@given(score_maps, st.integers(min_value=1, max_value=3))
def test_json_round_trip_is_exact(scores: dict[str, float | None], iterations: int) -> None:
    """Any run, with graded and ungraded verdicts, survives result_to_json/result_from_json."""
    result = run(scores, max_iterations=iterations)
    assert result == result_from_json(result_to_json(result))


def test_round_trip_keeps_strips_answer_and_metadata() -> None:
    """A refined run with an answer round-trips with strips, answer and metadata intact."""
    result = run({"t0": 0.9, "t1": 0.8, "t2": 0.9}, refine=True)
    back = result_from_json(result_to_json(result, indent=2))
    assert result == back
    assert 0 == back.kept[-1].document.metadata["n"] - int(back.kept[-1].document.id[1:])


def test_bad_json_raises_input_error() -> None:
    """Text that is not a run result raises InputError naming the problem."""
    with pytest.raises(InputError):
        result_from_json("{not json")
    with pytest.raises(InputError, match="run_id"):
        result_from_json(json.dumps({"question": "q"}))


def test_non_finite_numbers_raise_input_error() -> None:
    """A result holding NaN cannot be written exactly, so writing it raises InputError."""
    result = dataclasses.replace(run({"t0": 0.9}), seconds=float("nan"))
    with pytest.raises(InputError, match="JSON"):
        result_to_json(result)


def test_store_appends_lists_and_gets(tmp_path: Path) -> None:
    """Appended runs come back in order and by id."""
    store = HistoryStore(tmp_path / "sub" / "runs.jsonl")
    first, second = run({"t0": 0.9}), run({"t1": 0.9})
    store.append(first)
    store.append(second)
    assert [first, second] == store.list()
    assert second == store.get(second.run_id)
    assert [first, second] == store.for_question(QUESTION)
    with pytest.raises(KeyError):
        store.get("missing")


def test_store_survives_a_torn_last_line(tmp_path: Path) -> None:
    """A half-written last line is skipped, and the next append starts on a fresh line."""
    path = tmp_path / "runs.jsonl"
    store = HistoryStore(path)
    first = run({"t0": 0.9})
    store.append(first)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(result_to_json(first)[:50])
    assert [first] == store.list()
    second = run({"t1": 0.9})
    store.append(second)
    assert [first, second] == store.list()


def test_store_reports_a_foreign_line(tmp_path: Path) -> None:
    """A valid JSON line that is not a run result is corruption, reported with its line number."""
    path = tmp_path / "runs.jsonl"
    path.write_text('{"hello": 1}\n', encoding="utf-8")
    with pytest.raises(InputError, match=":1:"):
        HistoryStore(path).list()


def test_table_has_one_row_per_iteration() -> None:
    """The table has a header, a rule, one row per iteration and a stop line."""
    result = run({"t4": 0.9}, max_iterations=3)
    lines = render_table(result).splitlines()
    assert 2 + result.iterations + 1 == len(lines)
    assert lines[0].split()[:3] == ["it", "query", "new"]
    assert "scripted rewrite 1" in render_table(result, width=200).splitlines()[2]
    column = lines[0].index("rewrite")
    assert "- " == lines[-2][column : column + 2]  # the last iteration has no rewrite
    assert lines[-1].startswith(f"stop: {result.stop_reason.value}")


def test_diff_iterations_shows_query_and_kept_changes() -> None:
    """Between two iterations the diff shows the new query, new retrieved ids and new kept ids."""
    result = run({"t2": 0.9}, max_iterations=2)
    diff = diff_iterations(result, 1, 2)
    assert f"- query: {QUESTION}" in diff
    assert "+ query: moon tide pull ocean" in diff
    assert "+ kept t2" in diff
    assert "+ retrieved t2" in diff
    with pytest.raises(InputError):
        diff_iterations(result, 1, 9)


def test_diff_runs_shows_changed_verdicts() -> None:
    """Two runs of one question that judge a document differently show the verdict change."""
    a, b = run({"t0": 0.2}), run({"t0": 0.9})
    diff = diff_runs(a, b)
    assert "~ verdict t0: low 0.20/0.90 -> high 0.90/0.90" in diff
    assert "+ kept t0" in diff


def test_history_readers_share_one_corruption_policy(tmp_path: Path) -> None:
    """HistoryStore and read_results agree on one file: a torn last line is skipped with a
    warning, a damaged line before it is an error naming that line."""
    from structlog.testing import capture_logs

    from corrective_rag.runs.records.results import read_results

    path = tmp_path / "runs.jsonl"
    first, second = run({"t0": 0.9}), run({"t1": 0.9})
    whole = (result_to_json(first) + "\n").encode()
    path.write_bytes(whole + whole[:40])
    with capture_logs() as logs:
        assert [first] == HistoryStore(path).list()
        assert [first.run_id] == [r.id for r in read_results(path)]
    assert 2 == sum(e["event"] == "jsonl_torn_line_skipped" for e in logs)
    path.write_bytes(whole + whole[:40] + b"\n" + (result_to_json(second) + "\n").encode())
    with pytest.raises(InputError, match="line 2"):
        HistoryStore(path).list()
    with pytest.raises(InputError, match="line 2"):
        read_results(path)


def test_an_append_after_a_torn_line_cuts_it_off(tmp_path: Path) -> None:
    """Appending after a crash mid-write cuts the torn line, so it never sits inside the file
    (where the shared policy would call it damage); a whole line lacking its newline stays."""
    path = tmp_path / "runs.jsonl"
    store = HistoryStore(path)
    first, second, third = run({"t0": 0.9}), run({"t1": 0.9}), run({"t2": 0.9})
    store.append(first)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(result_to_json(second)[:50])
    store.append(second)
    assert [first, second] == store.list()
    with path.open("a", encoding="utf-8") as fh:
        fh.write(result_to_json(third))  # whole, no newline
    store.append(first)
    assert [first, second, third, first] == store.list()
