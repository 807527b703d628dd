"""``corrective-rag mcp``: a store's corrected search as Model Context Protocol tools.

Built on the official SDK (``pip install 'corrective_rag[mcp]'``), imported only when the
command runs. Tools:

* ``search``: a question in; the documents the loop kept (id, text, verdict), the stop reason
  and the run id out. Each text is cut at :data:`MAX_SHOWN_CHARS` characters and at most
  :data:`MAX_DOCUMENTS` documents are returned, so one call cannot flood an agent's context.
* ``answer`` (only with an LLM: ``--llm-url``/``--model`` or ``--local-llm``): the same search,
  then an answer written from the kept documents, citing their ids.

Resources: ``corrective-rag://runs`` lists this server's runs (newest last, the last
:data:`MAX_RUNS` kept) and ``corrective-rag://runs/{run_id}`` is one run's whole record, in
the format of ``corrective-rag batch`` results.

The store is opened on the first call, not at start, so a client's handshake never waits for
the embedding model; a missing store, a bad argument or a failed LLM call is a tool error with
a message the agent can read, and the server keeps serving (the next call tries the store
again: index it meanwhile and it is found).
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections import OrderedDict
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from typing_extensions import TypedDict  # pydantic reads a TypedDict's schema from this one

from corrective_rag.errors import ConfigError, CorrectiveRAGError, InputError, LLMError
from corrective_rag.inputs import check_query

if TYPE_CHECKING:
    from corrective_rag.cli.wiring import Options
    from corrective_rag.types import RunResult

__all__ = [
    "MAX_DOCUMENTS",
    "MAX_RUNS",
    "MAX_SHOWN_CHARS",
    "RUNS_URI",
    "SearchService",
    "build_server",
    "parse_address",
    "serve",
]

MAX_DOCUMENTS = 20  # kept documents returned by one call (top_k is capped the same)
MAX_SHOWN_CHARS = 2000  # of one document's text: ~500 tokens, a chunk and then some
MAX_REASONING_CHARS = 300  # of a verdict's reasoning
MAX_RUNS = 100  # runs kept for the resources; older ones are forgotten
RUNS_URI = "corrective-rag://runs"
SERVER_NAME = "corrective-rag"


class VerdictOut(TypedDict):
    """Why the judge kept a document: relevant, score and confidence in 0..1, a short reason."""

    relevant: bool | None
    score: float | None
    confidence: float | None
    label: str | None
    reasoning: str


class DocumentOut(TypedDict):
    """A kept document: its id (cite it), text (cut when ``truncated``), source file, verdict."""

    id: str
    text: str
    truncated: bool
    source: str | None
    iteration: int
    verdict: VerdictOut


class SearchOut(TypedDict):
    """What the search tool returns: the kept documents, best first, and how the run ended."""

    run_id: str
    question: str
    final_query: str
    stop_reason: str
    stop_detail: str
    iterations: int
    kept: int
    documents: list[DocumentOut]


class AnswerOut(SearchOut):
    """What the answer tool returns: the search's fields, the answer and the ids it cites."""

    answer: str
    cited_ids: list[str]
    abstained: bool
    supported: bool | None


def _cut(text: str, limit: int) -> tuple[str, bool]:
    return (text, False) if len(text) <= limit else (text[:limit], True)


def _document(kept: Any) -> DocumentOut:
    """One kept document as the tools return it: bounded text, its verdict, where it came from."""
    text, truncated = _cut(kept.document.text, MAX_SHOWN_CHARS)
    verdict = kept.verdict
    source = kept.document.metadata.get("source")
    return {
        "id": kept.document.id,
        "text": text,
        "truncated": truncated,
        "source": source if isinstance(source, str) else None,
        "iteration": kept.iteration,
        "verdict": {
            "relevant": verdict.relevant,
            "score": verdict.score,
            "confidence": verdict.confidence,
            "label": verdict.label.value if verdict.label is not None else None,
            "reasoning": _cut(verdict.reasoning, MAX_REASONING_CHARS)[0],
        },
    }


def _summary(result: RunResult) -> SearchOut:
    """What every tool returns about a run: its id, how it ended and the kept documents."""
    return {
        "run_id": result.run_id,
        "question": result.question,
        "final_query": result.final_query,
        "stop_reason": result.stop_reason.value,
        "stop_detail": result.stop_detail,
        "iterations": result.iterations,
        "kept": len(result.kept),
        "documents": [_document(k) for k in result.kept[:MAX_DOCUMENTS]],
    }


