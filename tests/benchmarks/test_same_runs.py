"""benchmarks/same_runs.py: two folders of loop reports compared query by query."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.same_runs import main


def _report(folder: Path, name: str, kept: list[str]) -> None:
    folder.mkdir(exist_ok=True)
    run = {"query": "q1", "stop_reason": "enough_relevant", "trace": {"kept_ids": kept}}
    report = {"corrective": {"recall": 1.0}, "per_query": [run]}
    (folder / name).write_text(json.dumps(report), encoding="utf-8")


def test_the_same_runs_pass_and_a_changed_keep_fails(tmp_path: Path, capsys) -> None:
    before, same, other = tmp_path / "before", tmp_path / "same", tmp_path / "other"
    _report(before, "a.json", ["d1", "d2"])
    _report(same, "a.json", ["d1", "d2"])
    _report(other, "a.json", ["d2", "d1"])  # the same set, another order: a different run
    assert 0 == main([str(before), str(same)])
    assert "a.json: SAME" in capsys.readouterr().out
    assert 1 == main([str(before), str(other)])
    assert "query q1: trace" in capsys.readouterr().out


def test_a_missing_report_fails(tmp_path: Path, capsys) -> None:
    _report(tmp_path / "before", "a.json", ["d1"])
    (tmp_path / "after").mkdir()
    assert 1 == main([str(tmp_path / "before"), str(tmp_path / "after")])
    assert "missing" in capsys.readouterr().out


def _verdict(**change) -> dict:
    verdict = {
        "relevant": True,
        "score": 0.9,
        "confidence": 0.8,
        "reasoning": "names the opera",
        "missing": [],
    }
    return {**verdict, **change}


def _traced(folder: Path, name: str, verdict: dict) -> None:
    folder.mkdir(exist_ok=True)
    iteration = {"query": "q1", "judged": ["d1"], "verdicts": [verdict], "kept": ["d1"]}
    run = {"query": "q1", "trace": {"iterations": [iteration], "kept_ids": ["d1"]}}
    (folder / name).write_text(json.dumps({"per_query": [run]}), encoding="utf-8")


def test_a_verdict_that_keeps_its_flag_but_not_its_content_differs(tmp_path: Path, capsys) -> None:
    """Two runs whose verdict keeps relevant=True but changes score, confidence, reasoning or
    missing are not the same, and the line names the field."""
    _traced(tmp_path / "before", "a.json", _verdict())
    for field, value in [
        ("score", 0.7),
        ("confidence", 0.5),
        ("reasoning", ""),
        ("missing", ["x"]),
    ]:
        after = tmp_path / f"after-{field}"
        _traced(after, "a.json", _verdict(**{field: value}))
        assert 1 == main([str(tmp_path / "before"), str(after)]), field
        assert f"trace.iterations[0].verdicts[0].{field}:" in capsys.readouterr().out


def test_the_loop_trace_holds_the_whole_verdict() -> None:
    """benchmarks/loop.py's trace records each verdict's score, confidence, reasoning and
    missing, so two runs that differ only there have different traces."""
    from dataclasses import replace

    from runs_helpers import make_result

    from benchmarks.loop import trace

    result = make_result("q")
    record = result.history[0]
    changed = replace(record.verdicts[0], reasoning="another reason", missing=("act three",))
    other = replace(
        result,
        history=(replace(record, verdicts=(changed, *record.verdicts[1:])), *result.history[1:]),
    )
    assert trace(result) != trace(other)
    first = trace(other)["iterations"][0]["verdicts"][0]
    assert {"reasoning": "another reason", "missing": ["act three"]}.items() <= first.items()
    assert {"relevant", "score", "confidence"} <= set(first)


def test_a_skipped_or_one_sided_file_fails(tmp_path: Path, capsys) -> None:
    """A file that is no loop report, a file only in the after folder, and a report from an
    older loop.py (no whole verdicts) each make the comparison exit 1."""
    before, after = tmp_path / "before", tmp_path / "after"
    _traced(before, "a.json", _verdict())
    _traced(after, "a.json", _verdict())
    assert 0 == main([str(before), str(after)])
    capsys.readouterr()
    (before / "notes.json").write_text("{}", encoding="utf-8")
    (after / "notes.json").write_text("{}", encoding="utf-8")
    assert 1 == main([str(before), str(after)])
    assert (
        "notes.json: no per_query (not a loop.py report): not compared" in capsys.readouterr().out
    )
    (before / "notes.json").unlink()
    (after / "notes.json").unlink()
    _traced(after, "b.json", _verdict())
    assert 1 == main([str(before), str(after)])
    assert f"b.json: missing in {before}" in capsys.readouterr().out
    (after / "b.json").unlink()
    old = {"query": "q1", "judged": ["d1"], "relevant": [True], "kept": ["d1"]}
    run = {"query": "q1", "trace": {"iterations": [old]}}
    for folder in (before, after):
        (folder / "a.json").write_text(json.dumps({"per_query": [run]}), encoding="utf-8")
    assert 1 == main([str(before), str(after)])
    assert "without whole verdicts" in capsys.readouterr().out
