"""What the command line writes and prints: never over its own inputs, never the key, never raw
control characters, tables aligned for wide characters, and the flags it refuses.

Everything runs for real: a persistent store indexed by ``corrective-rag index``, the offline
embedding model, and a scripted OpenAI-compatible server on 127.0.0.1 that echoes the API key
(and terminal escape sequences) inside normal HTTP 200 replies.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
import structlog
from runs_helpers import make_result

from corrective_rag import CorrectiveRAGOrchestrator, LLMEvaluator, LLMRewriter, OpenAIChatClient
from corrective_rag.cli.main import main
from corrective_rag.evaluate.cache import VerdictCache
from corrective_rag.runs.records.codec import to_dict
from corrective_rag.runs.records.results import ok_line
from corrective_rag.runs.reports.table import render_table
from corrective_rag.testing import ListRetriever, ScriptedLLMServer
from corrective_rag.testing.replies import default_reply
from corrective_rag.types import Document

REPO = Path(__file__).resolve().parents[2]
KEY = "sk-echoed-4b1d9e7c2a"
ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x9b31m\u202e"  # retitle, clear screen, C1 CSI, RTL override
DOCS = [
    ("jupiter.txt", "Jupiter has ninety-five moons; Ganymede is the largest moon."),
    ("saturn.txt", f"Saturn has bright rings {ESCAPES} and the moon Titan."),
    ("secrets.txt", f"Mars has two moons. The deploy key is {KEY} for the moons service."),
]


@pytest.fixture(autouse=True)
def _restore_logging():
    """main() configures structlog for the process; give other tests the defaults back."""
    yield
    structlog.reset_defaults()


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """A real persistent store indexed by the CLI from a small folder of the user's files."""
    root = tmp_path_factory.mktemp("user")
    (root / "docs").mkdir()
    for name, text in DOCS:
        (root / "docs" / name).write_text(text, encoding="utf-8")
    folder = root / "store"
    assert 0 == main(["index", str(root / "docs"), "--store", str(folder), "--no-progress"])
    structlog.reset_defaults()
    return folder


@pytest.fixture
def results(tmp_path) -> Path:
    path = tmp_path / "r.jsonl"
    lines = [ok_line(q, f"question {q}", make_result(f"question {q}"), 1.0) for q in ("a", "b")]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


def _error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert 1 == len(lines), err
    assert lines[0].startswith("corrective-rag: error: ")
    assert "internal error" not in lines[0]
    return lines[0]


# -- never destroy a user's file -----------------------------------------------------------


@pytest.mark.parametrize("alias", ["same", "symlink", "hardlink", "relative"])
def test_history_export_refuses_to_write_over_its_results_file(results, alias, capsys):
    """`history export R --csv R` (by any name: link, hard link, other spelling) changes nothing."""
    before = results.read_bytes()
    target = results
    if alias == "symlink":
        target = results.with_name("link.csv")
        target.symlink_to(results)
    elif alias == "hardlink":
        target = results.with_name("hard.csv")
        os.link(results, target)
    elif alias == "relative":
        target = Path(os.path.relpath(results.parent / "." / results.name))
    assert 1 == main(["history", "export", str(results), "--csv", str(target)])
    assert "same file" in _error_line(capsys.readouterr().err)
    assert before == results.read_bytes()


def test_history_export_into_a_missing_folder_is_refused(results, tmp_path, capsys):
    """`export --csv missing/dir/x.csv` fails with one line and creates no folder."""
    out = tmp_path / "missing" / "dir" / "x.csv"
    assert 1 == main(["history", "export", str(results), "--csv", str(out)])
    assert "does not exist" in _error_line(capsys.readouterr().err)
    assert not (tmp_path / "missing").exists()


def test_history_plot_into_a_non_image_path_is_a_clear_error(results, tmp_path, capsys):
    """`plot --out x.jsonl` names the formats it can write; it is not an internal error."""
    out = tmp_path / "x.jsonl"
    assert 1 == main(["history", "plot", str(results), "--out", str(out)])
    assert ".png" in _error_line(capsys.readouterr().err)
    assert not out.exists()
    before = results.read_bytes()
    assert 1 == main(["history", "plot", str(results), "--out", str(results)])
    assert "same file" in _error_line(capsys.readouterr().err)
    assert before == results.read_bytes()


