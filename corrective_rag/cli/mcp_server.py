"""``corrective-rag mcp``: a store's corrected search as Model Context Protocol tools.

Built on the official SDK (``pip install 'corrective_rag[mcp]'``), imported only when the
command runs. Tools (the search behind them: :mod:`corrective_rag.cli.mcp_service`; what they
return: :mod:`corrective_rag.cli.mcp_shapes`):

* ``search``: a question in (at most
  :data:`~corrective_rag.cli.mcp_service.MAX_QUESTION_CHARS` characters); the documents the
  loop kept (id, text, verdict), best first, the stop reason and the run id out.
* ``answer`` (only with an LLM: ``--llm-url``/``--model`` or ``--local-llm``): the same search,
  then an answer written from the kept documents, citing their ids.

Resources: ``corrective-rag://runs`` lists the client's runs (newest last; the server keeps
the last :data:`~corrective_rag.cli.mcp_service.MAX_RUNS`, every client's with ``share_runs``) and
``corrective-rag://runs/{run_id}`` is one run's whole record, in the format of
``corrective-rag batch`` results; another client's id is invalid params, as an unknown one.

A client is the stdio peer, an HTTP session (``Mcp-Session-Id``, the handshake protocols) or,
on the stateless 2026-07-28 protocol, the key in the cookie the HTTP guard gives every client
(:mod:`corrective_rag.cli.mcp_http`): a client that keeps cookies, as the official SDK's and
fastmcp's do, reads back its runs and hears of them (``subscriptions/listen`` streams are sent
the updates of their own client's runs only). The server advertises no ``listChanged``: its
tools, prompts and resources lists never change.

Calls (:mod:`corrective_rag.cli.mcp_calls`): at most ``max_calls`` run at once, the next free
slot going to the client running the fewest; at most ``max_waiting`` wait, and past that a call
is a "server busy" tool error at once. Each runs in a worker thread cancelled with its request
(``notifications/cancelled``, a closed stream, a client that hangs up): the LLM call in flight
is abandoned and no further one starts.

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
import uuid
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from corrective_rag.cli.mcp_calls import MAX_CALLS, MAX_WAITING
from corrective_rag.cli.mcp_service import MAX_QUESTION_CHARS, SearchService
from corrective_rag.cli.mcp_shapes import (
    MAX_DOCUMENTS,
    MAX_ECHO_CHARS,
    RUNS_URI,
    AnswerOut,
    SearchOut,
)
from corrective_rag.errors import ConfigError, CorrectiveRAGError

if TYPE_CHECKING:
    from corrective_rag.cli.wiring import Options

__all__ = ["build_server", "parse_address", "serve"]

SERVER_NAME = "corrective-rag"
STDIO = "stdio"  # the one client of a stdio server (and of an in-memory one)

# The client a request came from, set by _CallerMiddleware around every request so that
# resources, which the SDK calls without a context, and the subscription bus are scoped to it.
_OWNER: contextvars.ContextVar[str | None] = contextvars.ContextVar("mcp_owner", default=None)


def _tool_error(exc: BaseException, secrets: tuple[str, ...]) -> Exception:
    """The SDK's ToolError: the call fails with this message for the agent, the server lives."""
    from mcp.server.mcpserver.exceptions import ToolError

    from corrective_rag.text.display import printable
    from corrective_rag.text.secrets import redact

    return ToolError(printable(redact(" ".join(str(exc).split()), secrets)) or type(exc).__name__)


def _owner(request: Any) -> str:
    """The client a request comes from (see the module docstring)."""
    from corrective_rag.cli.mcp_http import CLIENT_KEY

    if request is None:
        return STDIO
    session = request.headers.get("mcp-session-id")
    if session:  # the SDK answers an unknown session 404: this one is the transport's own
        return f"session:{session}"
    key = request.scope.get(CLIENT_KEY)
    # Without the guard (an application mounting the server itself) a request with no session
    # belongs to no client: no later request lists its runs.
    return f"client:{key}" if key else uuid.uuid4().hex


class _CallerMiddleware:
    """Sets :data:`_OWNER` for a request's duration, and stops it when its HTTP client hangs up.

    Over HTTP the guard puts a hang-up event in the request's scope: when the client closes
    the connection the request is cancelled (as ``notifications/cancelled`` would), so its run
    stops (the handshake protocols' SDK would otherwise run it to its end for nobody).
    """

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        import anyio

        from corrective_rag.cli.mcp_http import HANGUP

        request = getattr(ctx, "request", None)
        token = _OWNER.set(_owner(request))
        try:
            gone = None if request is None else request.scope.get(HANGUP)
            if gone is None:
                return await call_next(ctx)
            done: list[Any] = []  # the result, or the error, of call_next
            async with anyio.create_task_group() as group:

                async def stop_when_gone() -> None:
                    await gone.wait()
                    group.cancel_scope.cancel()

                group.start_soon(stop_when_gone)
                try:  # an error raised in the group would reach the SDK wrapped in a group
                    done.append(await call_next(ctx))
                except Exception as exc:
                    done.append(exc)
                group.cancel_scope.cancel()
            if not done:  # cancelled: the client hung up, and nobody reads this
                from mcp.shared.exceptions import MCPError

                raise MCPError(code=-32800, message="the client hung up")
            if isinstance(done[0], Exception):
                raise done[0]
            return done[0]
        finally:
            _OWNER.reset(token)