class SearchService:
    """The corrective loop over one store, opened on first use, with this session's runs.

    Thread-safe: the SDK runs each tool call in a worker thread. ``close`` releases the store
    (and an embedded LLM server).
    """

    def __init__(self, opts: Options, *, secrets: tuple[str, ...] = ()) -> None:
        self.opts = opts
        self.secrets = secrets
        self._lock = threading.Lock()
        self._stack: contextlib.ExitStack | None = None
        self._orch: Any = None
        self._runs: OrderedDict[str, RunResult] = OrderedDict()

    @property
    def answers(self) -> bool:
        """True when an LLM was given, so that the ``answer`` tool can write answers."""
        return bool(self.opts.llm_url or self.opts.local_llm)

    def _orchestrator(self) -> Any:
        """The loop, built on first use; a failure is raised again on the next call's try."""
        with self._lock:
            if self._orch is None:
                from corrective_rag.cli.wiring import check_reachable, open_store, orchestrator

                if self.opts.llm_url:
                    check_reachable(self.opts.llm_url)
                with contextlib.ExitStack() as stack:
                    store = stack.enter_context(open_store(self.opts))
                    self._orch = stack.enter_context(orchestrator(self.opts, store))
                    self._stack = stack.pop_all()
            return self._orch

    def _run(self, question: str, top_k: int | None) -> RunResult:
        check_query(question, what="question")
        if top_k is not None and not 1 <= top_k <= MAX_DOCUMENTS:
            raise InputError(f"top_k must be between 1 and {MAX_DOCUMENTS}, got {top_k}")
        result: RunResult = self._orchestrator().run(question, top_k=top_k)
        from corrective_rag.runs.execution.failures import llm_failure

        failure = llm_failure(result)
        if failure is not None:  # nothing was judged: an empty result would look like an answer
            raise LLMError(f"every LLM call of this run failed: {failure}")
        return result

    def _remember(self, result: RunResult) -> RunResult:
        from corrective_rag.runs.records.codec import from_dict, to_dict
        from corrective_rag.text.secrets import redact_tree
        from corrective_rag.types import RunResult

        if self.secrets:
            result = from_dict(RunResult, redact_tree(to_dict(result), self.secrets))
        with self._lock:
            self._runs[result.run_id] = result
            while len(self._runs) > MAX_RUNS:
                self._runs.popitem(last=False)
        return result

    def search(self, question: str, top_k: int | None = None) -> SearchOut:
        """Run the corrective loop on ``question``; the kept documents and how the run ended."""
        return _summary(self._remember(self._run(question, top_k)))

    def answer(self, question: str, top_k: int | None = None) -> AnswerOut:
        """Search, then answer from the kept documents only, citing their ids (or abstain)."""
        if not self.answers:
            raise ConfigError("answers need an LLM: start the server with --llm-url and --model")
        from corrective_rag.generate.llm import LLMGenerator

        result = self._run(question, top_k)
        chat = getattr(self._orch.evaluator, "chat", None)
        if chat is None:  # pragma: no cover - the wiring's LLM evaluator always has one
            raise ConfigError("the judge has no chat model to answer with")
        answer = LLMGenerator(chat).generate(question, [k.document for k in result.kept])
        return {
            **_summary(self._remember(replace(result, answer=answer))),
            "answer": answer.text,
            "cited_ids": list(answer.cited_ids),
            "abstained": answer.abstained,
            "supported": answer.supported,
        }

    def runs(self) -> list[dict[str, Any]]:
        """This session's runs, oldest first: id, question, stop reason, kept ids."""
        with self._lock:
            results = list(self._runs.values())
        return [
            {
                "run_id": r.run_id,
                "uri": f"{RUNS_URI}/{r.run_id}",
                "question": r.question,
                "stop_reason": r.stop_reason.value,
                "kept_ids": list(r.kept_ids),
                "answered": r.answer is not None,
                "started_at": r.started_at,
            }
            for r in results
        ]

    def run(self, run_id: str) -> dict[str, Any]:
        """One run's whole record (the batch results' format)."""
        from corrective_rag.runs.records.codec import to_dict

        with self._lock:
            result = self._runs.get(run_id)
        if result is None:
            raise InputError(f"no run {run_id!r} on this server (see {RUNS_URI})")
        record: dict[str, Any] = to_dict(result)
        return record

    def close(self) -> None:
        """Close the store and whatever the loop started."""
        with self._lock:
            stack, self._stack, self._orch = self._stack, None, None
        if stack is not None:
            stack.close()


def _tool_error(exc: BaseException, secrets: tuple[str, ...]) -> Exception:
    """The SDK's ToolError: the call fails with this message for the agent, the server lives."""
    from mcp.server.mcpserver.exceptions import ToolError

    from corrective_rag.text.display import printable
    from corrective_rag.text.secrets import redact

    return ToolError(printable(redact(" ".join(str(exc).split()), secrets)) or type(exc).__name__)


