import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import structlog
from runs_helpers import make_result

from corrective_rag.cli.main import main
from corrective_rag.errors import LLMTimeoutError
from corrective_rag.runs.records.results import error_line, ok_line
from corrective_rag.types import StopReason

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _restore_logging():
    """main() configures structlog for the process; give other tests the defaults back."""
    yield
    structlog.reset_defaults()


@pytest.fixture
def results(tmp_path):
    path = tmp_path / "r.jsonl"
    lines = [
        ok_line(
            "a", "alpha question", make_result("alpha question", kept_per_iteration=(1, 2)), 1.0
        ),
        ok_line(
            "b",
            "beta question",
            make_result(
                "beta question", kept_per_iteration=(0, 1, 1), stop=StopReason.ITERATION_CAP
            ),
            3.0,
        ),
        error_line("c", "gamma question", LLMTimeoutError("read timed out"), 0.5),
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def _dead_url() -> str:
    """A 127.0.0.1 URL on a port that was free a moment ago: connections are refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert 1 == len(lines), err
    assert lines[0].startswith("corrective-rag: error: ")
    return lines[0]


def test_history_list_and_show(results, capsys):
    """`history list` names every query and `history show` prints the iteration table."""
    assert 0 == main(["history", "list", str(results)])
    out = capsys.readouterr().out
    assert ["a", "b", "c"] == [line.split()[0] for line in out.splitlines()[2:]]
    assert "LLMTimeoutError" in out
    assert 0 == main(["history", "show", str(results), "b"])
    out = capsys.readouterr().out
    assert "iteration_cap" in out and "beta question rewrite 2" in out


def test_history_show_json_round_trips(results, capsys):
    """`history show --json` prints the run's full JSON form."""
    from corrective_rag.runs.records.codec import from_dict
    from corrective_rag.types import RunResult

    assert 0 == main(["history", "show", str(results), "a", "--json"])
    result = from_dict(RunResult, json.loads(capsys.readouterr().out))
    assert "alpha question" == result.question


def test_history_diff_iterations_and_runs(results, capsys):
    """`history diff` compares two iterations of a run and two runs."""
    assert 0 == main(["history", "diff", str(results), "a", "--iterations", "1", "2"])
    assert "+++ iteration 2" in capsys.readouterr().out
    assert 0 == main(["history", "diff", str(results), "a", "--run", "b", "--in", str(results)])
    assert f"+++ run {make_result('beta question').run_id}" in capsys.readouterr().out


def test_history_stats_json(results, capsys):
    """`history stats --json` reports ok, failures and stop reasons of the file."""
    assert 0 == main(["history", "stats", str(results), "--json"])
    stats = json.loads(capsys.readouterr().out)
    assert (3, 2, 1) == (stats["queries"], stats["ok"], stats["failures"])
    assert {"enough_relevant": 1, "iteration_cap": 1} == stats["stop_reasons"]


def test_history_export_and_plot(results, tmp_path, capsys):
    """`history export` writes 5 iteration rows and `history plot` a PNG."""
    assert 0 == main(["history", "export", str(results), "--csv", str(tmp_path / "it.csv")])
    assert 6 == len((tmp_path / "it.csv").read_text().splitlines())
    assert 0 == main(["history", "plot", str(results), "--out", str(tmp_path / "b.png")])
    assert (tmp_path / "b.png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["history", "show", "{missing}", "a"], 1, "results file not found"),
        (["history", "show", "{results}", "zz"], 1, "no run with id 'zz'"),
        (["history", "show", "{results}", "c"], 1, "query 'c' failed: LLMTimeoutError"),
        (["history", "diff", "{results}", "a", "--iterations", "1", "9"], 1, "iteration 9 not in"),
        (["run", "q", "--store", "{missing}"], 1, "store not found"),
        (["run", "q"], 2, "give --store DIR"),
        (["run", "q", "--store", "{tmp}", "--llm-url", "http://127.0.0.1:9"], 2, "needs --model"),
        (
            ["run", "q", "--store", "{tmp}", "--llm-url", "{dead}", "--model", "m"],
            1,
            "cannot reach",
        ),
        (
            ["run", "q", "--store", "{tmp}", "--llm-url", "ftp://x", "--model", "m"],
            1,
            "cannot reach",
        ),
        (["batch", "{bad}", "--out", "{tmp}/o.jsonl", "--store", "{tmp}"], 1, "line 2: missing"),
        (["batch", "{missing}", "--out", "{tmp}/o.jsonl", "--store", "{tmp}"], 1, "not found"),
        (["index", "{missing}", "--store", "{tmp}/s"], 1, "no such file or folder"),
        (["index", "{empty}", "--store", "{tmp}/s"], 1, "no documents found"),
    ],
)
def test_user_errors_print_one_line_and_exit_non_zero(
    tmp_path, results, capsys, argv, code, message
):
    """Every error a user can cause is one `corrective-rag: error:` line and a non-zero exit."""
    bad = tmp_path / "q.jsonl"
    bad.write_text('{"id": "a", "query": "x"}\n{"id": "", "query": "y"}\n')
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "corpus.jsonl").write_text('{"_id": "1", "title": "", "text": ""}\n')
    names = {
        "missing": tmp_path / "nope",
        "results": results,
        "tmp": tmp_path,
        "bad": bad,
        "empty": empty,
        "dead": _dead_url(),
    }
    assert code == main([a.format(**names) for a in argv])
    assert message in _one_error_line(capsys.readouterr().err)


