"""``corrective-rag mcp``: a store's corrected search as Model Context Protocol tools.

Built on the official SDK (``pip install 'corrective_rag[mcp]'``), imported only when the
command runs. Tools:

* ``search``: a question in (at most :data:`MAX_QUESTION_CHARS` characters); the documents the
  loop kept (id, text, verdict), best first, the stop reason and the run id out. ``top_k`` caps
  the documents returned (at most :data:`MAX_DOCUMENTS`); each text is cut at
  :data:`MAX_SHOWN_CHARS` characters and the question and final query echoed back at
  :data:`MAX_ECHO_CHARS`, so one call cannot flood an agent's context whatever its input.
* ``answer`` (only with an LLM: ``--llm-url``/``--model`` or ``--local-llm``): the same search,
  then an answer written from the kept documents, citing their ids.

Resources: ``corrective-rag://runs`` lists the session's runs (newest last, the server keeps
the last :data:`MAX_RUNS`; every session's with ``share_runs``) and
``corrective-rag://runs/{run_id}`` is one run's whole record, in the format of
``corrective-rag batch`` results; another session's id is invalid params, as an unknown one.

Calls: at most ``max_calls`` run at once (the others wait), each in a worker thread that is
cancelled with its request (``notifications/cancelled``, a closed stream, a client gone), as
``arun`` cancels a run: the LLM call in flight is abandoned and no further one starts.

The store is opened on the first call, not at start, so a client's handshake never waits for
the embedding model; a missing store, a bad argument or a failed LLM call is a tool error with
a message the agent can read, and the server keeps serving (the next call tries the store
again: index it meanwhile and it is found).
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import json
import threading
import uuid
from collections import OrderedDict
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from typing_extensions import TypedDict  # pydantic reads a TypedDict's schema from this one

from corrective_rag.errors import (
    CUT_BARE,
    ConfigError,
    CorrectiveRAGError,
    InputError,
    LLMError,
    cut_text,
)
from corrective_rag.inputs import check_query

if TYPE_CHECKING:
    from corrective_rag.cli.wiring import Options
    from corrective_rag.types import RunResult

__all__ = [
    "MAX_CALLS",
    "MAX_DOCUMENTS",
    "MAX_QUESTION_CHARS",
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
MAX_CALLS = 4  # tool calls running at once per server (--max-calls); more wait for a slot
MAX_QUESTION_CHARS = 4000  # a question longer than a page is not a question (refused)
MAX_ECHO_CHARS = 500  # of the question and final query echoed back in a result
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


# The session a request came on (a key per MCP session), set by _SessionMiddleware around every
# request so that resources, which the SDK calls without a context, can be scoped to it.
_OWNER: contextvars.ContextVar[str | None] = contextvars.ContextVar("mcp_owner", default=None)


def _cut(text: str, limit: int) -> tuple[str, bool]:
    return cut_text(text, limit, CUT_BARE), len(text) > limit


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


def _summary(result: RunResult, top_k: int | None = None) -> SearchOut:
    """What every tool returns about a run: its id, how it ended and the kept documents.

    At most ``top_k`` (default :data:`MAX_DOCUMENTS`) documents, best first; the question and
    final query are cut at :data:`MAX_ECHO_CHARS` so that a result is bounded for any input.
    """
    return {
        "run_id": result.run_id,
        "question": _cut(result.question, MAX_ECHO_CHARS)[0],
        "final_query": _cut(result.final_query, MAX_ECHO_CHARS)[0],
        "stop_reason": result.stop_reason.value,
        "stop_detail": _cut(result.stop_detail, MAX_REASONING_CHARS)[0],
        "iterations": result.iterations,
        "kept": len(result.kept),
        "documents": [_document(k) for k in result.kept[: top_k or MAX_DOCUMENTS]],
    }


class _Calls:
    """Runs tool calls in worker threads, at most ``limit`` at once, cancelled with their request.

    The SDK cancels a request's task when the client sends ``notifications/cancelled`` or goes
    away; a plain thread would run to its end regardless (and spend its LLM calls). Here the
    cancellation sets the run's call scope (:mod:`corrective_rag.calls.scope`), as ``arun``
    does: the LLM call in flight is abandoned, no further one starts, and the slot is given
    back only once the thread has ended. A call waiting for a slot that is cancelled never
    starts.
    """

    _POLL = 0.02  # seconds between looks at a cancelled run's thread while it winds down

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.waiting = 0  # calls waiting for a slot
        self.running = 0  # calls whose thread has not ended
        self._slots: Any = None  # an anyio.Semaphore, made in the event loop on first use

    async def run(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` in a worker thread, within a free slot."""
        import anyio
        import anyio.to_thread

        from corrective_rag.calls.scope import call_scope, raise_if_cancelled

        if self._slots is None:
            self._slots = anyio.Semaphore(self.limit)
        stop, ended = threading.Event(), threading.Event()
        context = contextvars.copy_context()

        def work() -> Any:
            try:
                with call_scope(cancel=stop):
                    raise_if_cancelled()
                    return fn(*args, **kwargs)
            finally:
                ended.set()

        self.waiting += 1
        try:
            await self._slots.acquire()
        finally:
            self.waiting -= 1
        self.running += 1
        try:
            return await anyio.to_thread.run_sync(context.run, work, abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            stop.set()
            with anyio.CancelScope(shield=True):
                while not ended.is_set():
                    await anyio.sleep(self._POLL)
            raise
        finally:
            self.running -= 1
            self._slots.release()


class SearchService:
    """The corrective loop over one store, opened on first use, with this session's runs.

    Thread-safe: the SDK runs each tool call in a worker thread. ``close`` releases the store
    (and an embedded LLM server).
    """

    def __init__(
        self,
        opts: Options,
        *,
        secrets: tuple[str, ...] = (),
        share_runs: bool = False,
        max_calls: int = MAX_CALLS,
    ) -> None:
        if max_calls < 1:
            raise ConfigError(f"max_calls must be at least 1, got {max_calls}")
        self.opts = opts
        self.secrets = secrets
        self.share_runs = share_runs
        self.max_calls = max_calls
        self.calls = _Calls(max_calls)
        self._lock = threading.Lock()
        self._stack: contextlib.ExitStack | None = None
        self._orch: Any = None
        self._runs: OrderedDict[str, tuple[str | None, RunResult]] = OrderedDict()

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
        check_question(question)
        check_top_k(top_k)
        result: RunResult = self._orchestrator().run(question)
        from corrective_rag.runs.execution.failures import llm_failure

        failure = llm_failure(result)
        if failure is not None:  # nothing was judged: an empty result would look like an answer
            raise LLMError(f"every LLM call of this run failed: {failure}")
        return result

    def _remember(self, result: RunResult, owner: str | None) -> RunResult:
        from corrective_rag.runs.records.codec import from_dict, to_dict
        from corrective_rag.text.secrets import redact_tree
        from corrective_rag.types import RunResult

        if self.secrets:
            result = from_dict(RunResult, redact_tree(to_dict(result), self.secrets))
        with self._lock:
            self._runs[result.run_id] = (owner, result)
            while len(self._runs) > MAX_RUNS:
                self._runs.popitem(last=False)
        return result

    def search(
        self, question: str, top_k: int | None = None, *, owner: str | None = None
    ) -> SearchOut:
        """Run the corrective loop on ``question``; the kept documents and how the run ended.

        ``top_k`` caps the documents returned (best first); ``owner`` is the session the run
        is listed for (unless runs are shared).
        """
        return _summary(self._remember(self._run(question, top_k), owner), top_k)

    def answer(
        self, question: str, top_k: int | None = None, *, owner: str | None = None
    ) -> AnswerOut:
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
            **_summary(self._remember(replace(result, answer=answer), owner), top_k),
            "answer": answer.text,
            "cited_ids": list(answer.cited_ids),
            "abstained": answer.abstained,
            "supported": answer.supported,
        }

    def _visible(self, owner: str | None, result_owner: str | None) -> bool:
        return self.share_runs or owner == result_owner

    def runs(self, owner: str | None = None) -> list[dict[str, Any]]:
        """The session's runs (every run with ``share_runs``), oldest first.

        Each: id, question (cut at :data:`MAX_ECHO_CHARS`), stop reason, kept ids.
        """
        with self._lock:
            results = [r for who, r in self._runs.values() if self._visible(owner, who)]
        return [
            {
                "run_id": r.run_id,
                "uri": f"{RUNS_URI}/{r.run_id}",
                "question": _cut(r.question, MAX_ECHO_CHARS)[0],
                "stop_reason": r.stop_reason.value,
                "kept_ids": list(r.kept_ids),
                "answered": r.answer is not None,
                "started_at": r.started_at,
            }
            for r in results
        ]

    def run(self, run_id: str, owner: str | None = None) -> dict[str, Any]:
        """One run's whole record (the batch results' format), if the session may read it.

        Raises:
            InputError: no such run, or another session's (told apart from nothing).
        """
        from corrective_rag.runs.records.codec import to_dict

        with self._lock:
            who, result = self._runs.get(run_id, (None, None))
        if result is None or not self._visible(owner, who):
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


