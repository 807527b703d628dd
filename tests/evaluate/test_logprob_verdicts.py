"""Verdicts decided by the model's token probabilities, against the scripted server's logprobs."""

from __future__ import annotations

import json

import pytest

from corrective_rag.errors import ConfigError, InputError
from corrective_rag.evaluate.cache import VerdictCache
from corrective_rag.evaluate.llm import LLMEvaluator
from corrective_rag.evaluate.logprobs import calibrated
from corrective_rag.llm.client import OpenAIChatClient, Retries
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.rewrite.llm import LLMRewriter
from corrective_rag.runs.records.codec import from_dict, to_dict
from corrective_rag.testing import Fault, ListRetriever, ScriptedLLMServer
from corrective_rag.types import ChatReply, Document, RunResult

QUESTION = "How do volcanoes form magma chambers?"
ON_TOPIC = "Volcanoes form magma chambers when molten rock pools under the crust."
OFF_TOPIC = "The stock market closed higher after bank earnings."
DOCS = [Document("on", ON_TOPIC), Document("off", OFF_TOPIC)]


def chat(server: ScriptedLLMServer, **kw) -> OpenAIChatClient:
    return OpenAIChatClient(server.base_url, "scripted", retries=Retries(max_retries=0), **kw)


def grade(server: ScriptedLLMServer, **kw) -> dict:
    evaluation = LLMEvaluator(chat(server), cache=VerdictCache(0), **kw).evaluate(QUESTION, DOCS)
    return {v.document_id: v for v in evaluation.verdicts}


@pytest.mark.parametrize("streaming", [True, False])
def test_agreeing_probabilities_score_the_verdicts_in_the_same_call(streaming):
    """With logprobs returned, score and confidence come from P(true), in one call per batch."""
    with ScriptedLLMServer(logprobs="agree", streaming=streaming) as srv:
        verdicts = grade(srv)
        assert 1 == srv.request_count
        assert (True, 5) == (srv.requests[0]["logprobs"], srv.requests[0]["top_logprobs"])
    on, off = verdicts["on"], verdicts["off"]
    assert ("logprob", "logprob") == (on.score_source, off.score_source)
    assert (True, False) == (on.relevant, off.relevant)
    assert 0.8 == pytest.approx(on.score) and 0.8 == pytest.approx(on.confidence)
    assert 0.2 == pytest.approx(off.score) and 0.8 == pytest.approx(off.confidence)


def test_disagreeing_probabilities_overrule_the_verbal_answer():
    """The model wrote true but put 0.2 on it: the verdict is irrelevant, scored 0.2."""
    with ScriptedLLMServer(logprobs="disagree") as srv:
        verdicts = grade(srv)
    assert (False, True) == (verdicts["on"].relevant, verdicts["off"].relevant)
    assert 0.2 == pytest.approx(verdicts["on"].score)
    assert "logprob" == verdicts["on"].score_source


def test_without_logprobs_nothing_changes():
    """A server returning no logprobs gives the same verdicts as an evaluator not asking."""
    with ScriptedLLMServer() as srv:
        asked = grade(srv)
        not_asked = grade(srv, logprobs=None)
        assert "logprobs" not in srv.requests[1]
    assert not_asked == asked
    assert {"verbal"} == {v.score_source for v in asked.values()}


def test_fitted_threshold_moves_the_decision():
    """With threshold 0.9, P(true) 0.8 is below it: not relevant, scored under 0.5."""
    with ScriptedLLMServer(logprobs="agree") as srv:
        verdicts = grade(srv, threshold=0.9)
    assert verdicts["on"].relevant is False
    assert verdicts["on"].score < 0.5


