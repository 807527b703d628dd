"""``corrective-rag mcp``: the SDK's own client talks to the server over stdio, on a real store."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_helpers import child_env, index_store, serve_http

from corrective_rag.cli.mcp_server import parse_address
from corrective_rag.cli.mcp_shapes import MAX_DOCUMENTS, MAX_SHOWN_CHARS, RUNS_URI
from corrective_rag.errors import ConfigError
from corrective_rag.testing import ScriptedLLMServer

FILES = {
    "copying.txt": "The copy module: copy.deepcopy(x) builds a deep copy of a compound object, "
    "recursively copying nested lists and dicts so that changing the copy leaves the original "
    "alone.",
    "timing.txt": "The timeit module measures the execution time of small code snippets. "
    "timeit.timeit(stmt, number=1000) runs the statement many times and returns seconds.",
}
QUESTION = "how do I deep copy a nested list?"
SECONDS = 300  # one call may load the embedding model on a loaded machine


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real two-file store, made by ``corrective-rag index``."""
    return index_store(tmp_path_factory.mktemp("mcp"), FILES)


def _session(tmp_path: Path, *args: str) -> Client:
    """The SDK's client, spawning ``python -m corrective_rag mcp ARGS`` (this tree first)."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "corrective_rag", "mcp", *args], env=child_env()
    )
    errlog = (tmp_path / "server.err").open("w", encoding="utf-8")
    return Client(stdio_client(params, errlog=errlog), read_timeout_seconds=SECONDS)


def _talk(tmp_path: Path, args: list[str], script: Any) -> Any:
    async def go() -> Any:
        async with _session(tmp_path, *args) as client:
            return await script(client)

    return anyio.run(go)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_sdk_client_lists_the_tools_and_a_search_returns_the_kept_document(store, tmp_path):
    """Over stdio the client sees a search tool and no answer tool (no LLM given); a search
    returns the document that answers the question, with its verdict and the stop reason, and
    the run is then readable as a resource."""

    async def script(client: Client) -> Any:
        tools = await client.list_tools()
        found = await client.call_tool("search", {"question": QUESTION})
        runs = await client.read_resource(RUNS_URI)
        listed = json.loads(runs.contents[0].text)
        one = await client.read_resource(listed[0]["uri"])
        return tools, found, listed, json.loads(one.contents[0].text)

    tools, found, listed, record = _talk(tmp_path, ["--store", str(store)], script)
    assert ["search"] == [t.name for t in tools.tools]
    assert not found.is_error
    out = found.structured_content
    assert [f"{store.parent / 'docs' / 'copying.txt'}#0"] == [d["id"] for d in out["documents"]]
    document = out["documents"][0]
    assert FILES["copying.txt"] == document["text"]
    assert document["verdict"]["relevant"] is True
    assert out["stop_reason"] in {"enough_relevant", "kept_unconfident", "no_progress"}
    assert [out["run_id"]] == [r["run_id"] for r in listed]
    assert QUESTION == record["question"]
    assert record["history"]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_missing_store_and_bad_arguments_are_tool_errors_and_the_server_lives_on(tmp_path):
    """A store that is not there, an empty question and a top_k out of range each come back as
    a tool error naming the problem; the server answers the next request every time."""
    missing = tmp_path / "nowhere"

    async def script(client: Client) -> Any:
        replies = [
            await client.call_tool("search", {"question": QUESTION}),
            await client.call_tool("search", {"question": "   "}),
            await client.call_tool("search", {"question": QUESTION, "top_k": 0}),
            await client.call_tool("search", {"question": 42}),
        ]
        tools = await client.list_tools()
        return replies, tools

    replies, tools = _talk(tmp_path, ["--store", str(missing)], script)
    assert [True, True, True, True] == [r.is_error for r in replies]
    texts = [r.content[0].text for r in replies]
    assert "nowhere" in texts[0]
    assert "empty" in texts[1]
    assert "top_k" in texts[2] or "not found" in texts[2]
    assert ["search"] == [t.name for t in tools.tools]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_with_an_llm_the_answer_tool_cites_the_kept_documents(store, tmp_path):
    """Given an LLM (a real HTTP server on 127.0.0.1), the server offers an answer tool whose
    answer cites the ids of kept documents, and the run's record holds the answer."""
    with ScriptedLLMServer() as llm:
        args = ["--store", str(store), "--llm-url", llm.base_url, "--model", "scripted"]

        async def script(client: Client) -> Any:
            tools = await client.list_tools()
            answered = await client.call_tool(
                "answer", {"question": "what does copy.deepcopy build?"}
            )
            record = await client.read_resource(
                f"{RUNS_URI}/{answered.structured_content['run_id']}"
            )
            return tools, answered, json.loads(record.contents[0].text)

        tools, answered, record = _talk(tmp_path, args, script)
    assert ["answer", "search"] == sorted(t.name for t in tools.tools)
    assert not answered.is_error, answered.content[0].text
    out = answered.structured_content
    kept = {d["id"] for d in out["documents"]}
    assert out["cited_ids"] and set(out["cited_ids"]) <= kept
    assert out["answer"] == record["answer"]["text"]


def test_http_addresses_default_to_loopback():
    """``--http`` takes HOST:PORT, :PORT or PORT (then on 127.0.0.1; 0 picks a free port); a
    bad port is refused."""
    assert ("127.0.0.1", 8000) == parse_address("8000")
    assert ("127.0.0.1", 8000) == parse_address(":8000")
    assert ("0.0.0.0", 9) == parse_address("0.0.0.0:9")
    assert ("::1", 80) == parse_address("[::1]:80")
    assert ("127.0.0.1", 0) == parse_address("0")
    for bad in ("localhost", "127.0.0.1:-1", "127.0.0.1:70000", ""):
        with pytest.raises(ConfigError):
            parse_address(bad)


