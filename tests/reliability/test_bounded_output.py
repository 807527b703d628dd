"""What the command line shows stays bounded by what it shows, not by what a results file holds,
and it refuses outputs that are no regular file before anything runs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import structlog
from runs_helpers import make_result

from corrective_rag.cli.main import main
from corrective_rag.runs.records.results import error_line, ok_line
from corrective_rag.text import display
from corrective_rag.text.display import cut

MIB = 1 << 20


@pytest.fixture(autouse=True)
def _restore_logging():
    """main() configures structlog for the process; give other tests the defaults back."""
    yield
    structlog.reset_defaults()


class Watched(str):
    """A str that counts the characters read through its methods (split, slices, iteration)."""

    read = 0

    def __getitem__(self, key):  # type: ignore[override]
        part = str.__getitem__(self, key)
        Watched.read += len(part)
        return part

    def split(self, *args, **kwargs):  # type: ignore[override]
        Watched.read += len(self)
        return str.split(self, *args, **kwargs)

    def __iter__(self):
        Watched.read += len(self)
        return str.__iter__(self)


def test_cut_reads_only_a_prefix_of_a_long_text():
    """cut(text, 50) of a 1 MiB text reads at most a prefix bounded by the width, and shows the
    same line as cutting the text's head."""
    text = "honey bees \x1b[2J make honey " * (MIB // 26)
    Watched.read = 0
    shown = cut(Watched(text), 50)
    assert 1000 >= Watched.read
    assert cut(text[:1000], 50) == shown
    assert shown.endswith("…") and 50 == display.display_width(shown)
    assert "a b" == cut("  a \n b ", 10)  # short texts are shown whole, as before


def test_cut_of_a_text_longer_than_it_reads_still_says_it_was_cut():
    """A text whose read prefix fits the width (whitespace, zero-width marks) but goes on
    beyond it ends with … rather than passing for whole."""
    assert "a…" == cut("a" + " " * 10_000 + "b", 20)
    assert cut("ab", 20) == "ab"


def _columns_measured(monkeypatch) -> list[int]:
    """Counts the characters whose terminal width is measured (every cut and table goes
    through display._char_width)."""
    calls = [0]
    real = display._char_width

    def counting(ch: str) -> int:
        calls[0] += 1
        return real(ch)

    monkeypatch.setattr(display, "_char_width", counting)
    return calls


def test_history_list_measures_only_a_prefix_of_a_huge_question(tmp_path, monkeypatch, capsys):
    """`history list` over a 1 MiB question measures a few hundred characters, not the whole
    question (it took 2.1 s a line; 82 s for a 100 MB question)."""
    question = "why " * (MIB // 4)
    results = tmp_path / "r.jsonl"
    lines = [ok_line("q1", question, make_result(question), 1.0)]
    lines.append(error_line("q2", question, RuntimeError("x" * MIB), 1.0))
    results.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    measured = _columns_measured(monkeypatch)
    assert 0 == main(["history", "list", str(results)])
    out = capsys.readouterr().out
    assert 10_000 > measured[0]
    rows = out.splitlines()[2:]
    assert 2 == len(rows)
    assert all("why why" in row and row.endswith("…") and len(row) < 300 for row in rows)


def test_history_show_bounds_a_huge_error_and_says_where_it_was_cut(tmp_path, capsys):
    """`history show` of a failed query whose error is 1 MB prints one line of at most a few
    thousand characters that says the message was cut and how long it was."""
    results = tmp_path / "r.jsonl"
    line = error_line("q1", "a question", RuntimeError("boom " * (MIB // 5)), 1.0)
    results.write_text(json.dumps(line) + "\n", encoding="utf-8")
    assert 1 == main(["history", "show", str(results), "q1"])
    captured = capsys.readouterr()
    assert "" == captured.out
    err = captured.err.strip().splitlines()
    assert 1 == len(err)
    assert err[0].startswith("corrective-rag: error: query 'q1' failed: RuntimeError: boom boom")
    assert f"(cut at 1,000 of {len('boom ' * (MIB // 5)):,} characters)" in err[0]
    assert 1200 > len(err[0])


def _queries(tmp_path: Path) -> Path:
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps({"id": "q1", "query": "honey bees"}) + "\n", encoding="utf-8")
    return path


def test_batch_refuses_a_fifo_as_its_results_file_at_once(tmp_path, capsys):
    """`batch --out FIFO` is refused with one line before anything runs (it blocked until a
    reader came, and took two Ctrl-C); nothing is written into the pipe."""
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    code = main(["batch", str(_queries(tmp_path)), "--out", str(fifo), "--store", "nowhere"])
    err = capsys.readouterr().err.strip().splitlines()
    assert 1 == code
    assert [
        f"corrective-rag: error: --out {fifo} is a named pipe (FIFO), not a regular file: "
        "write to a file"
    ] == err
    assert not (tmp_path / "nowhere").exists()


def test_batch_refuses_dev_null_as_its_results_file(tmp_path, capsys):
    """`batch --out /dev/null` is refused up front as a device (it said "results file not
    found" after running)."""
    code = main(["batch", str(_queries(tmp_path)), "--out", os.devnull, "--store", "nowhere"])
    err = capsys.readouterr().err.strip().splitlines()
    assert 1 == code
    assert [
        f"corrective-rag: error: --out {os.devnull} is a device, not a regular file: "
        "write to a file"
    ] == err


def test_every_output_flag_refuses_a_special_file(tmp_path, capsys):
    """history export --csv, plot --out and report --html refuse a FIFO the same way."""
    results = tmp_path / "r.jsonl"
    results.write_text(json.dumps(ok_line("q", "q", make_result("q"), 1.0)) + "\n", "utf-8")
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    for argv in (
        ["history", "export", str(results), "--csv", str(fifo)],
        ["history", "report", str(results), "--html", str(fifo)],
    ):
        assert 1 == main(argv), argv
        assert "is a named pipe (FIFO), not a regular file" in capsys.readouterr().err
