"""Every command and mode that calls an LLM holds the same promises (issue 48, "Every command that
calls an LLM keeps --deadline/--timeout and masks URLs through the same code").

``run``, ``batch``, ``judge-check`` (plain, ``--compare``, ``--pairs``) and ``mcp``'s search,
each against real servers on 127.0.0.1 reached through a URL holding a password, or with a key:

* a server whose every chat answer is HTTP 500 echoing the ``Authorization`` header it got
  (the password's Basic token, or the environment's key as Bearer);
* a server that drips its replies (a keep-alive line at a time, never finishing);
* a server reached with a key in the URL's query (``?api_key=``), which it does not route:
  every request is answered 404, and the URL is in the errors.

No output (stdout, stderr, written files, the MCP tool's answer) holds the password, its Basic
token or the key; against the dripping server each ends by its ``--timeout``/``--deadline``
(this test's own timeout is the bound) with an error that says so. The last round's
``judge-check --compare`` printed ``http://user:S3cret@...?api_key=sk-...`` and ran 34 s past a
5 s deadline.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from corrective_rag.cli.main import build_parser, main
from corrective_rag.evaluate.check.pairs import CHECK_PAIRS
from corrective_rag.testing import Fault, HostileLLMServer, ScriptedLLMServer

PASSWORD = "S3cretPw0rd"
BASIC = base64.b64encode(f"user:{PASSWORD}".encode()).decode()
KEY = "sk-envkey-0123456789abcdef"
URL_KEY = "sk-urlkey-9876543210fedcba"
SECRETS = (PASSWORD, BASIC, KEY, URL_KEY)
ECHO = '{"error": {"message": "refused {authorization}"}}'
COMMANDS = ("run", "batch", "judge-check", "judge-check --compare", "judge-check --pairs", "mcp")


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    yield
    structlog.reset_defaults()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("doors")
    (folder / "docs").mkdir()
    (folder / "docs" / "moons.txt").write_text("Ganymede is the largest moon of Jupiter.")
    assert 0 == main(
        ["index", str(folder / "docs"), "--store", str(folder / "store"), "--no-progress"]
    )
    structlog.reset_defaults()
    return folder / "store"


def _server(kind: str) -> ScriptedLLMServer:
    if kind.startswith("echo"):
        return ScriptedLLMServer(faults=lambda request, n: Fault.error(500, ECHO))
    if kind == "drip":
        return HostileLLMServer("drip", interval=0.2)
    return ScriptedLLMServer()


def _url(server: ScriptedLLMServer, kind: str) -> str:
    if kind == "echo-key":  # the key from the environment, sent as Bearer (no user-info)
        return server.base_url
    url = server.base_url.replace("http://", f"http://user:{PASSWORD}@")
    return url + f"?api_key={URL_KEY}" if kind == "query-key" else url


def _argv(command: str, url: str, store: Path, tmp: Path) -> list[str]:
    bounds = ["--timeout", "2", "--max-retries", "0"]
    llm = ["--llm-url", url, "--model", "m", *bounds]
    if command == "run":
        return ["-v", "run", "Which moon is largest?", "--store", str(store), *llm]
    if command == "batch":
        queries = tmp / "queries.jsonl"
        queries.write_text('{"id": "q1", "query": "Which moon is largest?"}\n')
        out = ["--out", str(tmp / "results.jsonl"), "--no-progress"]
        return ["-v", "batch", str(queries), *out, "--store", str(store), *llm]
    check = ["-v", "judge-check", *llm, "--deadline", "5"]
    if command != "judge-check":
        check += ["--calibration", str(tmp / "p.json")]
    if command == "judge-check --compare":
        return [*check, "--compare", "--judges", "verbal,logprob,pointwise"]
    if command == "judge-check --pairs":
        pairs = tmp / "pairs.jsonl"
        rows = [
            {"question": p.question, "text": p.document.text, "relevant": p.relevant}
            for p in CHECK_PAIRS[:8]
        ]
        pairs.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
        return [*check, "--pairs", str(pairs), "--judges", "verbal,pointwise"]
    return check


def _mcp(url: str, store: Path) -> str:
    """The search tool's answer, from the options ``mcp`` builds out of its flags."""
    anyio = pytest.importorskip("anyio")
    pytest.importorskip("mcp")
    from mcp import Client

    from corrective_rag.cli.environment import secrets
    from corrective_rag.cli.mcp_server import SearchService, build_server
    from corrective_rag.cli.options import options

    flags = ["--llm-url", url, "--model", "m", "--timeout", "2", "--max-retries", "0"]
    args = build_parser().parse_args(["mcp", "--store", str(store), *flags])
    service = SearchService(options(args), secrets=secrets())

    async def go() -> Any:
        async with Client(build_server(service)) as client:
            return await client.call_tool("search", {"question": "Which moon is largest?"})

    try:
        found = anyio.run(go)
    finally:
        service.close()
    assert found.is_error  # every LLM call failed: said, not returned as an empty result
    return "\n".join(getattr(c, "text", "") for c in found.content)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("kind", ["echo", "echo-key", "drip", "query-key"])
@pytest.mark.parametrize("command", COMMANDS)
def test_no_secret_is_shown_and_the_deadline_is_kept(
    command, kind, store, tmp_path, capsys, monkeypatch
):
    """No password, Basic token or key in any output; each ends with an error that says why.

    A password in the URL and a key in the environment together are refused before any call
    (both would go in the one Authorization header): the ``query-key`` case holds both."""
    if kind in ("echo-key", "query-key"):
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
    else:
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with _server(kind) as server:
        url = _url(server, kind)
        if command == "mcp":
            shown = _mcp(url, store)
            code = 1
        else:
            code = main(_argv(command, url, store, tmp_path))
            captured = capsys.readouterr()
            shown = captured.out + captured.err
        asked = server.request_count
    written = "".join(p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file())
    for secret in SECRETS:
        assert secret not in shown, f"{command} showed a secret against the {kind} server"
        assert secret not in written, f"{command} wrote a secret against the {kind} server"
    assert code != 0
    if kind != "query-key":  # the LLM path ran (a query the server does not route is a 404)
        assert asked > 0, shown
    if kind == "drip" and command.startswith("judge-check"):
        assert "deadline of 5 s passed" in shown or "timed out" in shown.lower()
