"""The LlamaIndex adapters, through the real llama-index-core, our embedder and HTTP server."""

from __future__ import annotations

import json

import pytest
from corpus import CORPUS, QUESTION
from http_models import HTTPLLM, ToolHTTPLLM
from llama_index.core import VectorStoreIndex
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, TextNode

from corrective_rag.errors import ConfigError, InputError, LLMError, StoreError
from corrective_rag.evaluate.llm import LLMEvaluator
from corrective_rag.integrations.llamaindex import (
    CorrectiveRetriever,
    LlamaIndexChatModel,
    LlamaIndexEmbedding,
    LlamaIndexRetriever,
    to_metadata_filters,
)
from corrective_rag.llm import prompts
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.rewrite.llm import LLMRewriter
from corrective_rag.testing import Fault, ScriptedLLMServer
from corrective_rag.types import StopReason


def corpus_index(embedder):
    """LlamaIndex's in-memory vector index over the corpus (one node per document)."""
    nodes = [TextNode(id_=d.id, text=d.text, metadata=dict(d.metadata)) for d in CORPUS]
    return VectorStoreIndex(nodes, embed_model=LlamaIndexEmbedding(embedder))


@pytest.fixture(scope="module")
def index(embedder):
    return corpus_index(embedder)


class FixedRetriever(BaseRetriever):
    """A retriever that is no index's: the same nodes for every query."""

    def __init__(self, nodes):
        super().__init__()
        self.nodes = nodes

    def _retrieve(self, query_bundle):
        return [NodeWithScore(node=n) for n in self.nodes]


def test_index_hits_are_the_indexs_own_ranking(index):
    """Hits keep the node ids, order and scores of the index's retriever, at the loop's depth."""
    expected = index.as_retriever(similarity_top_k=6).retrieve(QUESTION)
    hits = LlamaIndexRetriever(index).retrieve(QUESTION, top_k=6)
    assert [(n.node.node_id, n.score) for n in expected] == [(h.document.id, h.score) for h in hits]
    assert 3 == len(LlamaIndexRetriever(index).retrieve(QUESTION, top_k=3))


def test_where_becomes_metadata_filters(index):
    """A where filter reaches the index as MetadataFilters, $and/$or nested."""
    adapter = LlamaIndexRetriever(index)
    hits = adapter.retrieve(QUESTION, top_k=10, where={"kind": {"$in": ["food", "insect"]}})
    assert {"syrup", "sugar", "bread", "wasp", "ants"} == {h.document.id for h in hits}
    either = {"$or": [{"kind": "plant"}, {"kind": {"$eq": "food"}}]}
    assert {"flowers", "syrup", "sugar", "bread"} == {
        h.document.id for h in adapter.retrieve(QUESTION, top_k=10, where=either)
    }
    assert "or" == to_metadata_filters(either).condition.value
    nested = {"$or": [{"kind": "plant"}, {"$and": [{"kind": "food"}, {"kind": {"$ne": "x"}}]}]}
    assert {"flowers", "syrup", "sugar", "bread"} == {
        h.document.id for h in adapter.retrieve(QUESTION, top_k=10, where=nested)
    }  # the in-memory index is filtered by the bridge, nesting included
    with pytest.raises(InputError, match="invalid metadata filter"):
        adapter.retrieve(QUESTION, where={"kind": {"$like": "b%"}})


def test_a_plain_retriever_answers_as_it_does_and_cannot_filter():
    """A retriever with no index gives its own nodes (cut to top_k); where is refused."""
    nodes = [TextNode(id_=d.id, text=d.text) for d in CORPUS[:4]]
    adapter = LlamaIndexRetriever(FixedRetriever(nodes))
    assert ["bees", "hive"] == [h.document.id for h in adapter.retrieve("x", top_k=2)]
    with pytest.raises(ConfigError, match="takes no metadata filter"):
        adapter.retrieve("x", where={"kind": "bee"})


@pytest.mark.parametrize("id_key", ["", None, 3])
def test_an_unusable_id_key_is_refused_at_construction(id_key):
    """id_key must be a non-empty string, checked when the adapter is built (as LangChain's)."""
    with pytest.raises(ConfigError, match="id_key must be a non-empty string"):
        LlamaIndexRetriever(FixedRetriever([]), id_key=id_key)


def test_a_failing_index_is_a_store_error(index):
    """An exception inside the framework's retrieval comes out as our StoreError."""
    adapter = LlamaIndexRetriever(index, where_filter=lambda where: "not filters")
    with pytest.raises(StoreError, match="VectorStoreIndex search failed"):
        adapter.retrieve(QUESTION, where={"kind": "bee"})


