"""The scripts in scripts/ run as a user runs them, against real local servers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from corrective_rag.testing import ScriptedLLMServer

ROOT = Path(__file__).resolve().parent.parent


def test_openai_example_answers_from_the_folder_through_the_server(tmp_path):
    """The example indexes a folder, asks the server to judge, rewrite and answer, and cites."""
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "ganymede.txt").write_text("Ganymede is the largest moon of Jupiter.\n")
    (folder / "titan.txt").write_text("Titan is the largest moon of Saturn.\n")
    (folder / "bread.md").write_text("Sourdough bread rises slowly overnight.\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENAI_API_KEY": "sk-test-example"}
    with ScriptedLLMServer() as server:
        out = subprocess.run(
            [
                sys.executable,
                str(ROOT / "scripts" / "openai_example.py"),
                str(folder),
                "Which moon is the largest moon of Jupiter?",
                "--base-url",
                server.base_url,
                "--model",
                "scripted",
            ],
            capture_output=True,
            check=False,
            text=True,
            env=env,
            timeout=300,
        )
        calls = len(server.requests)
    assert 0 == out.returncode, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split()[:2] == ["it", "query"]
    assert "answer: Ganymede is the largest moon of Jupiter" in out.stdout
    cited = next(line for line in lines if line.startswith("cited: "))
    assert "ganymede" in cited
    assert calls >= 3  # grading, answering and the support check all went over HTTP
    assert "sk-test-example" not in out.stdout + out.stderr


def test_openai_example_asks_for_a_server_when_none_is_given(tmp_path):
    """Without a URL or model (flags or environment) the example stops with a usage error."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_BASE_URL", "OPENAI_MODEL")}
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "openai_example.py"), str(tmp_path), "q"],
        capture_output=True,
        check=False,
        text=True,
        env=env,
        timeout=300,
    )
    assert 2 == out.returncode
    assert "--base-url and --model" in out.stderr
