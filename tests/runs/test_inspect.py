import csv
import json

import pytest
from runs_helpers import make_result

from corrective_rag.errors import InputError, LLMTimeoutError
from corrective_rag.runs.records.results import error_line, latest_records, ok_line, read_results
from corrective_rag.runs.reports.report import (
    CSV_FIELDS,
    export_csv,
    find_record,
    format_table,
    list_runs,
    render_kept,
    render_run,
)
from corrective_rag.types import StopReason


@pytest.fixture
def results_file(tmp_path):
    path = tmp_path / "r.jsonl"
    lines = [
        error_line("b", "the b question", LLMTimeoutError("read timed out"), 0.2),
        ok_line(
            "a", "the a question", make_result("the a question", kept_per_iteration=(1, 2)), 1.5
        ),
        ok_line(
            "b",
            "the b question",
            make_result(
                "the b question", kept_per_iteration=(0, 1, 1), stop=StopReason.ITERATION_CAP
            ),
            2.5,
        ),
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_latest_records_keep_the_last_line_of_each_id(results_file):
    """A rerun's ok line replaces the earlier error line of the same id."""
    records = latest_records(read_results(results_file))
    assert [("b", "ok"), ("a", "ok")] == [(r.id, r.status) for r in records]


def test_format_table_aligns_columns():
    """Text columns are left-aligned and numeric columns right-aligned under a rule."""
    assert " n  name\n--  ----\n 1  ab\n10  c" == format_table(
        ["n", "name"], [[1, "ab"], [10, "c"]]
    )


def test_render_run_shows_each_iteration_and_the_stop_reason(results_file):
    """The run table has one row per iteration, the rewrites, and the stop reason."""
    rec = find_record(read_results(results_file), "b")
    text = render_run(rec.result)
    rows = [line.strip() for line in text.splitlines() if line.strip()[:1].isdigit()]
    assert ["1", "2", "3"] == [row.split()[0] for row in rows]
    assert "-> the b question rewrite 1 (add terms)" in text  # whole in its table cell
    assert "rewrites:" not in text  # so not repeated under a heading
    assert "iteration_cap" in text
    assert "text of" in render_kept(rec.result)


def test_render_run_repeats_in_full_only_the_rewrites_the_table_cut():
    """A rewrite too long for its cell is listed whole under 'rewrites:'; a short one is not."""
    long = make_result("which long question " + "word " * 12, kept_per_iteration=(1, 1, 2))
    text = render_run(long)
    listed = text.split("rewrites:\n", 1)[1].splitlines()
    assert ["  it 1: ->", "  it 2: ->"] == [line[:10] for line in listed]
    assert all(line.endswith("(add terms)") for line in listed)
    short = render_run(make_result("short one", kept_per_iteration=(1, 2)))
    assert "rewrites:" not in short


def test_list_runs_shows_errors_and_results(results_file):
    """Listing all lines shows the error with its type and the ok runs with their stop reason."""
    text = list_runs(read_results(results_file))
    assert "LLMTimeoutError: read timed out" in text
    assert 2 == text.count("enough_relevant") + text.count("iteration_cap")


def test_find_record_names_a_missing_id(results_file):
    """Looking up an id that is not in the file is an InputError naming it."""
    with pytest.raises(InputError, match="no run with id 'zz'"):
        find_record(read_results(results_file), "zz")


def test_export_csv_writes_one_row_per_iteration(results_file, tmp_path):
    """The CSV has the documented header and 2 + 3 iteration rows (errors have none)."""
    out = tmp_path / "x" / "it.csv"
    assert 5 == export_csv(latest_records(read_results(results_file)), out)
    rows = list(csv.DictReader(out.open()))
    assert list(CSV_FIELDS) == list(rows[0].keys())
    assert [("b", "1"), ("b", "2"), ("b", "3"), ("a", "1"), ("a", "2")] == [
        (r["id"], r["iteration"]) for r in rows
    ]
    assert "the b question rewrite 1" == rows[0]["rewrite_query"]


def test_history_store_lines_read_as_ok_records(tmp_path):
    """A file of bare RunResult lines (the HistoryStore format) reads as ok records by run id."""
    from corrective_rag.runs.records.codec import to_dict

    res = make_result("stored question")
    path = tmp_path / "h.jsonl"
    path.write_text(json.dumps(to_dict(res)) + "\n")
    [rec] = read_results(path)
    assert (res.run_id, "stored question", res) == (rec.id, rec.query, rec.result)
