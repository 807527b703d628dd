"""Verdicts decided by the model's token probabilities, against the scripted server's logprobs."""

from __future__ import annotations

import json
import math

import pytest

from corrective_rag.errors import ConfigError, InputError
from corrective_rag.evaluate.cache import VerdictCache
from corrective_rag.evaluate.llm import LLMEvaluator
from corrective_rag.evaluate.logprobs import (
    side_probability,
    value_probabilities,
    word_probability,
)
from corrective_rag.llm.client import OpenAIChatClient, Retries
from corrective_rag.llm.reply import read_logprobs
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.rewrite.llm import LLMRewriter
from corrective_rag.runs.records.codec import from_dict, to_dict
from corrective_rag.testing import Fault, ListRetriever, ScriptedLLMServer
from corrective_rag.testing.token_logprobs import scripted_logprobs
from corrective_rag.types import ChatReply, Document, RunResult, TokenLogprob

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
        verdicts = grade(srv, score_by="probability")
        assert 1 == srv.request_count
        assert (True, 5) == (srv.requests[0]["logprobs"], srv.requests[0]["top_logprobs"])
    on, off = verdicts["on"], verdicts["off"]
    assert ("logprob", "logprob") == (on.score_source, off.score_source)
    assert (True, False) == (on.relevant, off.relevant)
    assert 0.88 == pytest.approx(on.score) and 0.8 == pytest.approx(on.confidence)
    assert 0.2 == pytest.approx(off.score) and 0.8 == pytest.approx(off.confidence)


def test_disagreeing_probabilities_overrule_the_verbal_answer():
    """The model wrote true but put 0.2 on it: the verdict is irrelevant, scored 0.2."""
    with ScriptedLLMServer(logprobs="disagree") as srv:
        verdicts = grade(srv, score_by="probability")
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
        verdicts = grade(srv, score_by="probability", threshold=0.9)
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


def test_one_call_loop_records_probabilities_with_no_extra_call():
    """In the default one-call loop the probabilities cost no call: recorded beside the written
    verdicts by default, deciding with ``score_by="probability"``, and kept in the history."""
    runs = {}
    for mode, score_by in (("agree", "verbal"), ("agree", "probability"), (None, "verbal")):
        with ScriptedLLMServer(logprobs=mode) as srv:
            client = chat(srv)
            orch = CorrectiveRAGOrchestrator(
                ListRetriever(DOCS),
                LLMEvaluator(client, cache=VerdictCache(0), score_by=score_by),
                LLMRewriter(client),
                top_k=2,
                min_relevant=5,
            )
            runs[mode, score_by] = (orch.run(QUESTION, max_iterations=2), srv.request_count)
    (recorded, calls_r), (decided, calls_p), (without, calls) = runs.values()
    assert calls == calls_p == calls_r
    assert recorded.iterations == decided.iterations == without.iterations
    for run, source in ((recorded, "verbal"), (decided, "logprob")):
        again = from_dict(RunResult, json.loads(json.dumps(to_dict(run))))
        verdicts = [v for rec in again.history for v in rec.verdicts]
        assert {source} == {v.score_source for v in verdicts}
        assert all(v.probability in (pytest.approx(0.8), pytest.approx(0.2)) for v in verdicts)
    assert {None} == {v.probability for rec in without.history for v in rec.verdicts}


def test_ids_map_to_their_own_value_and_escaped_keys_are_not_read():
    """Each id gets its own value's P(true); a quoted ``"relevant": true`` inside a string not."""
    text = (
        '{"verdicts": [{"id": "a", "reasoning": "says \\"relevant\\": true", "relevant": false},'
        ' {"id": "b", "relevant": true}]}'
    )
    tokens = [
        TokenLogprob(
            t["token"], t["logprob"], tuple((a["token"], a["logprob"]) for a in t["top_logprobs"])
        )
        for t in scripted_logprobs(text, "agree", {"logprobs": True, "top_logprobs": 5})
    ]
    found = value_probabilities(text, tokens)
    assert {"a": pytest.approx(0.2), "b": pytest.approx(0.8)} == found
    assert {} == value_probabilities(text + " ", tokens)  # tokens that do not spell the text


def test_one_listed_side_is_bounded_by_the_smallest_listed_probability():
    """Only ``true`` listed: ``false`` had at most the smallest listed probability."""
    place = TokenLogprob(" true", math.log(0.6), ((" true", math.log(0.6)), ("x", math.log(0.2))))
    assert 0.6 / 0.8 == pytest.approx(side_probability(place, "true", "false"))
    assert side_probability(TokenLogprob("x", 0.0), "true", "false") is None
    yes = (TokenLogprob("\n", 0.0), TokenLogprob("Yes", math.log(0.3), (("No", math.log(0.6)),)))
    assert 1 / 3 == pytest.approx(word_probability(yes))


def test_malformed_logprobs_from_a_server_are_ignored():
    """Untrusted logprobs: a wrong type or too many tokens read as none, extras are cut, and a
    NaN or a positive log probability is kept as sent but gives no probability."""
    good = {"token": "a", "logprob": -0.1, "top_logprobs": [{"token": "b", "logprob": -1}] * 30}
    assert 20 == len(read_logprobs({"content": [good]})[0].top)
    assert read_logprobs({"content": [{"token": 1, "logprob": 0}]}) is None
    nan = {
        "token": "true",
        "logprob": float("nan"),
        "top_logprobs": [{"token": "false", "logprob": -1}],
    }
    read = read_logprobs({"content": [nan]})  # kept as sent; the probability reader refuses it
    assert read is not None and side_probability(read[0], "true", "false") is None
    assert read_logprobs({"content": [good] * 20_000}) is None
    assert read_logprobs("content") is None
    assert 0.5 == read_logprobs({"content": [{"token": "a", "logprob": 0.5}]})[0].logprob


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
