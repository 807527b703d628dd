"""Ctrl-C of the real command while LLM calls are stalled: `run` and `batch` end with 130.

Each test synchronises on events (the scripted server's count of requests it holds, lines in the
results file, a marker line on the child's stdout), never on sleeps; exit latency is measured by
``benchmarks/interrupts.py``, not asserted. The pytest timeout is the only time bound.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from corrective_rag.runs.execution.attempt import INTERRUPTED
from corrective_rag.runs.records.results import latest_records, read_results
from corrective_rag.store.hybrid import HybridStore
from corrective_rag.testing import Fault, ScriptedLLMServer
from corrective_rag.types import Document

REPO = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1")
DOCS = [
    Document("bees", "Honey bees make honey from flower nectar they collect in the hive."),
    Document("volcano", "Volcanoes erupt molten lava and ash when magma pressure rises."),
    Document("tides", "Tides follow the pull of the Moon and the Sun on the oceans."),
]


@pytest.fixture
def store_dir(tmp_path: Path, embedder: Any) -> Path:
    path = tmp_path / "store"
    with HybridStore.open(path, embedder=embedder) as store:
        store.add(DOCS)
    return path


def _command(store: Path, server: ScriptedLLMServer, *args: str) -> list[str]:
    return [
        sys.executable, "-m", "corrective_rag", *args, "--store", str(store),
        "--llm-url", server.base_url, "--model", "scripted",
    ]  # fmt: skip


def _wait_until(condition: Any, proc: subprocess.Popen) -> None:
    """Poll a file-based condition while the child runs (the child ending first fails)."""
    while not condition():
        assert proc.poll() is None, "the command ended before the interrupt point"
        time.sleep(0.01)


class _Holder:
    """Hold every request whose question is marked ``(hold)``; count them as they arrive."""

    def __init__(self, count: int) -> None:
        self.held = 0
        self.enough = threading.Event()
        self._count = count
        self._lock = threading.Lock()

    def __call__(self, request: Mapping[str, Any], attempt: int) -> Fault | None:
        if "(hold)" not in json.dumps(request):
            return None
        with self._lock:
            self.held += 1
            if self.held >= self._count:
                self.enough.set()
        return Fault.held()


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_ctrl_c_of_run_cancels_a_stalled_llm_call_and_exits_130(store_dir):
    """SIGINT while the server holds the run's first LLM request ends `run` with 130 and one
    'interrupted' line; no retry is sent after the interrupt."""
    with ScriptedLLMServer(faults=lambda request, n: Fault.held()) as server:
        command = _command(store_dir, server, "run", "How do bees make honey?")
        proc = subprocess.Popen(command, env=ENV, stderr=subprocess.PIPE, text=True)
        assert server.wait_for_requests(1, timeout=300), "no LLM request arrived"
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=300)
        sent = server.request_count
    assert 130 == proc.returncode, stderr
    assert "interrupted" in stderr
    assert "Traceback" not in stderr
    assert 1 == sent


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_ctrl_c_of_batch_writes_running_queries_as_interrupted_and_resume_completes(
    tmp_path, store_dir, sig
):
    """SIGINT (or SIGTERM) while two queries' LLM calls are held: exit 130, the finished
    queries have ok lines, each running one an 'interrupted' error line, none of the rest; the
    same command then completes every id."""
    queries = tmp_path / "q.jsonl"
    ids = [f"q{i}" for i in range(6)]
    with queries.open("w") as fh:
        for i, qid in enumerate(ids):
            mark = " (hold)" if i >= 2 else ""
            fh.write(json.dumps({"id": qid, "query": f"How do bees make honey{mark} {i}?"}) + "\n")
    out = tmp_path / "r.jsonl"
    holder = _Holder(count=2)
    with ScriptedLLMServer(faults=holder) as server:
        command = _command(
            store_dir, server, "batch", str(queries), "--out", str(out),
            "--concurrency", "2", "--no-progress",
        )  # fmt: skip
        proc = subprocess.Popen(command, env=ENV, stderr=subprocess.PIPE, text=True)
        assert holder.enough.wait(timeout=300), "the held queries never started"
        _wait_until(lambda: out.exists() and out.read_bytes().count(b"\n") >= 2, proc)
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=300)
    assert 130 == proc.returncode, stderr
    lines = read_results(out)
    assert {"q0", "q1"} == {r.id for r in lines if r.ok}
    cut = {r.id for r in lines if not r.ok}
    assert {"q2", "q3"} == cut
    assert all(INTERRUPTED == r.error["type"] for r in lines if not r.ok)
    assert out.read_bytes().endswith(b"\n")
    with ScriptedLLMServer() as server:
        again = subprocess.run(
            _command(store_dir, server, "batch", str(queries), "--out", str(out), "--no-progress"),
            env=ENV, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
    assert 0 == again.returncode, again.stderr
    latest = latest_records(read_results(out))
    assert sorted(ids) == sorted(r.id for r in latest)
    assert all(r.ok for r in latest)
    assert 2 + 6 == len(read_results(out))  # q0, q1 were not run again


SECOND_CTRL_C = textwrap.dedent(
    """
    import threading
    from corrective_rag.cli.interrupts import handle_interrupts
    with handle_interrupts("child") as interrupts, interrupts.by_event_only() as event:
        print("ready", flush=True)
        event.wait()
        print("first", flush=True)
        threading.Event().wait()  # stuck in clean-up: only a second Ctrl-C ends it
    """
)


@pytest.mark.timeout(120)
def test_a_second_ctrl_c_exits_at_once_with_130():
    """After a first Ctrl-C, a process stuck in clean-up ends with 130 on the second."""
    proc = subprocess.Popen(
        [sys.executable, "-c", SECOND_CTRL_C],
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert "ready" == proc.stdout.readline().strip()
    proc.send_signal(signal.SIGINT)
    assert "first" == proc.stdout.readline().strip()
    proc.send_signal(signal.SIGINT)
    assert 130 == proc.wait(timeout=60)
    assert "exiting now" in (proc.stderr.read() if proc.stderr else "")
