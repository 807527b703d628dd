"""A small asyncio service that answers questions with the corrective loop, offline.

    python scripts/async_service.py [--port 8000] [--modules 20]
    curl 'http://127.0.0.1:8000/ask?q=How+do+I+encode+binary+data+as+base64+text'

The corpus is the standard library's docstrings (as in ``corrective-rag demo``), judged by the
local judge, so the service needs no model server and no network. Each request awaits
``orchestrator.arun(question)``; the run executes in a worker thread, so the event loop keeps
serving other clients meanwhile. When a client hangs up before its answer, the service cancels
its run (with an LLM judge, that abandons the calls in flight and stops the spending).

Two front ends over one orchestrator:

- plain asyncio (``asyncio.start_server``, this file only): ``GET /ask?q=...`` and
  ``POST /ask`` with ``{"question": "..."}``; ``GET /health``;
- FastAPI, when it is installed (``pip install fastapi uvicorn``, ``--fastapi``): the same
  routes, from :func:`fastapi_app`.

The service prints ``listening on http://HOST:PORT`` once it accepts connections, and stops on
SIGINT or SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import signal
import sys
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

import structlog

from corrective_rag import (
    CorrectiveRAGError,
    CorrectiveRAGOrchestrator,
    HybridStore,
    LocalEvaluator,
    LocalRewriter,
    RunResult,
)
from corrective_rag.cli.demo import STDLIB_MODULES, stdlib_documents

MAX_REQUEST_BYTES = 64 * 1024  # a question is at most a few hundred words; refuse the rest
HEADER_TIMEOUT = 10.0  # seconds a client gets to send its request head


def build(store: HybridStore, *, modules: int) -> CorrectiveRAGOrchestrator:
    """Index ``modules`` stdlib modules into ``store``; the loop over it with the local judge."""
    store.add(stdlib_documents(STDLIB_MODULES[:modules]))
    return CorrectiveRAGOrchestrator(
        store,
        LocalEvaluator(store.embedder, idf=store.idf),
        LocalRewriter(idf=store.idf),
        max_iterations=3,
        top_k=5,
        min_relevant=3,
    )


def answer_json(result: RunResult) -> dict[str, Any]:
    """What the service returns for one run: the kept documents, best first, and why it stopped."""
    return {
        "question": result.question,
        "run_id": result.run_id,
        "stop_reason": result.stop_reason.value,
        "iterations": result.iterations,
        "kept": [
            {"id": k.document.id, "score": k.verdict.score, "text": k.document.text[:300]}
            for k in result.kept
        ],
    }


# -- plain asyncio -----------------------------------------------------------------------------


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, str, bytes]:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEADER_TIMEOUT)
    if len(head) > MAX_REQUEST_BYTES:
        raise ValueError("request head too large")
    lines = head.decode("latin-1").split("\r\n")
    method, target, _ = lines[0].split(" ", 2)
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    if not 0 <= length <= MAX_REQUEST_BYTES:
        raise ValueError("request body too large")
    body = await asyncio.wait_for(reader.readexactly(length), HEADER_TIMEOUT) if length else b""
    return method, target, body


def _question(method: str, target: str, body: bytes) -> str | None:
    url = urlsplit(target)
    if method == "GET":
        asked = parse_qs(url.query).get("q")
        return asked[0] if asked else None
    data = json.loads(body or b"{}")
    question = data.get("question") if isinstance(data, dict) else None
    return question if isinstance(question, str) else None


async def _send(writer: asyncio.StreamWriter, status: int, payload: dict[str, Any]) -> None:
    body = json.dumps(payload, ensure_ascii=False).encode()
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}.get(status, "Error")
    writer.write(
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        + body
    )
    await writer.drain()


async def _until_hang_up(reader: asyncio.StreamReader) -> None:
    """Return when the client closes its side (one request per connection: nothing else comes)."""
    while await reader.read(4096):
        pass


def handler(
    orchestrator: CorrectiveRAGOrchestrator,
) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Any]:
    """The connection handler of the plain asyncio service."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                method, target, body = await _read_request(reader)
            except (ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                await _send(writer, 400, {"error": "malformed request"})
                return
            path = urlsplit(target).path
            if path == "/health":
                await _send(writer, 200, {"status": "ok"})
                return
            if path != "/ask" or method not in ("GET", "POST"):
                await _send(writer, 404, {"error": "try GET /ask?q=... or POST /ask"})
                return
            try:
                question = _question(method, target, body)
            except ValueError:
                question = None
            if not question:
                await _send(writer, 400, {"error": "give a question: ?q=... or {'question'}"})
                return
            run = asyncio.ensure_future(orchestrator.arun(question))
            gone = asyncio.ensure_future(_until_hang_up(reader))
            await asyncio.wait({run, gone}, return_when=asyncio.FIRST_COMPLETED)
            if not run.done():  # the client left: cancel its run (and its LLM calls)
                run.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await run
                return
            gone.cancel()
            try:
                await _send(writer, 200, answer_json(run.result()))
            except CorrectiveRAGError as exc:
                await _send(writer, 400, {"error": str(exc)})
        except (ConnectionError, asyncio.TimeoutError):
            pass  # the client went away or never finished its request
        finally:
            writer.close()

    return handle


async def serve(orchestrator: CorrectiveRAGOrchestrator, host: str, port: int) -> None:
    """Serve until SIGINT or SIGTERM."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    server = await asyncio.start_server(handler(orchestrator), host, port)
    bound = server.sockets[0].getsockname()
    print(f"listening on http://{bound[0]}:{bound[1]}", flush=True)
    async with server:
        await stop.wait()
    print("stopped", flush=True)


# -- FastAPI (optional) ------------------------------------------------------------------------


def fastapi_app(orchestrator: CorrectiveRAGOrchestrator) -> Any:
    """The same service as a FastAPI app (needs ``pip install fastapi``)."""
    from fastapi import Body, FastAPI, HTTPException

    app = FastAPI(title="corrective_rag")

    async def ask(question: str) -> dict[str, Any]:
        try:
            result = await orchestrator.arun(question)
        except CorrectiveRAGError as exc:
            raise HTTPException(status_code=400, detail=str(exc)) from exc
        return answer_json(result)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/ask")
    async def ask_get(q: str) -> dict[str, Any]:
        return await ask(q)

    @app.post("/ask")
    async def ask_post(question: str = Body(embed=True)) -> dict[str, Any]:  # {"question": ...}
        return await ask(question)

    return app


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000, help="0: any free port")
    parser.add_argument("--modules", type=int, default=20, help="stdlib modules to index")
    parser.add_argument("--fastapi", action="store_true", help="serve with FastAPI + uvicorn")
    args = parser.parse_args(argv)
    # warnings and errors to stderr; stdout carries only the service's own lines
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )
    with HybridStore.in_memory() as store:
        orchestrator = build(store, modules=args.modules)
        if args.fastapi:
            import uvicorn

            uvicorn.run(fastapi_app(orchestrator), host=args.host, port=args.port)
        else:
            asyncio.run(serve(orchestrator, args.host, args.port))
    return 0


if __name__ == "__main__":
    sys.exit(main())