async def _no_list_changes(ctx: Any, call_next: Any) -> Any:
    """Advertise no ``listChanged``: the server's tools, prompts and resources never change.

    The SDK advertises it on the 2026-07-28 protocol wherever ``subscriptions/listen`` is
    served; run updates are what the server sends (``resources.subscribe``), for the client's
    own runs.
    """
    result = await call_next(ctx)
    if getattr(ctx, "method", None) in ("initialize", "server/discover"):
        capabilities = result.get("capabilities") if isinstance(result, dict) else None
        for kind in ("prompts", "resources", "tools"):
            if isinstance(capabilities, dict) and isinstance(capabilities.get(kind), dict):
                capabilities[kind] = {**capabilities[kind], "listChanged": False}
    return result


class _OwnerBus:
    """The subscription bus, delivering an event to the publishing client's listeners only.

    The SDK's own bus sends every event to every listener: a search by one client would tell
    every other client that the runs it lists changed (they did not), and when.
    """

    def __init__(self, *, shared: bool) -> None:
        self.shared = shared
        self._listeners: dict[object, tuple[str | None, Callable[[Any], None]]] = {}

    async def publish(self, event: Any) -> None:
        """Deliver ``event`` to the listeners of the client publishing it (all, if shared)."""
        import anyio

        owner = _OWNER.get()
        for who, listener in list(self._listeners.values()):
            if self.shared or who == owner:
                listener(event)
        await anyio.lowlevel.checkpoint()

    def subscribe(self, listener: Callable[[Any], None]) -> Callable[[], None]:
        """Register ``listener`` for the client listening; the callable unsubscribes it."""
        token = object()
        self._listeners[token] = (_OWNER.get(), listener)

        def unsubscribe() -> None:
            self._listeners.pop(token, None)

        return unsubscribe


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
        middleware=[_no_list_changes, _CallerMiddleware()],
        subscriptions=_OwnerBus(shared=service.share_runs),
    )
    opts = service.opts
    # It spends LLM calls on a remote service (or searches the web) when given one: open world.
    open_world = bool(opts.llm_url or opts.fallback)

    async def guarded(call: Any, question: str, top_k: int | None, ctx: Any) -> Any:
        owner = _OWNER.get() or STDIO
        try:
            out = await service.calls.run(owner, partial(call, question, top_k, owner=owner))
        except (CorrectiveRAGError, OSError) as exc:
            raise _tool_error(exc, service.secrets) from exc
        with contextlib.suppress(Exception):  # the client's listeners hear of its new run
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
        """This client's runs, oldest first: run id, question, stop reason, kept ids."""
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


def _hung_up(exc: BaseException) -> bool:
    """True when ``exc`` (an exception group too) says only that the stdio client went away."""
    group = getattr(exc, "exceptions", None)
    if group is not None:
        return all(_hung_up(e) for e in group)
    return isinstance(exc, BrokenPipeError | ConnectionResetError)


def serve(
    opts: Options,
    *,
    http: tuple[str, int] | None,
    secrets: tuple[str, ...],
    allowed_hosts: tuple[str, ...] = (),
    token: str | None = None,
    share_runs: bool = False,
    max_calls: int = MAX_CALLS,
    max_waiting: int = MAX_WAITING,
) -> None:
    """Serve over stdio (``http`` None) or streamable HTTP at ``http`` until the client leaves.

    Over HTTP, :class:`~corrective_rag.cli.mcp_http.HttpGuard` checks every request's Host and
    Origin (loopback or ``allowed_hosts``) and, with ``token``, its bearer token. A stdio
    client that hangs up ends the server quietly, its call in flight stopped.

    Raises:
        ConfigError: a setting that could never work (an allowed host with a port or a
            wildcard, allowed hosts without ``http``, a token with spaces or too short), the
            ``mcp`` package not installed, or a public bind without ``allowed_hosts`` and
            ``token``; each in one line.
        OSError: the HTTP address cannot be bound.
    """
    from corrective_rag.cli import mcp_http

    hosts = mcp_http.allowed_hosts(allowed_hosts)
    if hosts and http is None:
        raise ConfigError("--allow-host applies to --http only (stdio has no Host to check)")
    mcp_http.check_token(token)
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise ConfigError(
            "corrective-rag mcp needs the MCP SDK: pip install 'corrective_rag[mcp]'"
        ) from None
    if http is not None:
        mcp_http.check_bind(http[0], allowed_hosts=tuple(hosts), token=token)
    service = SearchService(
        opts,
        secrets=(*secrets, *((token,) if token else ())),
        share_runs=share_runs,
        max_calls=max_calls,
        max_waiting=max_waiting,
    )
    server = build_server(service)
    try:
        if http is None:
            try:
                server.run("stdio")
            except BaseException as exc:
                if not _hung_up(exc):
                    raise
        else:
            from mcp.server.transport_security import TransportSecuritySettings

            # HttpGuard checks Host and Origin for every loopback spelling; the SDK's own
            # check knows three spellings and would refuse an allowed host.
            off = TransportSecuritySettings(enable_dns_rebinding_protection=False)
            app = server.streamable_http_app(transport_security=off, host=http[0])
            mcp_http.serve_http(mcp_http.HttpGuard(app, hosts, token), *http)
    finally:
        service.close()