def build_server(service: SearchService) -> Any:
    """The SDK's ``MCPServer`` with the ``search`` (and ``answer``) tools and the run resources."""
    from mcp.server.mcpserver import MCPServer

    from corrective_rag._version import __version__

    server = MCPServer(
        SERVER_NAME,
        version=__version__,
        instructions="Search a corrective-rag store: the loop judges each retrieved document "
        "and rewrites the query until enough relevant ones are kept. Cite documents by id.",
        log_level="WARNING",
    )

    def guarded(call: Any, *args: Any) -> Any:
        try:
            out = call(*args)
        except (CorrectiveRAGError, OSError) as exc:
            raise _tool_error(exc, service.secrets) from exc
        return json.loads(_redacted_json(out, service.secrets))

    @server.tool(name="search")
    def search(question: str, top_k: int | None = None) -> SearchOut:
        """Search the store with the corrective loop.

        Retrieves, judges each document against the question and rewrites the query while too
        few are relevant. Returns the kept documents (id, text, verdict) and why the loop
        stopped (stop_reason: enough_relevant, kept_unconfident, iteration_cap, no_progress,
        rewrite_failed or budget_exhausted).
        """
        return guarded(service.search, question, top_k)

    if service.answers:

        @server.tool(name="answer")
        def answer(question: str, top_k: int | None = None) -> AnswerOut:
            """Answer from the store's documents, citing them.

            Searches as the search tool does, then answers from the kept documents only,
            citing their ids (cited_ids), or abstains when they do not hold the answer.
            """
            return guarded(service.answer, question, top_k)

    @server.resource(RUNS_URI, name="runs", mime_type="application/json")
    def runs() -> str:
        """This server's runs, oldest first: run id, question, stop reason, kept ids."""
        return _redacted_json(service.runs(), service.secrets)

    @server.resource(RUNS_URI + "/{run_id}", name="run", mime_type="application/json")
    def run(run_id: str) -> str:
        """One run's whole record: every iteration's queries, verdicts and usage."""
        try:
            return _redacted_json(service.run(run_id), service.secrets)
        except CorrectiveRAGError as exc:
            from mcp.server.mcpserver.exceptions import ResourceError

            raise ResourceError(str(exc)) from exc

    return server


def _redacted_json(value: Any, secrets: tuple[str, ...]) -> str:
    from corrective_rag.text.secrets import redact_tree

    return json.dumps(redact_tree(value, secrets) if secrets else value, ensure_ascii=False)


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT``, ``:PORT`` or ``PORT`` (host 127.0.0.1) for ``--http``; port 0: a free one.

    Raises:
        ConfigError: no port, or a port outside 0..65535.
    """
    host, _, port = text.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    try:
        number = int(port)
    except ValueError:
        raise ConfigError(f"--http takes HOST:PORT, got {text!r}") from None
    if not 0 <= number <= 65535:
        raise ConfigError(f"--http port must be in 0..65535, got {number}")
    return host, number


def serve(
    opts: Options,
    *,
    http: tuple[str, int] | None,
    secrets: tuple[str, ...],
    allowed_hosts: tuple[str, ...] = (),
    token: str | None = None,
) -> None:
    """Serve over stdio (``http`` None) or streamable HTTP at ``http`` until the client leaves.

    Over HTTP, :class:`~corrective_rag.cli.mcp_http.HttpGuard` checks every request's Host and
    Origin (loopback or ``allowed_hosts``) and, with ``token``, its bearer token.

    Raises:
        ConfigError: the ``mcp`` package is not installed, or a public bind without
            ``allowed_hosts`` and ``token``.
        OSError: the HTTP address cannot be bound.
    """
    from corrective_rag.cli.mcp_http import HttpGuard, check_bind, serve_http

    try:
        import mcp  # noqa: F401
    except ImportError:
        raise ConfigError(
            "corrective-rag mcp needs the MCP SDK: pip install 'corrective_rag[mcp]'"
        ) from None
    if http is not None:
        check_bind(http[0], allowed_hosts=allowed_hosts, token=token)
    service = SearchService(opts, secrets=(*secrets, *((token,) if token else ())))
    server = build_server(service)
    try:
        if http is None:
            server.run("stdio")
        else:
            from mcp.server.transport_security import TransportSecuritySettings

            # HttpGuard checks Host and Origin for every loopback spelling; the SDK's own
            # check knows three spellings and would refuse an allowed host.
            off = TransportSecuritySettings(enable_dns_rebinding_protection=False)
            app = server.streamable_http_app(transport_security=off, host=http[0])
            hosts = frozenset(h.strip().lower().rstrip(".") for h in allowed_hosts)
            serve_http(HttpGuard(app, hosts, token), *http)
    finally:
        service.close()