@pytest.mark.parametrize(
    "argv",
    [
        ["batch", "q.jsonl", "--out", "o", "--store", "s", "--concurrency", "0"],
        ["batch", "q.jsonl", "--out", "o", "--store", "s", "--shard", "5/2"],
        ["history", "frobnicate", "x"],
    ],
)
def test_bad_flag_values_are_usage_errors(argv, capsys):
    """Bad flag values exit 2 with argparse's usage message naming the problem."""
    assert 2 == main(argv)
    assert "error:" in capsys.readouterr().err


def test_python_dash_m_runs_the_cli(results):
    """`python3 -m corrective_rag history stats` works as a real subprocess."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run(
        [sys.executable, "-m", "corrective_rag", "history", "stats", str(results)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert 0 == proc.returncode, proc.stderr
    assert "ok 2  failed 1" in proc.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "corrective_rag", "history", "list", str(results) + ".nope"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert 1 == bad.returncode
    assert "Traceback" not in bad.stderr
    _one_error_line(bad.stderr)


def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path):
    """`history show | head -1`: the command exits 141 with nothing on stderr, no traceback."""
    path = tmp_path / "big.jsonl"
    run = make_result("a long run", kept_per_iteration=(1,) * 1000)  # ~230 kB of table
    path.write_text(json.dumps(ok_line("big", "a long run", run, 1.0)) + "\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "corrective_rag", "history", "show", str(path), "big"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        cwd=REPO,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline()  # the first line arrived: the command is writing
    proc.stdout.close()  # the reader goes away with far more than a pipe buffer still to come
    err = proc.stderr.read().decode()
    assert 141 == proc.wait()
    assert "" == err


@pytest.mark.parametrize(
    ("skip_errors", "hint"),
    [(False, "run the same command again to retry them"), (True, "without --skip-errors")],
)
def test_failed_batch_says_how_to_retry(tmp_path, capsys, skip_errors, hint):
    """With --skip-errors a rerun skips the failed ids, so the error says how to retry them."""
    import argparse
    from types import SimpleNamespace

    from corrective_rag.cli.commands import _report_batch
    from corrective_rag.errors import InputError

    summary = SimpleNamespace(failures=2, queries=3, render=lambda: "summary", to_dict=dict)
    args = argparse.Namespace(
        out=str(tmp_path / "o.jsonl"), summary_json=None, skip_errors=skip_errors
    )
    with pytest.raises(InputError, match="2 of 3 queries failed") as caught:
        _report_batch(args, summary)
    assert hint in str(caught.value)


def test_no_progress_silences_transformers_without_importing_it() -> None:
    """`--no-progress` loads no transformers (seconds) to quiet it; loaded later, it is quiet."""
    code = (
        "import sys\n"
        "from corrective_rag.cli.commands import quiet_progress\n"
        "quiet_progress()\n"
        "print('transformers' in sys.modules)\n"
        "from transformers.utils import logging\n"
        "print(logging.is_progress_bar_enabled())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300
    ).stdout.split()
    assert ["False", "False"] == out
