"""The asyncio service example (scripts/async_service.py) answers, stops, and stops spending."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import signal
import subprocess
import sys
import threading
import urllib.parse
import urllib.request
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from corrective_rag.evaluate.llm import LLMEvaluator
from corrective_rag.llm.client import OpenAIChatClient
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.rewrite.llm import LLMRewriter
from corrective_rag.testing import Fault, ScriptedLLMServer
from corrective_rag.testing.fakes import ListRetriever
from corrective_rag.types import Document

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "async_service.py"
QUESTION = "How do I encode binary data as base64 text?"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("async_service", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _get(url: str, data: bytes | None = None) -> Any:
    headers = {"Content-Type": "application/json"} if data else {}
    request = urllib.request.Request(url, data=data, headers=headers)
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.loads(response.read())


@pytest.mark.timeout(300)
def test_the_service_answers_offline_and_stops_on_sigterm():
    """Run as a program, the service answers GET and POST with kept stdlib docs and exits 0 on
    SIGTERM (its own handler, set with loop.add_signal_handler)."""
    child = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--port", "0", "--modules", "12"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()  # the marker line: the socket accepts connections
        if not line:  # the service ended before listening: say why, not just "''"
            assert child.stderr is not None
            pytest.fail(f"service exited {child.wait(timeout=60)}: {child.stderr.read()[-2000:]}")
        assert line.startswith("listening on http://127.0.0.1:"), line
        base = line.split()[-1]
        assert {"status": "ok"} == _get(f"{base}/health")
        got = _get(f"{base}/ask?q=" + urllib.parse.quote(QUESTION))
        posted = _get(f"{base}/ask", json.dumps({"question": QUESTION}).encode())
        child.send_signal(signal.SIGTERM)
        out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert 0 == child.returncode, err
    assert "stopped" in out
    assert QUESTION == got["question"]
    assert got["kept"], got
    assert any("base64" in k["id"] for k in got["kept"]), got
    assert [k["id"] for k in got["kept"]] == [k["id"] for k in posted["kept"]]


@pytest.mark.timeout(120)
def test_a_client_that_hangs_up_stops_its_run():
    """A client leaving before its answer cancels the run: the server's dripped LLM answer sees
    the hang-up, and no other LLM call is made."""
    service = _script()
    ended = threading.Event()

    class Server(ScriptedLLMServer):
        def _end(self) -> None:
            super()._end()
            ended.set()  # a dripped answer ends only when the client hangs up (or at stop)

    corpus = [Document("tmp", "tempfile creates temporary files and directories.")]
    with Server(faults=lambda request, n: Fault.drip(0.02)) as server:
        chat = OpenAIChatClient(server.base_url, "scripted")
        orch = CorrectiveRAGOrchestrator(
            ListRetriever(corpus), LLMEvaluator(chat), LLMRewriter(chat)
        )

        async def main() -> None:
            listening = await asyncio.start_server(service.handler(orch), "127.0.0.1", 0)
            port = listening.sockets[0].getsockname()[1]
            async with listening:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(b"GET /ask?q=temporary+file HTTP/1.1\r\nHost: x\r\n\r\n")
                await writer.drain()
                assert await asyncio.to_thread(server.wait_for_requests, 1, 60)
                writer.close()  # the client disconnects while the judge call is in flight
                await writer.wait_closed()
                assert await asyncio.to_thread(ended.wait, 30), "the LLM call was not abandoned"

        asyncio.run(main())
        assert 1 == server.request_count


def test_the_fastapi_variant_answers():
    """With FastAPI installed, the same service answers through its TestClient."""
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    service = _script()
    corpus = [
        Document("tmp", "tempfile creates temporary files and directories securely."),
        Document("csv", "The csv module reads and writes comma separated values."),
    ]
    with ScriptedLLMServer() as server:
        chat = OpenAIChatClient(server.base_url, "scripted")
        orch = CorrectiveRAGOrchestrator(
            ListRetriever(corpus), LLMEvaluator(chat), LLMRewriter(chat)
        )
        with TestClient(service.fastapi_app(orch)) as client:
            got = client.get("/ask", params={"q": "create temporary files"})
            posted = client.post("/ask", json={"question": "create temporary files"})
            empty = client.get("/ask", params={"q": " "})
    assert 200 == got.status_code
    assert ["tmp"] == [k["id"] for k in got.json()["kept"]]
    assert got.json()["kept"] == posted.json()["kept"]
    assert 400 == empty.status_code
