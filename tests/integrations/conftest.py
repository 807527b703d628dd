"""Fixtures of the integration tests."""

from __future__ import annotations

import inspect
import socket

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector: pytest.Collector, name: str, obj: object) -> None:
    """langchain-tests' async tests are plain ``async def``: mark them for pytest-asyncio
    before it collects them (its strict mode runs only marked coroutines)."""
    module = getattr(obj, "__module__", "") or ""
    ours = module.startswith("langchain_tests.") and inspect.iscoroutinefunction(obj)
    if ours and not any(m.name == "asyncio" for m in getattr(obj, "pytestmark", [])):
        pytest.mark.asyncio(obj)


@pytest.fixture
def elsewhere(monkeypatch):
    """Refuses every connection but to 127.0.0.1 during the test; lists the refused ones."""
    real_connect = socket.socket.connect
    refused: list[object] = []

    def loopback_only(sock, address):
        if isinstance(address, tuple) and address[0] not in ("127.0.0.1", "localhost"):
            refused.append(address)
            raise OSError(f"test blocks {address}")
        return real_connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", loopback_only)
    return refused


@pytest.fixture(scope="session")
def offline_orchestrator(embedder):
    """An offline loop (keyword retriever, offline judge, local rewriter) over the corpus that
    keeps three documents for the corpus question."""
    from corpus import CORPUS

    from corrective_rag.evaluate.local import LocalEvaluator
    from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
    from corrective_rag.rewrite.local import LocalRewriter
    from corrective_rag.testing import ListRetriever

    return CorrectiveRAGOrchestrator(
        ListRetriever(CORPUS), LocalEvaluator(embedder), LocalRewriter(), top_k=5
    )