def check_question(question: object) -> str:
    """The question if usable: text, not blank, at most :data:`MAX_QUESTION_CHARS` characters.

    Raises:
        InputError: otherwise.
    """
    if isinstance(question, str) and len(question) > MAX_QUESTION_CHARS:
        raise InputError(
            f"question is {len(question):,} characters; at most {MAX_QUESTION_CHARS:,} are read"
        )
    return check_query(question, what="question")


def check_top_k(top_k: object) -> None:
    """Refuse a ``top_k`` that is not an int in 1..:data:`MAX_DOCUMENTS` (None: the default).

    Raises:
        InputError: otherwise.
    """
    if top_k is not None and (
        not isinstance(top_k, int) or isinstance(top_k, bool) or not 1 <= top_k <= MAX_DOCUMENTS
    ):
        raise InputError(f"top_k must be between 1 and {MAX_DOCUMENTS}, got {top_k!r}")


class _SessionMiddleware:
    """Sets :data:`_OWNER` to the key of the session a request came on, for its duration.

    Over HTTP a session is the transport's ``Mcp-Session-Id`` (the initialize handshake of
    protocols up to 2025-11-25); a request without one (the stateless 2026-07-28 protocol)
    belongs to no session, so no later request lists its runs. Over stdio the process serves
    one client: all its requests are one session.
    """

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        request = getattr(ctx, "request", None)
        if request is None:
            key = "stdio"
        else:
            session = request.headers.get("mcp-session-id")
            key = f"http:{session}" if session else uuid.uuid4().hex
        token = _OWNER.set(key)
        try:
            return await call_next(ctx)
        finally:
            _OWNER.reset(token)


