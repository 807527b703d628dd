"""The call budget spends evaluator calls in the units each evaluator declares."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from corrective_rag.errors import ConfigError
from corrective_rag.evaluate.llm import LLMEvaluator
from corrective_rag.evaluate.local import LocalEvaluator
from corrective_rag.llm.client import OpenAIChatClient
from corrective_rag.loop.budget import Budget
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.protocols import Evaluator
from corrective_rag.testing import ListRetriever, ScriptedEvaluator, ScriptedLLMServer
from corrective_rag.testing.fakes import ScriptedRewriter
from corrective_rag.types import Document, Evaluation, Usage

QUESTION = "How do volcanoes form magma chambers?"
CORPUS = [
    Document(f"v{i}", f"Volcanoes form magma chambers under the crust, study {i}.")
    for i in range(12)
]


def _run(evaluator: Evaluator, calls: int, top_k: int = 8) -> list[int]:
    orch = CorrectiveRAGOrchestrator(
        ListRetriever(CORPUS),
        evaluator,
        ScriptedRewriter(["magma chamber volcano crust"], usage=Usage()),
        top_k=top_k,
        max_iterations=2,
        min_relevant=100,
        budget=Budget(max_llm_calls=calls),
    )
    return [len(r.verdicts) for r in orch.run(QUESTION).history]


def test_every_evaluator_declares_documents_per_call() -> None:
    """The LLM, local and scripted evaluators declare documents_per_call; the protocol needs it."""
    chat = OpenAIChatClient("http://127.0.0.1:9/v1", "m")
    assert 4 == LLMEvaluator(chat, batch_size=4).documents_per_call
    assert LocalEvaluator().documents_per_call is None
    assert 1 == ScriptedEvaluator({}).documents_per_call

    class Silent:
        def evaluate(self, question: str, documents: Sequence[Document]) -> Evaluation:
            return Evaluation(())

    assert not isinstance(Silent(), Evaluator)


def test_local_evaluator_is_not_capped_by_a_call_budget(embedder) -> None:
    """The local evaluator (no LLM calls) judges a full top_k per iteration under 2 calls."""
    assert [8, 4] == _run(LocalEvaluator(embedder), calls=2)


def test_llm_evaluator_budget_counts_its_batches() -> None:
    """An LLM evaluator batching four documents a call judges eight documents with two calls."""
    with ScriptedLLMServer() as srv:
        evaluator = LLMEvaluator(OpenAIChatClient(srv.base_url, "scripted"), batch_size=4)
        assert [8] == _run(evaluator, calls=2)
        assert 2 == srv.request_count


def test_scripted_evaluator_budget_counts_its_declared_batches() -> None:
    """A scripted evaluator declaring three documents a call judges six with a two-call budget."""
    assert [6] == _run(ScriptedEvaluator({}, documents_per_call=3), calls=2)


def test_evaluator_without_documents_per_call_is_refused() -> None:
    """An evaluator that does not declare documents_per_call is refused with a message naming it."""

    class Silent:
        def evaluate(self, question: str, documents: Sequence[Document]) -> Evaluation:
            return Evaluation(())

    with pytest.raises(ConfigError, match="must declare documents_per_call"):
        CorrectiveRAGOrchestrator(ListRetriever(CORPUS), Silent(), ScriptedRewriter([]))
