"""Wiring for the command line: open a store, pick evaluator and rewriter, build the loop.

Everything heavy (the store, the embedding model, an embedded llama.cpp server) is imported and
started here only when a command needs it, so ``corrective-rag history ...`` stays fast. This
module reads no environment variables: the CLI passes in what it read.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from corrective_rag.errors import ConfigError, InputError, LLMTransportError
from corrective_rag.types import RunResult

__all__ = ["Options", "RunnerFactory", "check_reachable", "open_store", "orchestrator", "run_one"]

log = structlog.get_logger(__name__)

_REACH_TIMEOUT = 5.0  # seconds: long enough for a slow server to accept, short for a typo'd URL


@dataclass(frozen=True, slots=True)
class Options:
    """What the command line decided about the pipeline."""

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
    qdrant: str | None = None
    qdrant_api_key: str | None = field(default=None, repr=False)


def open_store(opts: Options, *, create: bool = False) -> Any:
    """Open the hybrid store named by ``--store`` (or ``--chroma-host``); close it after use.

    Raises:
        InputError: when the store folder is missing and ``create`` is False.
    """
    if opts.qdrant:
        return _open_qdrant(opts, create=create)
    if not opts.chroma_host and not opts.store:
        raise ConfigError("give --store DIR (or --chroma-host HOST, or --qdrant URL)")
    path = Path(opts.store or ".")
    if not opts.chroma_host and not create and not path.is_dir():
        raise InputError(f"store not found: {path} (create it with 'corrective-rag index')")
    from corrective_rag.store.hybrid import HybridStore

    if opts.chroma_host:
        return HybridStore.connect(opts.chroma_host, opts.chroma_port)
    return HybridStore.open(path)


def _open_qdrant(opts: Options, *, create: bool) -> Any:
    """A QdrantStore on a server URL, or in a local-mode folder."""
    if opts.store or opts.chroma_host:
        raise ConfigError("give --qdrant alone, without --store or --chroma-host")
    from corrective_rag.store.qdrant import QdrantStore

    url = opts.qdrant or ""
    if url.startswith(("http://", "https://")):
        return QdrantStore.connect(url, api_key=opts.qdrant_api_key)
    if not create and not Path(url).is_dir():
        raise InputError(f"qdrant folder not found: {url} (create it with 'corrective-rag index')")
    return QdrantStore.open(url)


def check_reachable(base_url: str) -> None:
    """Fail fast with one clear error when nothing answers at ``base_url``.

    Any HTTP answer counts as reachable (the models route may be missing or need a key);
    only a refused or timed-out connection is an error.
    """
    import requests

    url = base_url.rstrip("/") + "/models"
    try:
        requests.get(url, timeout=_REACH_TIMEOUT)
    except requests.RequestException as exc:
        raise LLMTransportError(f"cannot reach the LLM server at {base_url}: {exc}") from exc


def _components(opts: Options, store: Any, base_url: str | None) -> tuple[Any, Any]:
    if base_url is None:
        from corrective_rag.evaluate.local import LocalEvaluator
        from corrective_rag.rewrite.local import LocalRewriter

        return LocalEvaluator(store.embedder, idf=store.idf), LocalRewriter(idf=store.idf)
    from corrective_rag.evaluate.llm import LLMEvaluator
    from corrective_rag.llm.client import OpenAIChatClient
    from corrective_rag.rewrite.llm import LLMRewriter

    chat = OpenAIChatClient(base_url, opts.model or "default", api_key=opts.api_key)
    return LLMEvaluator(chat), LLMRewriter(chat)


@contextlib.contextmanager
def orchestrator(opts: Options, store: Any) -> Iterator[Any]:
    """Build the corrective loop over ``store``; an embedded llama.cpp server lives as long."""
    from corrective_rag.loop.orchestrator import (
        CorrectiveRAGOrchestrator,
    )

    with contextlib.ExitStack() as stack:
        base_url = opts.llm_url
        if opts.local_llm:
            from corrective_rag.llm.local_server import LocalLlamaServer

            if not Path(opts.local_llm).is_file():
                raise InputError(f"GGUF model not found: {opts.local_llm}")
            server = stack.enter_context(LocalLlamaServer(opts.local_llm))
            base_url = server.base_url
        evaluator, rewriter = _components(opts, store, base_url)
        yield CorrectiveRAGOrchestrator(
            store,
            evaluator,
            rewriter,
            policy=opts.policy,
            max_iterations=opts.max_iterations,
            top_k=opts.top_k,
            min_relevant=opts.min_relevant,
        )


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