@pytest.mark.parametrize("case", ["summary=out", "summary=queries", "out=queries"])
def test_batch_refuses_outputs_that_are_its_own_files(store, tmp_path, case, capsys):
    """`batch` whose --summary-json or --out names its queries or results file runs nothing."""
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"id": "q1", "query": "Which planet has rings?"}\n', encoding="utf-8")
    before = queries.read_bytes()
    out = queries if case == "out=queries" else tmp_path / "out.jsonl"
    summary = {"summary=out": out, "summary=queries": queries}.get(case)
    argv = ["batch", str(queries), "--out", str(out), "--store", str(store), "--no-progress"]
    if summary is not None:
        argv += ["--summary-json", str(summary)]
    assert 1 == main(argv)
    assert "same file" in _error_line(capsys.readouterr().err)
    assert before == queries.read_bytes()
    assert out == queries or not out.exists()


# -- secrets -------------------------------------------------------------------------------


def _echo_key(request) -> str:
    """A server that puts the key (and escape sequences) into its normal replies."""
    reply = json.loads(default_reply(request))
    if "query" in reply:
        reply["query"] = f"{reply['query']} {KEY} {ESCAPES}"
        reply["rationale"] = f"widened with {KEY}"
    for verdict in reply.get("verdicts", []):
        verdict["reasoning"] = f"key {KEY} {ESCAPES}"
    return json.dumps(reply)


def test_client_hides_a_key_echoed_in_a_normal_reply():
    """A 200 reply holding the key comes back from the client with the key masked."""
    with ScriptedLLMServer(lambda request: f"here is your key: {KEY}") as server:
        chat = OpenAIChatClient(server.base_url, "m", api_key=KEY)
        reply = chat.complete([{"role": "user", "content": "hi"}])
    assert "here is your key: ***" == reply.text


def test_a_rewrite_carrying_the_key_is_never_searched():
    """The loop never sends the key to the store as a query, nor keeps it in its result."""
    docs = [Document(n, t) for n, t in DOCS]
    retriever = ListRetriever(docs)
    with ScriptedLLMServer(_echo_key) as server:
        chat = OpenAIChatClient(server.base_url, "m", api_key=KEY)
        orch = CorrectiveRAGOrchestrator(
            retriever,
            LLMEvaluator(chat, cache=VerdictCache(0)),
            LLMRewriter(chat),
            top_k=2,
            max_iterations=3,
            min_relevant=5,
        )
        result = orch.run("Which planet has rings and moons?")
    assert len(retriever.queries) >= 2  # a rewrite was searched
    assert all(KEY not in q for q in retriever.queries), retriever.queries
    recorded = json.dumps([to_dict(rec) for rec in result.history], ensure_ascii=False)
    assert "***" in recorded
    assert KEY not in recorded.replace(DOCS[2][1], "")  # only the user's own document holds it


