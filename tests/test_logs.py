"""The library is silent until the application configures logging, then says everything."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import sys
    from corrective_rag import (
        CorrectiveRAGOrchestrator, Document, HybridStore, LocalEvaluator, LocalRewriter,
    )

    if sys.argv[1] == "logging":
        import logging
        logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(name)s %(message)s")
    elif sys.argv[1] == "structlog":
        import logging
        import structlog
        logging.basicConfig(level=logging.DEBUG, stream=sys.stdout, format="%(message)s")
        structlog.configure(
            processors=[structlog.processors.JSONRenderer()],
            wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        )
    texts = ["Ganymede is the largest moon of Jupiter.", "Io is a volcanic moon of Jupiter.",
             "Titan is the largest moon of Saturn."]
    with HybridStore.in_memory() as store:
        store.add([Document(id=f"d{i}", text=t) for i, t in enumerate(texts)])
        rag = CorrectiveRAGOrchestrator(
            store, LocalEvaluator(store.embedder, idf=store.idf), LocalRewriter(idf=store.idf),
            max_iterations=1,
        )
        result = rag.run("Which moon is the largest moon of Jupiter?")
    print("RESULT", result.stop_reason.value)
    """
)


def _run(mode: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"}
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, mode],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=True,
    )


@pytest.mark.slow
def test_a_script_that_configures_nothing_prints_only_its_own_output() -> None:
    """No structlog event reaches stdout or stderr unless the application asks for it."""
    proc = _run("none")
    assert [line for line in proc.stdout.splitlines() if line.strip()] == [proc.stdout.strip()]
    assert proc.stdout.startswith("RESULT ")
    for event in ("store_warmed_up", "store_written", "run_started", "iteration_finished"):
        assert event not in proc.stdout
        assert event not in proc.stderr


@pytest.mark.slow
def test_configured_logging_gets_the_events_with_their_fields() -> None:
    """logging.basicConfig brings the events back, under the module's logger name."""
    proc = _run("logging")
    lines = proc.stdout.splitlines()
    finished = [line for line in lines if "iteration_finished" in line]
    assert len(finished) == 1
    assert finished[0].startswith("corrective_rag.loop.orchestrator ")
    assert "run_id=" in finished[0] and "kept_ids=" in finished[0]


@pytest.mark.slow
def test_configured_structlog_renders_the_package_events() -> None:
    """An application's structlog processors and level filter apply to the package's events."""
    proc = _run("structlog")
    events = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert any('"event": "iteration_finished"' in line for line in events)
    assert not any('"event": "store_warmed_up"' in line for line in events)  # a debug event
