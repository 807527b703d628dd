"""``corrective-rag mcp`` driven by a second client library, fastmcp's ``Client``, over stdio
and streamable HTTP (beside the official SDK's tests in test_mcp.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
pytest.importorskip("fastmcp")

import anyio
from fastmcp import Client
from fastmcp.client.transports import StdioTransport, StreamableHttpTransport
from mcp_helpers import child_env, index_store, serve_http

from corrective_rag.cli.mcp_service import MAX_QUESTION_CHARS
from corrective_rag.cli.mcp_shapes import MAX_DOCUMENTS, RUNS_URI

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
    return index_store(tmp_path_factory.mktemp("fastmcp"), FILES)


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
        env=child_env(),
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
    token, on its default protocol (stateless 2026-07-28), does all a stdio client does, its
    run listed, and one without the token is refused."""
    proc, url = serve_http(store, env={"CORRECTIVE_RAG_MCP_TOKEN": TOKEN})
    try:

        async def go() -> tuple[dict[str, Any], Any]:
            # fastmcp's default protocol (2026-07-28, stateless): the client is the cookie
            # the server gave it, so it lists and reads back its runs.
            transport = StreamableHttpTransport(url, auth=TOKEN)
            async with Client(transport, timeout=SECONDS) as c:
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