def test_llm_without_function_calling_gets_the_schema_as_instructions():
    """A plain LLM is sent the schema as a rule, with the call's limits; usage is reported."""
    with ScriptedLLMServer() as server:
        chat = LlamaIndexChatModel(HTTPLLM(base_url=server.base_url, temperature=0.9))
        reply = chat.complete(
            prompts.rewriter_messages(QUESTION, [QUESTION], []),
            json_schema=prompts.rewrite_schema(),
            max_tokens=50,
        )
        sent = server.requests[0]
    assert "response_format" not in sent
    assert (0.0, 50) == (sent["temperature"], sent["max_tokens"])
    assert sent["messages"][-1]["content"].startswith("Reply with one JSON object")
    assert f"{QUESTION} background 1" == json.loads(reply.text)["query"]
    assert "scripted" == reply.model and reply.usage.prompt_tokens > 0


def test_function_calling_llm_answers_json_through_a_tool():
    """A function-calling LLM is made to call one tool whose parameters are the schema."""
    schema = prompts.rewrite_schema()
    with ScriptedLLMServer() as server:
        chat = LlamaIndexChatModel(ToolHTTPLLM(base_url=server.base_url))
        reply = chat.complete(
            prompts.rewriter_messages(QUESTION, [QUESTION], []), json_schema=schema
        )
        sent = server.requests[0]
    assert schema["properties"] == sent["response_format"]["json_schema"]["schema"]["properties"]
    assert "rewrite" == sent["response_format"]["json_schema"]["name"]
    assert f"{QUESTION} background 1" == json.loads(reply.text)["query"]


def test_llm_failure_is_an_llm_error_with_the_key_masked():
    """An LLM error becomes our LLMError, and the API key in its text is masked."""
    with ScriptedLLMServer() as server:
        server.enqueue(Fault.error(500, body='{"error": "bad key {authorization}"}'))
        llm = HTTPLLM(base_url=server.base_url)
        with pytest.raises(LLMError, match="call failed") as info:
            LlamaIndexChatModel(llm).complete([{"role": "user", "content": "hi"}])
    assert llm.api_key.get_secret_value() not in str(info.value)


def test_loop_inside_a_query_engine_fetches_nothing(embedder, monkeypatch, tmp_path, elsewhere):
    """The loop runs as a RetrieverQueryEngine's retriever over LlamaIndex parts, the engine's
    LLM answers from the kept nodes, and nothing but 127.0.0.1 is contacted (tiktoken and NLTK
    data included, with an empty TIKTOKEN_CACHE_DIR)."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "tiktoken"))
    with ScriptedLLMServer() as server:
        llm = HTTPLLM(base_url=server.base_url)
        chat = LlamaIndexChatModel(llm)
        retriever = CorrectiveRetriever(
            CorrectiveRAGOrchestrator(
                LlamaIndexRetriever(corpus_index(embedder)),
                LLMEvaluator(chat, batch_size=2, max_workers=1),
                LLMRewriter(chat),
                top_k=2,
                max_iterations=4,
            )
        )
        engine = RetrieverQueryEngine.from_args(retriever, llm=llm)
        response = engine.query(QUESTION)
        last = server.requests[-1]["messages"]
    assert [] == elsewhere
    assert any((tmp_path / "tiktoken").iterdir())  # cl100k_base seeded where tiktoken looks
    result = retriever.last_result
    assert result is not None and StopReason.ENOUGH_RELEVANT == result.stop_reason
    assert 2 <= result.iterations
    assert list(result.kept_ids) == [n.node.node_id for n in response.source_nodes]
    assert [k.verdict.score for k in result.kept] == [n.score for n in response.source_nodes]
    assert {"confidence", "reasoning", "iteration", "run_id"} <= set(
        response.source_nodes[0].node.metadata
    )
    prompt = " ".join(m["content"] for m in last)
    assert all(k.document.text in prompt for k in result.kept)
    assert "kind: bee" in prompt and "run_id" not in prompt  # the verdict stays out
    assert "ok" == str(response)


def test_aretrieve_runs_the_loop_off_the_event_loop(index):
    """An async query engine's aretrieve runs the loop in a worker thread, same kept nodes."""
    import asyncio
    import threading

    threads: list[str] = []

    class Recording(CorrectiveRAGOrchestrator):
        def run(self, question, **kwargs):
            threads.append(threading.current_thread().name)
            return super().run(question, **kwargs)

    with ScriptedLLMServer() as server:
        chat = LlamaIndexChatModel(HTTPLLM(base_url=server.base_url))
        orchestrator = Recording(
            LlamaIndexRetriever(index), LLMEvaluator(chat, max_workers=1), LLMRewriter(chat)
        )
        retriever = CorrectiveRetriever(orchestrator, top_k=3)
        nodes = asyncio.run(retriever.aretrieve(QUESTION))
    assert 1 == len(threads) and threading.main_thread().name != threads[0]
    assert list(retriever.last_result.kept_ids) == [n.node.node_id for n in nodes]


