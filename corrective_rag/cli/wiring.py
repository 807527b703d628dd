"""Wiring for the command line: open a store, pick evaluator and rewriter, build the loop.

Everything heavy (the store, the embedding model, an embedded llama.cpp server) is imported and
started here only when a command needs it, so ``corrective-rag history ...`` stays fast. This
module reads no environment variables: the CLI passes in what it read.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from corrective_rag.errors import ConfigError, InputError, LLMTransportError
from corrective_rag.observe.logs import get_logger
from corrective_rag.types import RunResult

__all__ = [
    "Options",
    "RunnerFactory",
    "check_reachable",
    "local_model",
    "open_store",
    "orchestrator",
    "run_one",
    "store_folders",
]

log: Any = get_logger(__name__)

_REACH_TIMEOUT = 5.0  # seconds: long enough for a slow server to accept, short for a typo'd URL
# Seconds one LLM call may take, tries included. Remote: two calls in a row (grading, then the
# rewrite) against a server that never answers end a run within ~2 minutes. Local: the
# embedded SmolLM2-135M grades a batch of 4 documents in ~10-40 s on 2 busy cores (measured,
# docs/reliability.md); 300 s leaves room for a loaded machine without hanging for ever.
REMOTE_CALL_SECONDS = 60.0  # = calls.settings.REMOTE_CALL_SECONDS (not imported: startup time)
LOCAL_CALL_SECONDS = 300.0  # = calls.settings.LOCAL_CALL_SECONDS


@dataclass(frozen=True, slots=True, repr=False)
class Options:
    """What the command line decided about the pipeline.

    Its ``repr`` leaves the keys out and masks every URL (a gateway's ``user:password@``, a
    key in a query or a path), as :func:`~corrective_rag.text.urls.mask_url` shows them.
    """

    store: str | None = None
    chroma_host: str | None = None
    chroma_port: int = 8000
    llm_url: str | None = None
    model: str | None = None
    api_key: str | None = field(default=None, repr=False)  # never shown in a repr or a log
    local_llm: str | None = None
    policy: str = "general"
    max_iterations: int = 3
    top_k: int = 5
    min_relevant: int | None = None
    judge_cap: int | None = None  # the offline judge's LocalWeights.cap
    fallback: str | None = None  # searxng, tavily or brave
    fallback_url: str | None = None
    fallback_store: str | None = None
    fallback_key: str | None = field(default=None, repr=False)  # never shown
    fetch_pages: bool = False
    fetch_private: bool = False  # --fetch-private: pages on internal addresses too
    web_secrets: tuple[str, ...] = field(default=(), repr=False)  # every key: never searched
    timeout: float | None = None  # seconds per LLM call, retries included; None: the default
    max_retries: int | None = None
    qdrant: str | None = None
    qdrant_api_key: str | None = field(default=None, repr=False)
    # the judge to run (evaluate.profile.JudgeProfile): what judge-check chose, or --judge; it
    # travels with the options to Ray workers. None: the default judge (verbal with an LLM,
    # offline without).
    judge: Any = None

    def __repr__(self) -> str:
        from corrective_rag.text.urls import mask_url

        values = {f.name: getattr(self, f.name) for f in fields(self) if f.repr}
        shown = [f"{k}={mask_url(v) if isinstance(v, str) else v!r}" for k, v in values.items()]
        return f"Options({', '.join(shown)})"


def open_store(opts: Options, *, create: bool = False) -> Any:
    """Open the store named by ``--store``, ``--chroma-host`` or ``--qdrant``; close it after use.

    Only ``index`` passes ``create``: it may make a store in a new or empty folder. Every other
    command opens an existing store (read-only for ``--store``), a folder that is not a store is
    refused before anything is written into it, and a store with no documents is an error.

    Raises:
        StoreError: the folder is not a store (or, without ``create``, holds none, or holds no
            documents).
    """
    from corrective_rag.store.hybrid import HybridStore

    if opts.qdrant:
        if opts.store or opts.chroma_host:
            raise ConfigError("give --qdrant alone, without --store or --chroma-host")
        url = opts.qdrant
        if not url.startswith(("http://", "https://")) and not create and not Path(url).is_dir():
            raise InputError(
                f"qdrant folder not found: {url} (create it with 'corrective-rag index')"
            )
        store = HybridStore.qdrant(url, api_key=opts.qdrant_api_key, create=create)
    elif opts.chroma_host:
        store = HybridStore.connect(opts.chroma_host, opts.chroma_port)
    elif opts.store:
        store = HybridStore.open(Path(opts.store), create=create, read_only=not create)
    else:
        raise ConfigError("give --store DIR (or --chroma-host HOST, or --qdrant URL)")
    if not create:
        _require_documents(store, opts.qdrant or opts.store or opts.chroma_host or "")
    return store


def _require_documents(store: Any, name: str) -> None:
    """Refuse a store with no documents: every answer from it would be empty, yet look fine."""
    from corrective_rag.errors import StoreError

    try:
        empty = store.count() == 0
    except BaseException:
        store.close()
        raise
    if empty:
        store.close()
        raise StoreError(f"store {name} holds no documents (add some with 'corrective-rag index')")


def store_folders(opts: Options) -> list[str]:
    """The local folders of the stores the options name (servers have none)."""
    folders = [opts.store, opts.fallback_store]
    if opts.qdrant and not opts.qdrant.startswith(("http://", "https://")):
        folders.append(opts.qdrant)
    return [f for f in folders if f]


def check_reachable(base_url: str) -> None:
    """Fail fast with one clear error when nothing answers at ``base_url``.

    Any HTTP status counts as reachable (the models route may be missing or need a key); the
    body is never read. The whole probe (connect, status line, headers) has one deadline of
    ``_REACH_TIMEOUT`` seconds, so a server that accepts and stays silent, or drips its headers
    a byte at a time, is reported instead of holding the command.
    """
    import requests

    from corrective_rag.text.urls import mask_url
    from corrective_rag.web.transfer import Transfer, TransferTimeout, bounded

    url = base_url.rstrip("/") + "/models"
    shown = mask_url(base_url)  # a gateway's user:password never reaches a message

    def probe(transfer: Transfer[int]) -> int:
        response = requests.get(url, timeout=_REACH_TIMEOUT, stream=True, allow_redirects=False)
        transfer.attach(response)
        response.close()  # the status line is the answer: the body is not read
        return response.status_code

    silent = (
        f"the LLM server at {shown} accepted the connection but sent no answer within "
        f"{_REACH_TIMEOUT:g} s (still loading a model? a proxy in between?)"
    )
    try:
        bounded(probe, time.monotonic() + _REACH_TIMEOUT, f"GET {mask_url(url)}")
    except (TransferTimeout, requests.ReadTimeout) as exc:
        raise LLMTransportError(silent) from exc
    except requests.ConnectionError as exc:  # refused, unknown host, connect timeout
        reason = type(exc).__name__
        raise LLMTransportError(
            f"cannot reach the LLM server at {shown}: nothing answers there ({reason})"
        ) from exc
    except requests.RequestException as exc:
        raise LLMTransportError(mask_url(f"cannot reach the LLM server at {shown}: {exc}")) from exc


def _client_settings(opts: Options, *, local: bool) -> tuple[Any, Any]:
    """Timeouts and retries of the chat client, from ``--timeout`` / ``--max-retries``."""
    from corrective_rag.calls.settings import call_settings

    return call_settings(opts.timeout, max_retries=opts.max_retries, local=local)


def _components(
    opts: Options,
    store: Any,
    base_url: str | None,
    slots: int | None = None,
    context_tokens: int | None = None,
) -> tuple[Any, Any]:
    """Evaluator and rewriter.

    ``slots``: requests the (embedded) server serves at once; ``context_tokens``: the context
    one of its slots holds, which bounds how many documents one grading call may carry.
    """
    profile = opts.judge
    if base_url is None:
        from corrective_rag.evaluate.local import DEFAULT_WEIGHTS, LocalEvaluator
        from corrective_rag.rewrite.local import LocalRewriter

        weights = replace(DEFAULT_WEIGHTS, cap=opts.judge_cap)
        judge: Any = (
            LocalEvaluator(store.embedder, idf=store.idf, weights=weights)
            if profile is None or profile.kind == "offline"
            else profile.evaluator(store=store, call_mode="one-call")
        )
        return judge, LocalRewriter(idf=store.idf)
    from corrective_rag.llm.client import OpenAIChatClient
    from corrective_rag.rewrite.llm import LLMRewriter

    timeouts, retries = _client_settings(opts, local=slots is not None)
    # An embedded server serves `slots` requests at once: more in flight would only queue
    # there and time out while it is busy. One request per slot, across every thread.
    embedded = slots is not None
    chat = OpenAIChatClient(
        base_url,
        opts.model or ("local" if embedded else "default"),
        api_key=None if embedded else opts.api_key,
        timeouts=timeouts,
        retries=retries,
        max_concurrency=slots if slots is not None else 8,  # the client's default
    )
    # one chat model judges and rewrites: the grading call proposes the next query
    extra: dict[str, Any] = {}
    if slots is not None:
        extra = {"max_workers": slots, "context_tokens": context_tokens or 2048}
    return _judge(opts, chat, store, extra), LLMRewriter(chat)


def _judge(opts: Options, chat: Any, store: Any, extra: dict[str, Any]) -> Any:
    """The evaluator the options name: the judge profile's, else the verbal JSON judge."""
    from corrective_rag.evaluate.llm import LLMEvaluator

    profile = opts.judge
    if profile is None:
        return LLMEvaluator(chat, propose=True, **extra)
    if profile.kind == "offline":
        return profile.evaluator(store=store, call_mode="one-call")
    return profile.evaluator(
        chat=chat, store=store, call_mode="one-call", model=profile.model, **extra
    )


