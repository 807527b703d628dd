"""A batch's inputs on resume and in the queries file: changed questions, ids and blank text."""

import json

import pytest
from runs_helpers import make_result
from structlog.testing import capture_logs

from corrective_rag.cli.main import build_parser
from corrective_rag.errors import InputError
from corrective_rag.inputs import check_query
from corrective_rag.runs.execution.batch import run_batch
from corrective_rag.runs.execution.queries import Query, read_queries
from corrective_rag.runs.records.results import latest_records, read_results


def _batch(tmp_path, questions, calls, **kwargs):
    def run(question: str):
        calls.append(question)
        return make_result(question)

    queries = [Query(qid, text) for qid, text in questions]
    return run_batch(queries, run, out_path=tmp_path / "r.jsonl", progress=False, **kwargs)


def test_resume_warns_naming_the_ids_whose_question_changed(tmp_path):
    """A changed question under a done id keeps its old answer, with a warning naming the id."""
    calls: list[str] = []
    _batch(tmp_path, [("a", "alpha"), ("b", "beta")], calls)
    calls.clear()
    with capture_logs() as logs:
        _batch(tmp_path, [("a", "alpha"), ("b", "beta, edited")], calls)
    assert [] == calls
    [warning] = [e for e in logs if e["event"] == "batch_questions_changed"]
    assert (["b"], 1, "warning") == (warning["ids"], warning["count"], warning["log_level"])
    assert "rerun-changed" in warning["action"]


def test_rerun_changed_runs_only_the_changed_questions_again(tmp_path):
    """With rerun_changed the changed id runs again and its new answer is the one read back."""
    calls: list[str] = []
    _batch(tmp_path, [("a", "alpha"), ("b", "beta")], calls)
    calls.clear()
    summary = _batch(tmp_path, [("a", "alpha"), ("b", "beta, edited")], calls, rerun_changed=True)
    assert ["beta, edited"] == calls
    assert 1 == summary.skipped
    latest = {r.id: r for r in latest_records(read_results(tmp_path / "r.jsonl"))}
    assert "beta, edited" == latest["b"].result.question


def test_the_batch_command_offers_rerun_changed():
    """`batch --rerun-changed` reaches the batch runner's option."""
    args = build_parser().parse_args(["batch", "q.jsonl", "--out", "o.jsonl", "--rerun-changed"])
    assert True is args.rerun_changed
    assert (
        False is build_parser().parse_args(["batch", "q.jsonl", "--out", "o.jsonl"]).rerun_changed
    )


def test_a_query_id_is_bounded_like_a_document_id(tmp_path):
    """An id of 513 characters is refused with its line; 512 are accepted."""
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps({"id": "x" * 512, "query": "q"}) + "\n")
    assert 1 == len(read_queries(path))
    path.write_text(json.dumps({"id": "x" * 100_000, "query": "q"}) + "\n")
    with pytest.raises(InputError, match="line 1: query id longer than 512 characters"):
        read_queries(path)


@pytest.mark.parametrize("text", ["\u200b", "\u200b\u2060\ufeff ", "\u3164", "\ufe0f\u200d"])
def test_a_question_of_invisible_characters_is_empty(tmp_path, text):
    """Zero-width, joiner, BOM and filler characters alone are as empty as whitespace."""
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps({"id": "a", "query": text}) + "\n")
    with pytest.raises(InputError, match="line 1: missing or empty 'query'"):
        read_queries(path)
    with pytest.raises(InputError, match="empty or only whitespace and invisible"):
        check_query(text)
    assert "a\u200bb" == check_query("a\u200bb")


@pytest.mark.parametrize(
    ("second", "message"),
    [
        ("caf\u00e9", "duplicate id 'café'"),
        ("cafe\u0301", "differ only in Unicode normalisation or surrounding spaces"),
        ("caf\u00e9 ", "differ only in Unicode normalisation or surrounding spaces"),
    ],
)
def test_ids_that_look_the_same_are_refused(tmp_path, second, message):
    """Ids equal after NFC and stripping are refused in the file and in a list of queries."""
    path = tmp_path / "q.jsonl"
    lines = [{"id": "caf\u00e9", "query": "one"}, {"id": second, "query": "two"}]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    with pytest.raises(InputError, match=f"line 2: .*{message}"):
        read_queries(path)
    with pytest.raises(InputError, match=message):
        _batch(tmp_path, [("caf\u00e9", "one"), (second, "two")], [])
