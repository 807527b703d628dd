"""A password in ``--llm-url`` appears nowhere: not in ``run``, ``batch`` or ``judge-check``
output, not in results files, not in trace spans, not in an MCP tool's error (issue 41 item 5).

Everything is real: a store indexed by the CLI, a scripted OpenAI-compatible server on
127.0.0.1 that answers every chat request with HTTP 500 echoing the ``Authorization`` header it
got (the password, as ``Basic`` auth), the OpenTelemetry SDK's in-memory exporter with content
capture on (so exception messages are recorded), and the MCP SDK's own client over stdio.
"""

from __future__ import annotations

import base64
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from corrective_rag import observe
from corrective_rag.cli.main import main
from corrective_rag.testing import Fault, ScriptedLLMServer

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "s3cr3tpw"
BASIC = base64.b64encode(f"user:{PASSWORD}".encode()).decode()
SECRETS = (PASSWORD, BASIC)
ECHO = '{"error": {"message": "refused {authorization}"}}'
_EXPORTER = InMemorySpanExporter()


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    yield
    structlog.reset_defaults()


@pytest.fixture(scope="module", autouse=True)
def _spans() -> Iterator[None]:
    """The SDK's provider (one per process) exporting to memory, with contents captured."""
    current = trace.get_tracer_provider()
    if not isinstance(current, TracerProvider):
        current = TracerProvider()
        trace.set_tracer_provider(current)
    current.add_span_processor(SimpleSpanProcessor(_EXPORTER))
    observe.capture_content(True)
    yield
    observe.capture_content(False)
    _EXPORTER.shutdown()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real store with two documents, indexed by ``corrective-rag index``."""
    folder = tmp_path_factory.mktemp("creds")
    (folder / "docs").mkdir()
    (folder / "docs" / "moons.txt").write_text("Ganymede is the largest moon of Jupiter.")
    (folder / "docs" / "rings.txt").write_text("Saturn has bright rings of ice and rock.")
    assert 0 == main(
        ["index", str(folder / "docs"), "--store", str(folder / "store"), "--no-progress"]
    )
    structlog.reset_defaults()
    return folder / "store"


@pytest.fixture
def failing() -> Iterator[ScriptedLLMServer]:
    """A server whose /v1/models answers and whose every chat request is a 500 echoing the key."""
    with ScriptedLLMServer(faults=lambda request, n: Fault.error(500, ECHO)) as server:
        yield server


def _url(server: ScriptedLLMServer) -> str:
    return server.base_url.replace("http://", f"http://user:{PASSWORD}@")


def _span_text() -> str:
    """Every name, attribute, status and event of the spans exported so far, as one text."""
    parts = []
    for span in _EXPORTER.get_finished_spans():
        parts += [span.name, json.dumps(dict(span.attributes or {}), default=str)]
        parts.append(str(span.status.description))
        for event in span.events:
            parts.append(json.dumps(dict(event.attributes or {}), default=str))
    return "\n".join(parts)


def _assert_hidden(text: str, where: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"the password leaked into {where}"


def _llm(server: ScriptedLLMServer, store: Path) -> list[str]:
    return ["--store", str(store), "--llm-url", _url(server), "--model", "m", "--max-retries", "0"]


def test_run_batch_and_judge_check_never_show_the_password(store, failing, tmp_path, capsys):
    """``run``, ``batch`` and ``judge-check`` (text and JSON) against a server that fails: the
    error lines name the masked URL, and the password is in no output, file or span."""
    _EXPORTER.clear()
    shown: list[str] = []
    main(["--verbose", "run", "Which moon is largest?", *_llm(failing, store)])
    captured = capsys.readouterr()
    shown.append(captured.out + captured.err)
    queries = tmp_path / "queries.jsonl"
    queries.write_text('{"id": "q1", "query": "Which moon is largest?"}\n')
    out = tmp_path / "results.jsonl"
    main(["batch", str(queries), "--out", str(out), "--no-progress", *_llm(failing, store)])
    captured = capsys.readouterr()
    shown.append(captured.out + captured.err)
    check = ["judge-check", "--llm-url", _url(failing), "--model", "m", "--max-retries", "0"]
    assert 1 == main(check)
    captured = capsys.readouterr()
    shown.append(captured.out + captured.err)
    assert 1 == main([*check, "--json"])
    captured = capsys.readouterr()
    shown.append(captured.out + captured.err)
    assert failing.request_count > 0  # the LLM path ran and failed
    written = "".join(p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file())
    assert "500" in written  # the results file holds the error lines
    spans = _span_text()
    assert "chat m" in spans and "500" in spans  # the failed calls were traced, with messages
    assert "http://***@127.0.0.1" in "".join(shown) + written + spans
    for i, text in enumerate(shown):
        _assert_hidden(text, f"output {i}")
    _assert_hidden(written, "the results files")
    _assert_hidden(spans, "the spans")


def test_a_key_in_the_url_query_is_never_shown(store, failing, capsys):
    """``--llm-url ...?api_key=KEY`` with ``--verbose``: every log line and error line shows
    ``api_key=***``, never the key."""
    key = "K0123456789abcdef"
    url = failing.base_url + f"?api_key={key}"
    argv = ["--verbose", "run", "Which moon?", "--store", str(store), "--llm-url", url]
    main([*argv, "--model", "m", "--max-retries", "0"])
    captured = capsys.readouterr()
    shown = captured.out + captured.err
    assert "api_key=***" in shown
    assert key not in shown


def test_an_unreachable_url_is_reported_masked(store, capsys):
    """Nothing listening at the URL: the one error line names it with the password masked."""
    with ScriptedLLMServer() as server:
        url = _url(server)
    assert 0 != main(
        ["run", "Which moon?", "--store", str(store), "--llm-url", url, "--model", "m"]
    )
    err = capsys.readouterr().err
    assert "cannot reach the LLM server at http://***@127.0.0.1" in err
    _assert_hidden(err, "the error line")


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_an_mcp_tool_error_never_shows_the_password(store, failing, tmp_path):
    """The MCP search tool, every LLM call failing, is a tool error naming the masked URL; the
    password is neither in it nor in the server's stderr."""
    pytest.importorskip("mcp")
    import anyio
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    args = ["-m", "corrective_rag", "mcp", *_llm(failing, store)]
    params = StdioServerParameters(command=sys.executable, args=args, env=env)
    errlog = tmp_path / "server.err"

    async def go() -> Any:
        with errlog.open("w", encoding="utf-8") as err:
            async with Client(stdio_client(params, errlog=err), read_timeout_seconds=300) as client:
                return await client.call_tool("search", {"question": "Which moon is largest?"})

    reply = anyio.run(go)
    assert reply.is_error
    text = reply.content[0].text
    assert "***@127.0.0.1" in text, text
    _assert_hidden(text, "the tool error")
    _assert_hidden(errlog.read_text(errors="replace"), "the MCP server's stderr")


def test_the_options_repr_masks_every_url_and_leaves_the_keys_out():
    """``repr(Options)`` (a traceback, a debugger, a log line) shows no password, key or token."""
    from corrective_rag.cli.wiring import Options

    opts = Options(
        llm_url=f"http://user:{PASSWORD}@gw/sk-path-key-0123456789/v1?api_key=K0123456789",
        model="m",
        api_key="sk-env-0123456789",
        fallback_url="https://searx.example/search?token=T0123456789",
        qdrant=f"https://admin:{PASSWORD}@qdrant.example:6333",
        qdrant_api_key="Q0123456789",
    )
    shown = repr(opts)
    assert "llm_url='http://***@gw/***/v1?api_key=***'" in shown
    for secret in (PASSWORD, "K0123456789", "sk-env", "T0123456789", "Q0123456789", "sk-path"):
        assert secret not in shown