def test_server_refusing_logprobs_is_asked_again_without_them_and_never_again():
    """A 400 naming logprobs costs one retry; later calls do not ask for them."""
    refusal = '{"error": {"message": "logprobs is not supported by this model"}}'
    with ScriptedLLMServer(logprobs="agree") as srv:
        srv.enqueue(Fault.error(400, refusal))
        evaluator = LLMEvaluator(chat(srv), cache=VerdictCache(0))
        first = {v.document_id: v for v in evaluator.evaluate(QUESTION, DOCS).verdicts}
        second = {v.document_id: v for v in evaluator.evaluate(QUESTION, DOCS).verdicts}
        asked = ["logprobs" in r for r in srv.requests]
    assert [True, False, False] == asked
    assert {"verbal"} == {v.score_source for v in [*first.values(), *second.values()]}


def test_chat_model_without_the_keyword_is_called_as_before():
    """A user's ChatModel written before ``logprobs`` existed still grades (verbal scores)."""

    class Legacy:
        model = "legacy"

        def __init__(self, inner):
            self.inner = inner

        def complete(self, messages, *, json_schema=None, max_tokens=None, temperature=0.0):
            return self.inner.complete(
                messages, json_schema=json_schema, max_tokens=max_tokens, temperature=temperature
            )

    with ScriptedLLMServer(logprobs="agree") as srv:
        evaluator = LLMEvaluator(Legacy(chat(srv)))
        evaluation = evaluator.evaluate(QUESTION, DOCS)
    assert evaluator.logprobs is None
    assert all(v.graded and v.score_source == "verbal" for v in evaluation.verdicts)


def test_one_call_loop_scores_by_probability_with_no_extra_call():
    """In the default one-call loop the probability verdicts cost no call, and history says so."""
    runs = {}
    for mode in ("agree", None):
        with ScriptedLLMServer(logprobs=mode) as srv:
            client = chat(srv)
            orch = CorrectiveRAGOrchestrator(
                ListRetriever(DOCS),
                LLMEvaluator(client, cache=VerdictCache(0)),
                LLMRewriter(client),
                top_k=2,
                min_relevant=5,
            )
            runs[mode] = (orch.run(QUESTION, max_iterations=2), srv.request_count)
    (with_p, calls_p), (without, calls) = runs["agree"], runs[None]
    assert calls == calls_p
    assert with_p.iterations == without.iterations
    sources = {v.score_source for rec in with_p.history for v in rec.verdicts}
    assert {"logprob"} == sources
    again = from_dict(RunResult, json.loads(json.dumps(to_dict(with_p))))
    assert {"logprob"} == {v.score_source for rec in again.history for v in rec.verdicts}


def test_calibration_maps_the_threshold_onto_the_relevant_boundary():
    """P(true) at the threshold scores 0.5; above it relevant, below it not; monotone."""
    assert (True, 0.5, 0.5) == calibrated(0.3, 0.3)
    assert calibrated(0.29, 0.3)[0] is False
    scores = [calibrated(p / 10, 0.3)[1] for p in range(11)]
    assert scores == sorted(scores) and (0.0, 1.0) == (scores[0], scores[-1])


def test_logprobs_keyword_is_checked():
    """An evaluator's logprobs and threshold are checked at construction."""
    with ScriptedLLMServer() as srv:
        with pytest.raises(ConfigError):
            LLMEvaluator(chat(srv), logprobs=21)
        with pytest.raises(ConfigError):
            LLMEvaluator(chat(srv), threshold=1.0)
        client = chat(srv)
        for wrong in ("5", 21, -1):
            with pytest.raises(InputError, match="logprobs"):
                client.complete([{"role": "user", "content": "hi"}], logprobs=wrong)
    assert ChatReply("x").logprobs is None


def test_score_source_is_checked():
    """A verdict's score_source is "verbal" or "logprob"; anything else is refused."""
    from corrective_rag.types import Relevance, Verdict

    with pytest.raises(InputError, match="score_source"):
        Verdict("d", True, Relevance.HIGH, 0.9, 0.9, score_source="guess")
    assert "verbal" == Verdict("d", True, Relevance.HIGH, 0.9, 0.9).score_source
