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
