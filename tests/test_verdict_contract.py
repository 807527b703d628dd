"""The verdict contract end to end: rewriters learn from kept documents, stops say what held."""

from __future__ import annotations

import json

from hypothesis import example, given
from hypothesis import strategies as st

from corrective_rag.evaluate.cache import VerdictCache
from corrective_rag.evaluate.llm import LLMEvaluator
from corrective_rag.evaluate.policy import Decision, decide, get_policy
from corrective_rag.llm import prompts
from corrective_rag.llm.client import OpenAIChatClient, Retries
from corrective_rag.loop.feedback import feedback_query
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.loop.stopping import confident, stop_rule
from corrective_rag.rewrite.llm import LLMRewriter
from corrective_rag.rewrite.local import NOTHING_KEPT, LocalRewriter
from corrective_rag.testing import ListRetriever, ScriptedEvaluator, ScriptedLLMServer
from corrective_rag.types import Document, Judged, Relevance, RewriteRequest, StopReason, Verdict

QUESTION = "Which river flows past the Hollow Castle of Brenmark?"
DOCS = [
    Document(
        "castle-page", "The Hollow Castle of Brenmark stands above the Silver Tarn river valley."
    ),
    Document("unsure", "Brenmark Castle guides mention the Copper Fenwater Canal near the walls."),
    Document("off", "A castle recipe: brown butter, river salt and sage."),
]
SURE = Verdict("castle-page", True, Relevance.HIGH, 0.9, 0.9, reasoning="names the river valley")
# relevant, but a medium score at middling confidence: the general policy drops it
UNSURE = Verdict("unsure", True, Relevance.MEDIUM, 0.6, 0.5, reasoning="maybe")
NO = Verdict("off", False, Relevance.LOW, 0.1, 0.9, reasoning="a recipe")


def test_policy_drops_the_unsure_relevant_verdict() -> None:
    """The fixture's premise: the general policy keeps SURE and drops UNSURE and NO."""
    policy = get_policy("general")
    assert [Decision.KEEP, Decision.DROP, Decision.DROP] == [
        decide(v, policy) for v in (SURE, UNSURE, NO)
    ]


def test_local_rationale_never_names_a_dropped_document() -> None:
    """Through the loop, the local rewriter's rationale and query use kept documents only."""
    evaluator = ScriptedEvaluator({"castle-page": SURE, "unsure": UNSURE, "off": NO})
    orch = CorrectiveRAGOrchestrator(
        ListRetriever(DOCS), evaluator, LocalRewriter(), top_k=3, min_relevant=5
    )
    result = orch.run(QUESTION, max_iterations=2)
    rewrite = result.history[0].rewrite
    assert rewrite is not None and rewrite.query is not None
    assert "castle-page" in rewrite.rationale
    assert "unsure" not in rewrite.rationale and "off" not in rewrite.rationale
    assert "copper" not in rewrite.query.lower() and "fenwater" not in rewrite.query.lower()


def test_relevant_but_dropped_documents_teach_the_local_rewriter_nothing() -> None:
    """With only a dropped 'relevant' verdict, the local rewriter proposes nothing."""
    request = RewriteRequest(
        QUESTION, (QUESTION,), (Judged(DOCS[1], UNSURE),), kept_ids=frozenset()
    )
    rewrite = LocalRewriter().rewrite(request)
    assert (None, NOTHING_KEPT) == (rewrite.query, rewrite.rejected)


def test_llm_rewriter_quotes_kept_documents_only() -> None:
    """The rewrite prompt quotes the kept document and calls the dropped 'relevant' one not kept."""
    judged = tuple(Judged(d, v) for d, v in zip(DOCS, (SURE, UNSURE, NO), strict=True))
    request = RewriteRequest(QUESTION, (QUESTION,), judged, kept_ids=frozenset({"castle-page"}))
    with ScriptedLLMServer() as srv:
        client = OpenAIChatClient(srv.base_url, "scripted", retries=Retries(max_retries=0))
        rewrite = LLMRewriter(client).rewrite(request)
        prompt = srv.requests[0]["messages"][-1]["content"]
    assert "Silver Tarn" in prompt
    assert "Copper Fenwater" not in prompt
    feedback = feedback_query(LocalRewriter(), request, rewrite)  # the loop's free lane
    assert feedback is not None and "fenwater" not in feedback.lower()