QUESTION_HELP = (
    f"What to search for, in plain words (at most {MAX_QUESTION_CHARS:,} characters); "
    f"echoed back cut at {MAX_ECHO_CHARS} characters."
)
TOP_K_HELP = (
    f"The most documents to return, best first (1-{MAX_DOCUMENTS}; default "
    f"{MAX_DOCUMENTS}). It caps what comes back, not how many the loop retrieves and judges."
)


def build_server(service: SearchService) -> Any:
    """The SDK's ``MCPServer`` with the ``search`` (and ``answer``) tools and the run resources."""
    from typing import Annotated

    import anyio
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.exceptions import ResourceNotFoundError
    from mcp_types import ToolAnnotations
    from pydantic import Field

    from corrective_rag._version import __version__

    server = MCPServer(
        SERVER_NAME,
        version=__version__,
        instructions="Search a corrective-rag store: the loop judges each retrieved document "
        "and rewrites the query until enough relevant ones are kept. Cite documents by id.",
        log_level="WARNING",
        middleware=[_SessionMiddleware()],
    )
    calls = service.calls
    opts = service.opts
    # It spends LLM calls on a remote service (or searches the web) when given one: open world.
    open_world = bool(opts.llm_url or opts.fallback)

    async def guarded(call: Any, question: str, top_k: int | None, ctx: Any) -> Any:
        try:
            out = await calls.run(call, question, top_k, owner=_OWNER.get())
        except (CorrectiveRAGError, OSError) as exc:
            raise _tool_error(exc, service.secrets) from exc
        with contextlib.suppress(Exception):  # a client that listens for changes hears of it
            await ctx.notify_resources_changed()
            await ctx.notify_resource_updated(RUNS_URI)
        return json.loads(_redacted_json(out, service.secrets))

    Question = Annotated[str, Field(description=QUESTION_HELP, max_length=MAX_QUESTION_CHARS)]
    TopK = Annotated[int | None, Field(description=TOP_K_HELP, ge=1, le=MAX_DOCUMENTS)]

    async def search(question: Question, ctx: Context, top_k: TopK = None) -> SearchOut:
        """Search the store with the corrective loop.

        Retrieves, judges each document against the question and rewrites the query while too
        few are relevant. Returns the kept documents (id, text, verdict), best first, and why
        the loop stopped (stop_reason: enough_relevant, kept_unconfident, iteration_cap,
        no_progress, rewrite_failed or budget_exhausted).
        """
        return await guarded(service.search, question, top_k, ctx)

    def register(tool: Any, name: str, title: str, out: Any) -> None:
        """Add ``tool`` with its schema, title and annotations.

        Read-only; open world when the server spends remote LLM calls or searches the web.
        """
        # The annotations name objects local to this function (the SDK is imported lazily),
        # so they are given as objects: the SDK reads the schema from them.
        tool.__annotations__ = {"question": Question, "ctx": Context, "top_k": TopK, "return": out}
        server.tool(
            name=name,
            title=title,
            description=inspect.cleandoc(tool.__doc__ or ""),
            annotations=ToolAnnotations(
                title=title,
                read_only_hint=True,
                destructive_hint=False,
                idempotent_hint=False,  # every call is a new run, and spends LLM calls anew
                open_world_hint=open_world,
            ),
        )(tool)

    register(search, "search", "Corrected search", SearchOut)

    if service.answers:

        async def answer(question: Question, ctx: Context, top_k: TopK = None) -> AnswerOut:
            """Answer from the store's documents, citing them.

            Searches as the search tool does, then answers from the kept documents only,
            citing their ids (cited_ids), or abstains when they do not hold the answer.
            """
            return await guarded(service.answer, question, top_k, ctx)

        register(answer, "answer", "Answer with citations", AnswerOut)

    @server.resource(RUNS_URI, name="runs", mime_type="application/json")
    async def runs() -> str:
        """This session's runs, oldest first: run id, question, stop reason, kept ids."""
        return _redacted_json(service.runs(_OWNER.get()), service.secrets)

    @server.resource(RUNS_URI + "/{run_id}", name="run", mime_type="application/json")
    async def run(run_id: str) -> str:
        """One run's whole record: every iteration's queries, verdicts and usage."""
        try:
            record = await anyio.to_thread.run_sync(service.run, run_id, _OWNER.get())
        except CorrectiveRAGError as exc:  # an unknown id is the caller's: invalid params
            raise ResourceNotFoundError(str(exc)) from exc
        return _redacted_json(record, service.secrets)

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
    share_runs: bool = False,
    max_calls: int = MAX_CALLS,
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
    service = SearchService(
        opts,
        secrets=(*secrets, *((token,) if token else ())),
        share_runs=share_runs,
        max_calls=max_calls,
    )
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