def test_a_fixed_depth_retriever_ends_the_loop_with_no_progress(index):
    """A retriever that cannot give more candidates ends the run with no_progress, not a loop
    over the same documents."""
    with ScriptedLLMServer() as server:
        chat = LlamaIndexChatModel(HTTPLLM(base_url=server.base_url))
        result = CorrectiveRAGOrchestrator(
            LlamaIndexRetriever(index.as_retriever(similarity_top_k=2)),
            LLMEvaluator(chat, max_workers=1),
            LLMRewriter(chat),
            top_k=2,
            max_iterations=4,
            min_relevant=5,
        ).run(QUESTION)
    assert StopReason.NO_PROGRESS == result.stop_reason
    assert 2 == len({v.document_id for r in result.history for v in r.verdicts})


SPLIT_OFFLINE = """
import socket
real, tried = socket.socket.connect, []
def loopback_only(sock, address):
    if isinstance(address, tuple) and address[0] != "127.0.0.1":
        tried.append(address)
        raise OSError("blocked by the test")
    return real(sock, address)
socket.socket.connect = loopback_only
import corrective_rag.integrations.llamaindex
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.node_parser import SentenceSplitter
text = "Honey bees make honey from nectar. " * 100
index = VectorStoreIndex.from_documents(
    [Document(text=text)], embed_model=MockEmbedding(embed_dim=8),
    transformations=[SentenceSplitter(chunk_size=64, chunk_overlap=8)],
)
print(len(index.docstore.docs), tried)
"""


def test_splitting_documents_fetches_no_tokenizer(tmp_path):
    """With an empty TIKTOKEN_CACHE_DIR, importing the adapter is enough for LlamaIndex's own
    splitter to find cl100k_base without a download (it runs before any adapter is built)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(tmp_path)}
    env.pop("NLTK_DATA", None)
    out = subprocess.run(
        [sys.executable, "-c", SPLIT_OFFLINE], check=False, env=env, capture_output=True, text=True
    )
    assert 0 == out.returncode, out.stderr[-2000:]
    count, tried = out.stdout.split(" ", 1)
    assert int(count) > 1 and "[]" == tried.strip()


def test_similarity_top_k_caps_the_nodes_returned_best_first(offline_orchestrator):
    """similarity_top_k, in the constructor or per retrieve/aretrieve, returns the best kept
    nodes; the run keeps all it found."""
    import asyncio

    retriever = CorrectiveRetriever(offline_orchestrator, similarity_top_k=2)
    nodes = retriever.retrieve(QUESTION)
    result = retriever.last_result
    assert result is not None and 3 == len(result.kept)
    assert list(result.kept_ids[:2]) == [n.node.node_id for n in nodes]
    first = retriever.retrieve(QUESTION, similarity_top_k=1)
    assert [result.kept_ids[0]] == [n.node.node_id for n in first]
    assert 3 == len(retriever.retrieve(QUESTION, similarity_top_k=10))
    assert 1 == len(asyncio.run(retriever.aretrieve(QUESTION, similarity_top_k=1)))
    assert 2 == len(retriever.retrieve(QUESTION))  # a call's override does not stay


def test_unknown_options_and_bad_caps_are_refused(offline_orchestrator):
    """A misspelt option raises TypeError and a cap that is no int >= 1 ConfigError, instead of
    being ignored."""
    with pytest.raises(TypeError, match="top_n"):
        CorrectiveRetriever(offline_orchestrator, top_n=3)
    with pytest.raises(ConfigError, match="similarity_top_k must be None or an int >= 1"):
        CorrectiveRetriever(offline_orchestrator, similarity_top_k=0)
    retriever = CorrectiveRetriever(offline_orchestrator)
    with pytest.raises(TypeError, match="top_n"):
        retriever.retrieve(QUESTION, top_n=1)
    with pytest.raises(ConfigError, match="similarity_top_k"):
        retriever.retrieve(QUESTION, similarity_top_k=2.5)
