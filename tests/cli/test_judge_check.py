"""``corrective-rag judge-check``: 0 for a judge that can judge, 1 and why for one that can't."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import structlog

from corrective_rag.cli.main import main
from corrective_rag.evaluate.check.pairs import CHECK_PAIRS
from corrective_rag.testing import HostileLLMServer, ScriptedLLMServer
from corrective_rag.testing.judges import all_relevant_judge, faithful_judge, noisy_judge

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _restore_logging():
    yield
    structlog.reset_defaults()


def _check(server: ScriptedLLMServer, *more: str) -> list[str]:
    return ["judge-check", "--llm-url", server.base_url, "--model", "scripted", *more]


def test_a_faithful_judge_exits_0_and_prints_the_figures(capsys):
    """Against a server that judges from the pairs' labels: exit 0, agreement 1.00, the share
    it calls relevant, nothing ungraded, and seconds and tokens per call."""
    with ScriptedLLMServer(reply=faithful_judge) as server:
        assert 0 == main(_check(server))
    out = capsys.readouterr().out
    assert "agreement         1.00" in out
    assert "ungraded          0.00" in out
    assert "seconds per call" in out and "tokens per call" in out
    assert "PASS" in out


def test_a_judge_calling_everything_relevant_exits_1_and_says_why(capsys):
    """Against a server that calls every document relevant: exit 1; the reasons say it keeps
    everything and agrees too little, on stdout and in one stderr line."""
    with ScriptedLLMServer(reply=all_relevant_judge) as server:
        assert 1 == main(_check(server))
    captured = capsys.readouterr()
    assert "kept              1.00" in captured.out
    assert "FAIL" in captured.out
    assert "the loop would keep everything" in captured.out
    assert captured.err.startswith("corrective-rag: judge-check failed: a run keeps 100%")


def test_a_noisy_judge_exits_1_on_agreement_and_json_has_the_figures(capsys):
    """A judge wrong on half the pairs exits 1; --json prints every figure and passed=false."""
    with ScriptedLLMServer(reply=noisy_judge(0.5)) as server:
        assert 1 == main(_check(server, "--json"))
    figures = json.loads(capsys.readouterr().out)
    assert figures["passed"] is False
    assert len(CHECK_PAIRS) == figures["pairs"]
    assert figures["agreement"] < 0.7
    assert {"relevant_share", "ungraded_share", "seconds_per_call", "tokens_per_call"} <= set(
        figures
    )


def test_nothing_listening_is_one_error_line(capsys):
    """A URL where nothing answers is one error line and exit 1, before any grading."""
    with ScriptedLLMServer() as server:
        url = server.base_url
    assert 1 == main(["judge-check", "--llm-url", url, "--model", "m"])
    assert "cannot reach the LLM server" in capsys.readouterr().err


def test_the_console_command_exits_non_zero_against_an_all_relevant_judge():
    """The installed entry point's exit status is what a script sees: 1 against the all-relevant
    judge, 0 against the faithful one."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    codes = []
    for judge in (all_relevant_judge, faithful_judge):
        with ScriptedLLMServer(reply=judge) as server:
            done = subprocess.run(
                [sys.executable, "-m", "corrective_rag", *_check(server)],
                capture_output=True,
                text=True,
                env=env,
                check=False,
                timeout=300,
            )
        codes.append(done.returncode)
    assert [1, 0] == codes


def test_a_dripping_server_meets_one_deadline_and_the_real_time_is_reported(capsys):
    """Against a server that drips every reply, ``--deadline`` ends the whole check: exit 1,
    the deadline named among the problems, and the time reported is the time measured, not
    0.00 per call."""
    with HostileLLMServer("drip", interval=0.05) as server:
        code = main(
            [
                "judge-check",
                "--llm-url",
                server.base_url,
                "--model",
                "m",
                "--json",
                "--deadline",
                "1",
                "--timeout",
                "30",
                "--max-retries",
                "0",
            ]
        )
    captured = capsys.readouterr()
    assert 1 == code
    figures = json.loads(captured.out)
    assert figures["seconds"] >= 1.0  # the deadline passed, as measured by the check
    assert figures["seconds_per_call"] > 0
    assert 1.0 == figures["ungraded_share"]
    assert "the check's deadline of 1 s passed" in figures["problems"][0]
    assert "deadline of 1 s passed" in captured.err


def test_the_text_report_says_the_whole_checks_time(capsys):
    """The figures end with the whole check's measured time."""
    with ScriptedLLMServer(reply=faithful_judge) as server:
        assert 0 == main(_check(server))
    assert "seconds in all    " in capsys.readouterr().out


def test_plain_check_grades_the_judge_the_run_would_use_in_the_runs_call(tmp_path, capsys):
    """With no profile: the verbal judge, in the one-call shape (proposals asked, as a run asks
    them), said so. With the profile judge-check chose: that judge at its threshold, said so,
    and counted as the run keeps (P 0.8 under a threshold of 0.9: nothing kept)."""
    from judge_replies import Written, graded_judge

    from corrective_rag.evaluate import JudgeProfile
    from corrective_rag.evaluate.profile import write_profiles

    path = tmp_path / "profile.json"
    judge = graded_judge(lambda q, d: Written(True, 0.9, 0.9, 0.8))
    with ScriptedLLMServer(faults=judge) as server:
        main(_check(server))
        out = capsys.readouterr().out
        assert "graded as         verbal, one-call (no profile: the default judge)" in out
        assert "kept              1.00" in out
        shapes = {json.dumps(r.get("response_format")) for r in server.requests}
        assert all("next_query" in shape for shape in shapes)
        scored = JudgeProfile.of("logprob", model="scripted", threshold=0.9)
        write_profiles(path, "scripted", {"logprob": scored}, "logprob")
        main(_check(server, "--calibration", str(path)))
    out = capsys.readouterr().out
    assert f"graded as         logprob, one-call, threshold 0.900 (profile {path})" in out
    assert "kept              0.00" in out


def test_judge_names_the_judge_to_check_and_local_llm_is_taken(tmp_path, capsys):
    """--judge pointwise checks the yes/no judge (one call per document); --local-llm with a
    file that is not there is one error line."""
    with ScriptedLLMServer(reply=faithful_judge) as server:
        main(_check(server, "--judge", "pointwise"))
        assert len(CHECK_PAIRS) == server.request_count
    assert "graded as         pointwise, threshold 0.500 (--judge)" in capsys.readouterr().out
    assert 1 == main(["judge-check", "--local-llm", str(tmp_path / "none.gguf")])
    assert "GGUF model not found" in capsys.readouterr().err


def test_the_command_lines_copy_of_the_judge_kinds_is_the_tables():
    """The parser names the kinds without importing the table (start-up time): its choices, the
    kinds that call no model and the default comparison must follow evaluate/kinds.py."""
    from corrective_rag.cli import judge_check
    from corrective_rag.evaluate.kinds import JUDGE_KINDS

    assert tuple(JUDGE_KINDS) == judge_check.JUDGE_CHOICES
    assert {k for k, spec in JUDGE_KINDS.items() if not spec.needs_chat} == judge_check._OFFLINE
    assert set(judge_check.JUDGES) <= set(JUDGE_KINDS)