def test_returned_documents_are_bounded():
    """However long the kept documents, one call returns at most MAX_DOCUMENTS of them, each
    text cut at MAX_SHOWN_CHARS characters and marked as cut."""
    from corrective_rag.cli.mcp_shapes import summary
    from corrective_rag.types import (
        Document,
        KeptDocument,
        PhaseUsage,
        Relevance,
        RunResult,
        StopReason,
        Verdict,
    )

    kept = tuple(
        KeptDocument(
            Document(f"d{i}", "x" * (MAX_SHOWN_CHARS * 3)),
            Verdict(f"d{i}", True, Relevance.HIGH, 0.9, 0.9, reasoning="y" * 10_000),
            1,
            i,
        )
        for i in range(MAX_DOCUMENTS + 5)
    )
    result = RunResult("r", "q", "q", kept, StopReason.ITERATION_CAP, "", (), PhaseUsage(), 0.0)
    out = summary(result)
    assert MAX_DOCUMENTS + 5 == out["kept"]
    assert MAX_DOCUMENTS == len(out["documents"])
    assert {MAX_SHOWN_CHARS} == {len(d["text"]) for d in out["documents"]}
    assert all(d["truncated"] for d in out["documents"])
    assert all(len(d["verdict"]["reasoning"]) < 1000 for d in out["documents"])


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_over_streamable_http_the_client_lists_the_tools_and_reads_tool_errors(tmp_path):
    """With --http on a free port, the server says where it listens once bound; the SDK's HTTP
    client lists the tools there, and a store that is missing is a tool error over HTTP too."""
    proc, url = serve_http(tmp_path / "nowhere")
    try:

        async def go() -> Any:
            async with Client(url, read_timeout_seconds=SECONDS) as client:
                tools = await client.list_tools()
                return tools, await client.call_tool("search", {"question": QUESTION})

        tools, found = anyio.run(go)
    finally:
        proc.kill()
        proc.wait(timeout=60)
    assert ["search"] == [t.name for t in tools.tools]
    assert found.is_error
    assert "nowhere" in found.content[0].text


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_run_whose_llm_calls_all_fail_is_a_tool_error_without_the_key(store):
    """When every LLM call of a search fails, the tool says so (an empty result would read as
    "nothing relevant"), and the API key the server echoed back is masked in the message."""
    from corrective_rag.cli.mcp_server import build_server
    from corrective_rag.cli.mcp_service import SearchService
    from corrective_rag.cli.wiring import Options
    from corrective_rag.testing import Fault

    key = "sk-test-0123456789abcdef"
    failing = Fault.error(401, body='{"error": {"message": "bad key {authorization}"}}')
    with ScriptedLLMServer(faults=lambda request, attempt: failing) as llm:
        opts = Options(store=str(store), llm_url=llm.base_url, model="m", api_key=key)
        service = SearchService(opts, secrets=(key,))

        async def go() -> Any:
            async with Client(build_server(service)) as client:
                return await client.call_tool("search", {"question": QUESTION})

        try:
            found = anyio.run(go)
        finally:
            service.close()
    assert found.is_error
    text = found.content[0].text
    assert "every LLM call of this run failed" in text
    assert key not in text


def _properties(schema: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every property of a JSON schema, nested objects and list items included ($defs read)."""
    defs = schema.get("$defs", {})

    def walk(node: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any]]]:
        if "$ref" in node:
            node = defs[node["$ref"].rsplit("/", 1)[1]]
        for name, prop in node.get("properties", {}).items():
            yield f"{path}{name}", prop
            yield from walk(prop, f"{path}{name}.")
        for sub in [*node.get("anyOf", []), *([node["items"]] if "items" in node else [])]:
            yield from walk(sub, path)

    yield from walk(schema, "")


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_no_list_changed_is_advertised_and_every_output_field_is_described(tmp_path, mode):
    """The tools, prompts and resources lists never change, so no listChanged is advertised
    (the SDK advertises all three on 2026-07-28); run updates are (subscribe) where the protocol
    delivers them. Every field of both tools' output schemas, nested ones too, has a
    description."""
    from corrective_rag.cli.mcp_server import build_server
    from corrective_rag.cli.mcp_service import SearchService
    from corrective_rag.cli.wiring import Options

    opts = Options(store=str(tmp_path / "nowhere"), llm_url="http://127.0.0.1:9/v1", model="m")
    service = SearchService(opts)

    async def go() -> Any:
        async with Client(build_server(service), mode=mode) as client:
            return client.server_capabilities, await client.list_tools()

    try:
        capabilities, tools = anyio.run(go)
    finally:
        service.close()
    assert capabilities.tools.list_changed is False
    assert capabilities.prompts.list_changed is False
    assert capabilities.resources.list_changed is False
    assert capabilities.resources.subscribe is (mode == "auto")
    schemas = {t.name: t.output_schema for t in tools.tools}
    assert {"answer", "search"} == set(schemas)
    fields = {name: dict(_properties(schema)) for name, schema in schemas.items()}
    top = {"run_id", "question", "final_query", "stop_reason", "stop_detail", "iterations"}
    assert top | {"kept", "documents"} <= set(fields["search"])
    assert {"documents.verdict.reasoning", "cited_ids"} <= set(fields["answer"])
    undescribed = [
        f"{t}: {f}"
        for t, props in fields.items()
        for f, p in props.items()
        if not p.get("description")
    ]
    assert [] == undescribed
