"""Bad input on the command line: one `corrective-rag: error:` line, a non-zero exit, no traceback.

Most cases go through ``cli.main(argv)``; the ones that only a real process can produce (argv
bytes that are not UTF-8) run ``python3 -m corrective_rag`` as a subprocess.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import structlog

from corrective_rag.cli.main import main

REPO = Path(__file__).resolve().parents[2]
PREFIX = "corrective-rag: error: "


@pytest.fixture(autouse=True)
def _restore_logging():
    """main() configures structlog for the process; give other tests the defaults back."""
    yield
    structlog.reset_defaults()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A small indexed store and a folder of bad files, shared by the table below."""
    root = tmp_path_factory.mktemp("cli")
    corpus = root / "corpus.txt"
    corpus.write_text("Jupiter has ninety-five known moons. Saturn has bright rings.\n")
    store = root / "store"
    assert 0 == main(["index", str(corpus), "--store", str(store), "--no-progress"])
    structlog.reset_defaults()
    bad = {
        "binary.txt": bytes(range(256)),
        "latin1.txt": "café".encode("latin-1"),
        "nul.txt": b"abc\x00def",
        "broken.jsonl": b'{"id": "a", "text": "ok"}\n{"id": "b", "text": \n',
        "dup.jsonl": b'{"id": "a", "text": "x"}\n{"id": "a", "text": "y"}\n',
        "deep.jsonl": b"[" * 100_000 + b"]" * 100_000 + b"\n",
        "queries_broken.jsonl": b'{"id": "q1", "query": "moons"}\n{"id": "q2", "query"\n',
        "queries_binary.jsonl": b'{"id": "q1", "query": "moons"}\n\xff\xfe\n',
        "queries_dup.jsonl": b'{"id": "q", "query": "a"}\n{"id": "q", "query": "b"}\n',
        "queries_ok.jsonl": b'{"id": "q1", "query": "moons"}\n',
        "results_binary.jsonl": b"\xff\xfe\xfa\n",
        "results_broken.jsonl": b'{"id": "q1", "status": "ok"}\n',
    }
    for name, data in bad.items():
        (root / name).write_bytes(data)
    (root / "folder").mkdir()
    return root


CASES = [
    ("run empty question", ["run", "", "--store", "{store}"], 1, "empty"),
    ("run whitespace question", ["run", " \t ", "--store", "{store}"], 1, "empty"),
    ("run NUL question", ["run", "moons\x00", "--store", "{store}"], 1, "nul"),
    ("run surrogate question", ["run", "moons \udcff", "--store", "{store}"], 1, "unicode"),
    ("run huge question", ["run", "w" * 1_100_000, "--store", "{store}"], 1, "bytes"),
    ("run top-k 0", ["run", "moons", "--store", "{store}", "--top-k", "0"], 2, "--top-k"),
    ("run top-k negative", ["run", "moons", "--store", "{store}", "--top-k", "-5"], 2, "--top-k"),
    ("run top-k text", ["run", "moons", "--store", "{store}", "--top-k", "ten"], 2, "--top-k"),
    (
        "run top-k absurd",
        ["run", "moons", "--store", "{store}", "--top-k", "99999999"],
        2,
        "top_k",
    ),
    (
        "run iterations 0",
        ["run", "moons", "--store", "{store}", "--max-iterations", "0"],
        2,
        "--max-iterations",
    ),
    ("run unknown policy", ["run", "moons", "--store", "{store}", "--policy", "x"], 2, "preset"),
    ("run store is a file", ["run", "moons", "--store", "{root}/nul.txt"], 1, "store"),
    ("index binary file", ["index", "{root}/binary.txt", "--store", "{root}/s1"], 1, "utf-8"),
    ("index latin-1 file", ["index", "{root}/latin1.txt", "--store", "{root}/s1"], 1, "utf-8"),
    ("index NUL file", ["index", "{root}/nul.txt", "--store", "{root}/s1"], 1, "nul"),
    ("index broken jsonl", ["index", "{root}/broken.jsonl", "--store", "{root}/s1"], 1, ":2"),
    ("index duplicate ids", ["index", "{root}/dup.jsonl", "--store", "{root}/s1"], 1, "duplicate"),
    ("index deep jsonl", ["index", "{root}/deep.jsonl", "--store", "{root}/s1"], 1, "nested"),
    (
        "index overlap too big",
        ["index", "{root}/dup.jsonl", "--store", "{root}/s1", "--chunk-tokens", "5"],
        2,
        "overlap",
    ),
    (
        "index store is a file",
        ["index", "{root}/corpus.txt", "--store", "{root}/nul.txt"],
        2,
        "not a directory",
    ),
    (
        "batch broken queries",
        ["batch", "{root}/queries_broken.jsonl", "--out", "{root}/o.jsonl", "--store", "{store}"],
        1,
        "line 2",
    ),
    (
        "batch binary queries",
        ["batch", "{root}/queries_binary.jsonl", "--out", "{root}/o.jsonl", "--store", "{store}"],
        1,
        "utf-8",
    ),
    (
        "batch duplicate ids",
        ["batch", "{root}/queries_dup.jsonl", "--out", "{root}/o.jsonl", "--store", "{store}"],
        1,
        "duplicate",
    ),
    (
        "batch out is a folder",
        ["batch", "{root}/queries_ok.jsonl", "--out", "{root}/folder", "--store", "{store}"],
        1,
        "folder",
    ),
    (
        "batch concurrency 0",
        ["batch", "{root}/queries_ok.jsonl", "--out", "o", "--store", "{store}", "--concurrency=0"],
        2,
        "--concurrency",
    ),
    (
        "batch shard out of range",
        ["batch", "{root}/queries_ok.jsonl", "--out", "o", "--store", "{store}", "--shard", "2/1"],
        2,
        "shard",
    ),
    ("history binary results", ["history", "list", "{root}/results_binary.jsonl"], 1, "utf-8"),
    ("history broken results", ["history", "stats", "{root}/results_broken.jsonl"], 1, "result"),
    ("history folder", ["history", "list", "{root}/folder"], 1, "not found"),
    ("history unknown action", ["history", "frob", "x"], 2, "invalid choice"),
    ("unknown command", ["frobnicate"], 2, "invalid choice"),
    ("no command", [], 2, "required"),
    (
        "llm url without model",
        ["run", "q", "--store", "{store}", "--llm-url", "http://x"],
        2,
        "model",
    ),
]