def test_cli_never_prints_logs_or_writes_an_echoed_key(store, tmp_path, monkeypatch, capsys):
    """`run`, `run --json`, `batch` and `history` with -v: no key in stdout, stderr or files."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"id": "q1", "query": "Which planet has two moons?"}\n', encoding="utf-8")
    out = tmp_path / "out.jsonl"
    with ScriptedLLMServer(_echo_key) as server:
        llm = ["--store", str(store), "--llm-url", server.base_url, "--model", "m"]
        assert 0 == main(["-v", "run", "Which planet has two moons?", *llm])
        table = capsys.readouterr()
        assert 0 == main(["run", "Which planet has two moons?", "--json", *llm])
        as_json = capsys.readouterr()
        argv = ["-v", "batch", str(queries), "--out", str(out), "--no-progress", *llm]
        assert 0 == main([*argv, "--summary-json", str(tmp_path / "s.json")])
        batch = capsys.readouterr()
        assert any(KEY in json.dumps(r) for r in server.requests)  # the server saw it
    assert 0 == main(["history", "show", str(out), "q1"])
    show = capsys.readouterr()
    assert "***" in table.out  # the echoed rewrite or reasoning reached the table, masked
    for name, text in [
        ("run table", table.out + table.err),
        ("run --json", as_json.out + as_json.err),
        ("batch", batch.out + batch.err),
        ("history show", show.out + show.err),
        *((p.name, p.read_text(encoding="utf-8")) for p in tmp_path.iterdir()),
    ]:
        assert KEY not in text, f"API key leaked into {name}"


def test_history_commands_hide_a_key_already_in_a_results_file(tmp_path, monkeypatch, capsys):
    """A results file written without masking: list, show, stats and export never show the key."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    question = f"why does {KEY} fail"
    results = tmp_path / "r.jsonl"
    line = ok_line("q1", question, make_result(question), 1.0)
    results.write_text(json.dumps(line) + "\n", encoding="utf-8")
    csv_path = tmp_path / "it.csv"
    for argv in (
        ["history", "list", str(results)],
        ["history", "show", str(results), "q1"],
        ["history", "show", str(results), "q1", "--json"],
        ["history", "stats", str(results)],
        ["history", "export", str(results), "--csv", str(csv_path)],
    ):
        assert 0 == main(argv)
        captured = capsys.readouterr()
        assert KEY not in captured.out + captured.err, argv
    assert KEY not in csv_path.read_text(encoding="utf-8")
    assert "why does *** fail" in csv_path.read_text(encoding="utf-8")


# -- terminals -----------------------------------------------------------------------------


def _raw_controls(text: str) -> list[str]:
    return [c for c in text if c != "\n" and unicodedata.category(c) in ("Cc", "Cf")]


def test_escape_sequences_from_documents_and_model_never_reach_the_terminal(
    store, tmp_path, capsys
):
    """Tables and text show escapes as visible text; `--json` keeps the exact text."""
    with ScriptedLLMServer(_echo_key) as server:
        llm = ["--store", str(store), "--llm-url", server.base_url, "--model", "m"]
        question = "Which planet has bright rings?"
        assert 0 == main(["-v", "run", question, "--top-k", "3", *llm])
        shown = capsys.readouterr()
        assert 0 == main(["run", question, "--top-k", "3", "--json", *llm])
        exact = capsys.readouterr().out
    assert "\\x1b]0;pwned" in shown.out  # the document's text is shown, escaped
    assert [] == _raw_controls(shown.out + shown.err)
    assert [] == _raw_controls(exact)
    kept = [k["document"]["text"] for k in json.loads(exact)["kept"]]
    assert DOCS[1][1] in kept  # JSON decodes to the document's exact text


def _columns(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def test_run_table_aligns_wide_characters():
    """A query in Chinese lines its row up with the others, counted in terminal columns."""
    result = make_result("木星有多少颗卫星？木星的卫星", kept_per_iteration=(1, 1, 2))
    lines = render_table(result).splitlines()
    rule, rows = lines[1], lines[2:-1]
    assert {_columns(rule)} == {_columns(row) for row in rows}


# -- minor ---------------------------------------------------------------------------------


def test_chroma_host_with_store_is_refused(tmp_path, capsys):
    """`--store` and `--chroma-host` together are a usage error, not a silent choice."""
    argv = ["run", "Which planet?", "--store", str(tmp_path), "--chroma-host", "127.0.0.1"]
    assert 2 == main(argv)
    assert "not both" in _error_line(capsys.readouterr().err)


def test_no_progress_silences_the_model_loading_bar(tmp_path):
    """`index --no-progress` prints no progress bar at all, not even "Loading weights"."""
    (tmp_path / "a.txt").write_text("Jupiter has many moons.", encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1")
    cmd = [sys.executable, "-m", "corrective_rag", "index", str(tmp_path / "a.txt")]
    proc = subprocess.run(
        [*cmd, "--store", str(tmp_path / "s"), "--no-progress"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert 0 == proc.returncode, proc.stderr
    assert "Loading weights" not in proc.stderr and "it/s" not in proc.stderr, proc.stderr
