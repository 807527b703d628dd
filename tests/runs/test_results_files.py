"""Crafted or hand-edited results files: every defect is an InputError naming file and line."""

import copy
import json
from pathlib import Path

import pytest
from runs_helpers import make_result

from corrective_rag.cli.main import main
from corrective_rag.errors import InputError
from corrective_rag.runs.records.history import HistoryStore
from corrective_rag.runs.records.results import ok_line, read_results

HISTORY_COMMANDS = [
    ["history", "list", "{r}"],
    ["history", "stats", "{r}"],
    ["history", "show", "{r}", "a"],
    ["history", "export", "{r}", "--csv", "{tmp}/o.csv"],
    ["history", "report", "{r}", "--html", "{tmp}/o.html"],
]


def _line() -> dict:
    return ok_line("a", "alpha question", make_result("alpha question"), 1.0)


def _write(path: Path, text: str, prefix: bytes = b"") -> Path:
    path.write_bytes(prefix + text.encode("utf-8") + b"\n")
    return path


def _edited(**changes: object) -> str:
    """The JSON text of a results line with one iteration's or verdict's field edited."""
    obj = copy.deepcopy(_line())
    for key, value in changes.items():
        target, field = key.split("__")
        node = obj["result"]["history"][0]
        if target == "verdict":
            node = node["verdicts"][0]
        node[field] = value
    return json.dumps(obj)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (json.dumps(_line()).replace('"seconds": 1.0', '"seconds": ' + "9" * 400), "400 digits"),
        (json.dumps(_line()).replace('"seconds": 1.0', '"seconds": Infinity'), "finite"),
        (json.dumps(_line()).replace('"seconds": 1.0', '"seconds": -1'), "finite number >= 0"),
        (_edited(iteration__index=99), "iteration index 99, expected 1"),
        (_edited(iteration__index=-7), "iteration index -7, expected 1"),
        (_edited(iteration__seconds=10**400), "out of range"),
        (_edited(iteration__seconds=float("inf")).replace("Infinity", "1e999"), "finite"),
        (_edited(verdict__score=5), "score 5.0 not in 0..1"),
        (_edited(verdict__relevant="yes"), "relevant: expected bool, got 'yes'"),
    ],
    ids=[
        "huge-seconds",
        "inf-seconds",
        "negative-seconds",
        "index-99",
        "index-minus-7",
        "huge-iteration-seconds",
        "inf-iteration-seconds",
        "score-5",
        "relevant-yes",
    ],
)
def test_a_crafted_line_is_an_input_error_naming_file_and_line(tmp_path, text, message):
    """Each crafted value is refused on reading with the file, the line and what is wrong."""
    path = _write(tmp_path / "r.jsonl", text)
    with pytest.raises(InputError) as info:
        read_results(path)
    assert f"{path}: line 1" in str(info.value)
    assert message in str(info.value)


def test_a_history_store_line_with_a_bad_verdict_names_file_and_line(tmp_path):
    """HistoryStore's reader also names the file and line of a verdict out of range."""
    obj = json.loads(_edited(verdict__confidence=-1))["result"]
    path = _write(tmp_path / "h.jsonl", json.dumps(obj))
    with pytest.raises(InputError, match=rf"{path}:1: .*confidence -1\.0 not in 0\.\.1"):
        HistoryStore(path).list()


def test_a_valid_surrogate_pair_escape_is_text(tmp_path):
    """An escaped surrogate pair is one character (an emoji), read without complaint."""
    text = json.dumps(_line()).replace("alpha question", "alpha \\ud83d\\ude00")
    [record] = read_results(_write(tmp_path / "r.jsonl", text))
    assert "alpha \U0001f600" == record.query


def test_a_results_file_with_a_byte_order_mark_reads(tmp_path):
    """A results file saved with a UTF-8 byte order mark reads as the same file without one."""
    plain = read_results(_write(tmp_path / "a.jsonl", json.dumps(_line())))
    marked = read_results(_write(tmp_path / "b.jsonl", json.dumps(_line()), prefix=b"\xef\xbb\xbf"))
    assert [r.result for r in plain] == [r.result for r in marked]
    store = _write(tmp_path / "h.jsonl", json.dumps(_line()["result"]), prefix=b"\xef\xbb\xbf")
    assert [plain[0].result] == HistoryStore(store).list()


@pytest.mark.parametrize("argv", HISTORY_COMMANDS, ids=lambda argv: argv[1])
@pytest.mark.parametrize(
    "text",
    [
        json.dumps(_line()).replace('"seconds": 1.0', '"seconds": ' + "9" * 400),
        _edited(iteration__index=99),
    ],
    ids=["huge-seconds", "index-99"],
)
def test_history_commands_say_what_is_wrong_not_internal_error(tmp_path, capsys, argv, text):
    """Every history command exits 1 with the file and line, never an 'internal error'."""
    path = _write(tmp_path / "r.jsonl", text)
    args = [a.format(r=path, tmp=tmp_path) for a in argv]
    assert 1 == main(args)
    err = capsys.readouterr().err
    assert "internal error" not in err
    assert f"{path}: line 1" in err


@pytest.mark.parametrize("argv", HISTORY_COMMANDS, ids=lambda argv: argv[1])
def test_a_lone_surrogate_escape_is_read_as_its_escape_text(tmp_path, capsys, argv):
    """A lone \\ud800 escape (the batch writer's way with text it cannot encode) reads as the
    six characters of its escape, so every history command, CSV export included, succeeds."""
    text = json.dumps(_line()).replace("alpha question", "alpha \\ud800")
    path = _write(tmp_path / "r.jsonl", text)
    [record] = read_results(path)
    assert "alpha \\ud800" == record.query == record.result.question
    assert 0 == main([a.format(r=path, tmp=tmp_path) for a in argv])
    assert "internal error" not in capsys.readouterr().err
