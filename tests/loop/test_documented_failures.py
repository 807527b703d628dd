"""What docs/loop.md says of failing parts holds: a rewriter's LLMError, an undeclared call size."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from corrective_rag.errors import ConfigError, LLMTransportError
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.testing import ListRetriever, ScriptedEvaluator, ScriptedRewriter
from corrective_rag.types import (
    Document,
    Evaluation,
    Rewrite,
    RewriteRequest,
    RewriteSource,
    StopReason,
)

QUESTION = "Which moon is the largest moon of Jupiter?"
CORPUS = [Document(f"d{i}", f"Jupiter moon fact number {i}.") for i in range(6)]


class Down:
    """A rewriter whose model does not answer."""

    def __init__(self) -> None:
        self.calls = 0

    def rewrite(self, request: RewriteRequest) -> Rewrite:
        self.calls += 1
        raise LLMTransportError("no complete answer within 60 s")


def test_a_rewriter_that_raises_llm_error_gives_a_rejected_rewrite_and_the_run_goes_on() -> None:
    """Grading worked and the rewriter raised LLMError: the run goes on with the next hits."""
    rewriter = Down()
    orch = CorrectiveRAGOrchestrator(
        ListRetriever(CORPUS), ScriptedEvaluator({}), rewriter, top_k=2, max_iterations=3
    )
    result = orch.run(QUESTION)
    first = result.history[0].rewrite
    assert first is not None and first.query is None
    assert (first.rejected or "").startswith("rewriter failed")
    assert RewriteSource.NEXT_HITS == first.source
    assert 1 == first.usage.failed_calls
    assert (StopReason.ITERATION_CAP, 3) == (result.stop_reason, result.iterations)
    assert 2 == rewriter.calls


def test_a_rewriter_error_with_every_grading_call_failed_ends_the_run() -> None:
    """When grading failed too in that iteration, the run ends there with rewrite_failed."""

    class DownJudge:
        documents_per_call = 1

        def evaluate(self, question: str, documents: Sequence[Document]) -> Evaluation:
            raise LLMTransportError("no complete answer within 60 s")

    result = CorrectiveRAGOrchestrator(
        ListRetriever(CORPUS), DownJudge(), Down(), top_k=2, max_iterations=3
    ).run(QUESTION)
    assert (StopReason.REWRITE_FAILED, 1) == (result.stop_reason, result.iterations)


def test_an_evaluator_without_documents_per_call_is_refused() -> None:
    """docs/loop.md: every evaluator declares documents_per_call; one without it is refused."""

    class Undeclared:
        def evaluate(self, question: str, documents: Sequence[Document]) -> Evaluation:
            return Evaluation(())

    with pytest.raises(ConfigError, match="documents_per_call"):
        CorrectiveRAGOrchestrator(ListRetriever(CORPUS), Undeclared(), ScriptedRewriter([]))