def test_llm_verdict_not_relevant_with_high_score_is_never_kept() -> None:
    """A model answering relevant:false with score 0.95 keeps nothing in the loop."""

    def contradicting(request: dict) -> str:
        ids = [i for i, _ in prompts.parse_document_blocks(request["messages"][-1]["content"])]
        verdicts = [{"id": i, "relevant": False, "score": 0.95, "confidence": 1.0} for i in ids]
        return json.dumps({"verdicts": verdicts, "lacking": "", "next_query": QUESTION})

    with ScriptedLLMServer(contradicting) as srv:
        client = OpenAIChatClient(srv.base_url, "scripted", retries=Retries(max_retries=0))
        evaluator = LLMEvaluator(client, cache=VerdictCache(0))
        orch = CorrectiveRAGOrchestrator(
            ListRetriever(DOCS), evaluator, LLMRewriter(client), top_k=3
        )
        result = orch.run(QUESTION, max_iterations=2)
    assert () == result.kept_ids
    assert 3 == len(result.history[0].dropped_ids)


verdicts = st.builds(
    Verdict,
    st.just("d"),
    st.booleans(),
    st.just(Relevance.HIGH),
    st.floats(0.0, 1.0),
    st.floats(0.0, 1.0),
)


@example(
    [Verdict("d", False, Relevance.HIGH, 0.0, 0.0)]
    + [Verdict("d", True, Relevance.HIGH, 0.0, 1.0)] * 3,
    4,
    True,
)  # found by the search: three sure keeps and one that does not say relevant, of four needed
@given(st.lists(verdicts, max_size=6), st.integers(1, 4), st.booleans())
def test_enough_relevant_only_with_min_relevant_keeps_as_sure_as_the_policy_asks(
    kept: list[Verdict], min_relevant: int, stalled: bool
) -> None:
    """enough_relevant is reported only when min_relevant kept verdicts are relevant and their
    confidences sum to min_relevant x stop_confidence (the expected number of relevant keeps);
    min_relevant keeps each at stop_confidence always give it, fewer relevant keeps never."""
    policy = get_policy("general")
    policy = type(policy)(min_relevant=min_relevant)
    rule = stop_rule(kept, policy, stalled=stalled)
    relevant = [v for v in kept if v.relevant]
    total = sum(v.confidence or 0.0 for v in relevant)
    sure = sum(confident(v, policy) for v in kept)
    if rule is not None and rule[0] is StopReason.ENOUGH_RELEVANT:
        assert len(relevant) >= min_relevant >= 1
        assert total >= min_relevant * policy.stop_confidence - 1e-9
    if sure >= min_relevant and not any(v.missing for v in kept):
        assert rule is not None and rule[0] is StopReason.ENOUGH_RELEVANT
    if rule is not None and rule[0] is StopReason.KEPT_UNCONFIDENT:
        assert stalled and min_relevant <= len(kept)
        # short of confidence, or of keeps that say relevant, and the reason says which
        short = total < min_relevant * policy.stop_confidence
        assert short or len(relevant) < min_relevant
        assert ("say relevant" in rule[1]) == (len(relevant) < min_relevant)


def test_many_less_sure_keeps_stop_as_few_sure_ones_do() -> None:
    """Five keeps at 0.45 (2.25 relevant expected) stop like three at 0.75; two keeps at
    certainty never do when three are asked for, and three at 0.45 do not."""

    def keeps(n: int, confidence: float) -> list[Verdict]:
        return [Verdict(f"d{i}", True, Relevance.HIGH, 0.8, confidence) for i in range(n)]

    policy = get_policy("general")
    assert StopReason.ENOUGH_RELEVANT == stop_rule(keeps(5, 0.45), policy)[0]  # type: ignore[index]
    assert "0 of them at 0.7 or more" in stop_rule(keeps(5, 0.45), policy)[1]  # type: ignore[index]
    assert StopReason.ENOUGH_RELEVANT == stop_rule(keeps(3, 0.75), policy)[0]  # type: ignore[index]
    assert stop_rule(keeps(2, 1.0), policy) is None
    assert stop_rule(keeps(3, 0.45), policy) is None
    unsure = stop_rule(keeps(3, 0.45), policy, stalled=True)
    assert unsure is not None and StopReason.KEPT_UNCONFIDENT == unsure[0]
