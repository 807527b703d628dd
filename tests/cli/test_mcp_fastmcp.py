"""``corrective-rag mcp`` driven by a second client library, fastmcp's ``Client``, over stdio
and streamable HTTP (beside the official SDK's tests in test_mcp.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
pytest.importorskip("fastmcp")

import anyio
from fastmcp import Client
from fastmcp.client.transports import StdioTransport, StreamableHttpTransport

from corrective_rag.cli.main import main
from corrective_rag.cli.mcp_server import MAX_DOCUMENTS, MAX_QUESTION_CHARS, RUNS_URI

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "a-token-for-the-fastmcp-client"
FILES = {
    "copying.txt": "The copy module: copy.deepcopy(x) builds a deep copy of a compound object, "
    "recursively copying nested lists and dicts so that changing the copy leaves the original "
    "alone.",
    "shallow.txt": "copy.copy(x) makes a shallow copy of a list: nested lists inside are shared "
    "with the original, so use copy.deepcopy for a deep copy of nested lists.",
    "timing.txt": "The timeit module measures the execution time of small code snippets. "
    "timeit.timeit(stmt, number=1000) runs the statement many times and returns seconds.",
}
QUESTION = "how do I deep copy a nested list?"
SECONDS = 300


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real three-file store, made by ``corrective-rag index``."""
    folder = tmp_path_factory.mktemp("fastmcp")
    docs = folder / "docs"
    docs.mkdir()
    for name, text in FILES.items():
        (docs / name).write_text(text, encoding="utf-8")
    assert 0 == main(["index", str(docs), "--store", str(folder / "store"), "--no-progress"])
    return folder / "store"


def _env(**extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    env.pop("CORRECTIVE_RAG_MCP_TOKEN", None)
    return {**env, **extra}


async def _script(client: Client) -> dict[str, Any]:
    """What a new user's client does: list, call with a cap, read the runs, ask for a bad one."""
    tools = await client.list_tools()
    one = await client.call_tool("search", {"question": QUESTION, "top_k": 1})
    too_long = await client.call_tool(
        "search", {"question": "x" * (MAX_QUESTION_CHARS + 1)}, raise_on_error=False
    )
    runs = json.loads((await client.read_resource(RUNS_URI))[0].text)
    try:
        await client.read_resource(f"{RUNS_URI}/no-such-run")
        unknown: Any = None
    except Exception as exc:  # fastmcp raises the SDK's MCPError for a JSON-RPC error
        unknown = exc
    return {"tools": tools, "one": one, "too_long": too_long, "runs": runs, "unknown": unknown}


def _check(seen: dict[str, Any]) -> None:
    (tool,) = seen["tools"]
    assert "search" == tool.name
    assert tool.title
    assert tool.annotations.read_only_hint is True
    assert tool.annotations.destructive_hint is False
    assert tool.annotations.open_world_hint is False  # offline: no LLM, no web
    assert not tool.description.startswith(" ") and "\n    " not in tool.description
    properties = tool.input_schema["properties"]
    assert all(p.get("description") for p in properties.values())
    assert MAX_QUESTION_CHARS == properties["question"]["maxLength"]
    bounds = next(b for b in properties["top_k"]["anyOf"] if b.get("type") == "integer")
    assert (1, MAX_DOCUMENTS) == (bounds["minimum"], bounds["maximum"])
    out = seen["one"].structured_content
    assert 1 == len(out["documents"])
    assert out["kept"] >= 1
    assert seen["too_long"].is_error
    assert [out["run_id"]] == [r["run_id"] for r in seen["runs"]]
    assert -32602 == seen["unknown"].error.code


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_fastmcp_over_stdio(store, tmp_path):
    """Over stdio, fastmcp's client reads a described and bounded schema, the annotations and
    a clean description; top_k=1 returns one document; a question past the cap is a tool
    error; its run is listed; an unknown run is -32602."""
    transport = StdioTransport(
        sys.executable,
        ["-m", "corrective_rag", "mcp", "--store", str(store)],
        env=_env(),
        log_file=tmp_path / "server.err",
    )

    async def go() -> dict[str, Any]:
        async with Client(transport, timeout=SECONDS) as client:
            return await _script(client)

    _check(anyio.run(go))


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_fastmcp_over_http_with_a_token(store):
    """Over streamable HTTP with CORRECTIVE_RAG_MCP_TOKEN set, fastmcp's client with that bearer
    token does all a stdio client does (in a session of the initialize handshake, whose runs it
    lists), and one without the token is refused."""
    args = ["mcp", "--store", str(store), "--http", "127.0.0.1:0"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "corrective_rag", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(CORRECTIVE_RAG_MCP_TOKEN=TOKEN),
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()  # the marker line, written once the socket is bound
        assert line.startswith("corrective-rag mcp: serving http://127.0.0.1:"), line
        url = line.rsplit(" ", 1)[1].strip()

        async def go() -> tuple[dict[str, Any], Any]:
            # The handshake: a session, whose runs it lists (2026-07-28 HTTP has no session).
            transport = StreamableHttpTransport(url, auth=TOKEN)
            async with Client(transport, timeout=SECONDS, mode="legacy") as c:
                seen = await _script(c)
            try:
                async with Client(StreamableHttpTransport(url), timeout=SECONDS) as c:
                    await c.list_tools()
                refused: Any = None
            except Exception as exc:
                refused = exc
            return seen, refused

        seen, refused = anyio.run(go)
    finally:
        proc.kill()
        proc.wait(timeout=60)
    _check(seen)
    assert refused is not None