@contextlib.contextmanager
def orchestrator(opts: Options, store: Any) -> Iterator[Any]:
    """Build the corrective loop over ``store``; an embedded llama.cpp server lives as long."""
    from corrective_rag.loop.orchestrator import (
        CorrectiveRAGOrchestrator,
    )

    with contextlib.ExitStack() as stack:
        base_url = opts.llm_url
        slots = context = None
        if opts.local_llm:
            from corrective_rag.llm.local_server import LocalLlamaServer

            if not Path(opts.local_llm).is_file():
                raise InputError(f"GGUF model not found: {opts.local_llm}")
            server = stack.enter_context(LocalLlamaServer(opts.local_llm))
            base_url = server.base_url
            slots = server.n_parallel
            context = server.slot_context
        evaluator, rewriter = _components(opts, store, base_url, slots, context)
        yield CorrectiveRAGOrchestrator(
            store,
            evaluator,
            rewriter,
            fallback=_fallback(opts, store, stack),
            policy=opts.policy,
            max_iterations=opts.max_iterations,
            top_k=opts.top_k,
            min_relevant=opts.min_relevant,
        )


def _fallback(opts: Options, store: Any, stack: contextlib.ExitStack) -> Any:
    """The fallback retriever the options name (a second store or a web search), or None."""
    if opts.fallback_store:
        path = Path(opts.fallback_store)
        if not path.is_dir():
            raise InputError(f"fallback store not found: {path}")
        if opts.store and path.resolve() == Path(opts.store).resolve():
            raise ConfigError("--fallback-store must be another store than --store")
        from corrective_rag.store.hybrid import HybridStore

        # a reader: nothing is created or written, no lock is taken (another run may share it)
        fallback = HybridStore.open(path, create=False, read_only=True, embedder=store.embedder)
        return stack.enter_context(fallback)
    if opts.fallback is None:
        return None
    from corrective_rag.web import BraveRetriever, PageFetcher, SearxngRetriever, TavilyRetriever

    # Every key the CLI knows: none is ever sent in a search or kept from a result.
    web: dict[str, Any] = {"fetch_pages": opts.fetch_pages, "secrets": opts.web_secrets}
    if opts.fetch_pages:
        web["fetcher"] = PageFetcher(allow_private=opts.fetch_private)
    if opts.fallback == "searxng":
        return SearxngRetriever(opts.fallback_url or "", **web)
    if opts.fallback_url:
        web["base_url"] = opts.fallback_url
    kind = TavilyRetriever if opts.fallback == "tavily" else BraveRetriever
    return kind(opts.fallback_key or "", **web)


def run_one(orch: Any) -> Any:
    """The batch's per-query callable: ``orchestrator.run`` (thread-safe: state is per run)."""

    def run(question: str) -> RunResult:
        result: RunResult = orch.run(question)
        return result

    return run


@dataclass(frozen=True, slots=True)
class RunnerFactory:
    """Builds the batch's per-query callable where it runs (a Ray worker); pickles as options.

    The store and the LLM client are opened on first call and live as long as the worker.
    """

    opts: Options

    def __call__(self) -> Callable[[str], RunResult]:
        """Open the store and build the loop; return its ``run``."""
        store = open_store(self.opts)
        # Never exited: the worker's process ends it. (--local-llm, which would need an exit to
        # stop its server, is refused with --ray.)
        orch = contextlib.ExitStack().enter_context(orchestrator(self.opts, store))
        runner: Callable[[str], RunResult] = run_one(orch)
        return runner


def local_model(path: str) -> str:
    """The model name a ``--local-llm`` GGUF file is known by in a judge profile: its file name."""
    return Path(path).name