@pytest.mark.parametrize(
    ("argv", "code", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_cli_bad_input_is_one_error_line(files, capsys, argv, code, words):
    """Each bad command line prints one error line naming the problem and exits non-zero."""
    names = {"root": files, "store": files / "store"}
    assert code == main([a.format(**names) for a in argv])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert 1 == len(lines), err
    assert lines[0].startswith(PREFIX), err
    assert words.lower() in lines[0].lower()


def test_index_with_path_like_ids_creates_no_files(files, capsys):
    """Ids such as "../x" and "a/b" in a corpus are stored as ids; no file is made from them."""
    corpus = files / "ids.jsonl"
    corpus.write_text(
        '{"id": "../escape", "text": "Moons of Jupiter"}\n{"id": "a/b", "text": "Rings"}\n'
    )
    before = {p for p in files.parent.rglob("*")}
    assert 0 == main(["index", str(corpus), "--store", str(files / "s2"), "--no-progress"])
    created = {p for p in files.parent.rglob("*")} - before
    assert set() == {p for p in created if not p.is_relative_to(files / "s2")}
    assert [] == [p for p in created if p.name in ("escape", "a", "b")]


def _cli(*args: bytes | str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    env = dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1")
    return subprocess.run(
        [sys.executable, "-m", "corrective_rag", *args],
        capture_output=True,
        env=env,
        cwd=cwd,
        timeout=180,
        check=False,
    )


@pytest.mark.parametrize(
    ("question", "words"),
    [(b"moons \xff\xfe of Jupiter", b"unicode"), (b"   ", b"empty"), (b"", b"empty")],
    ids=["not UTF-8 bytes", "whitespace", "empty"],
)
def test_real_process_rejects_bad_question_bytes(files, question, words):
    """A real `python3 -m corrective_rag run` with bad question bytes prints one line, exit 1."""
    proc = _cli("run", question, "--store", str(files / "store"), cwd=files)
    assert 1 == proc.returncode, proc.stderr
    assert b"Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert 1 == len(lines), proc.stderr
    assert lines[0].startswith(PREFIX.encode()) and words in lines[0].lower()


def test_real_process_rejects_binary_queries_file(files):
    """A real `batch` over a queries file that is not UTF-8 names the line, exit 1."""
    proc = _cli(
        "batch",
        str(files / "queries_binary.jsonl"),
        "--out",
        str(files / "o.jsonl"),
        "--store",
        str(files / "store"),
        cwd=files,
    )
    assert 1 == proc.returncode
    assert b"Traceback" not in proc.stderr
    assert b"line 2" in proc.stderr
