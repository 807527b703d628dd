"""The same loop, run natively and through each framework, keeps the same documents."""

from __future__ import annotations

from corpus import CORPUS, QUESTION
from http_models import HTTPLLM, HTTPChatModel
from langchain_core.documents import Document as LCDocument
from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core import VectorStoreIndex
from llama_index.core.schema import TextNode

from corrective_rag.evaluate.llm import LLMEvaluator
from corrective_rag.integrations.langchain import (
    LangChainChatModel,
    LangChainEmbeddings,
    LangChainRetriever,
)
from corrective_rag.integrations.llamaindex import (
    LlamaIndexChatModel,
    LlamaIndexEmbedding,
    LlamaIndexRetriever,
)
from corrective_rag.llm.client import OpenAIChatClient
from corrective_rag.loop.lanes import Lanes
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.rewrite.llm import LLMRewriter
from corrective_rag.store.fusion import ConvexFusion
from corrective_rag.store.hybrid import HybridStore
from corrective_rag.testing import ScriptedLLMServer


def _run(retriever, chat):
    orchestrator = CorrectiveRAGOrchestrator(
        retriever,
        LLMEvaluator(chat, batch_size=2, max_workers=1),
        LLMRewriter(chat),
        top_k=2,
        max_iterations=4,
        # the model's rewrites only: the free feedback query is made of words the kept
        # documents share, whose near-tied hits two vector engines may order differently
        lanes=Lanes(feedback=False),
    )
    return orchestrator.run(QUESTION)


def _trace(result):
    return [(r.searched, [v.document_id for v in r.verdicts], r.kept_ids) for r in result.history]


def test_native_langchain_and_llamaindex_loops_keep_the_same_ids(embedder):
    """Over one corpus and one embedding model (dense ranking), with the same scripted model
    behind each framework's chat model, the three loops search, judge and keep alike."""
    native_store = HybridStore.in_memory(embedder=embedder, fusion=ConvexFusion(1.0))
    native_store.add(CORPUS)
    lc_store = InMemoryVectorStore(LangChainEmbeddings(embedder))
    lc_store.add_documents(
        [LCDocument(page_content=d.text, metadata=dict(d.metadata), id=d.id) for d in CORPUS]
    )
    li_index = VectorStoreIndex(
        [TextNode(id_=d.id, text=d.text, metadata=dict(d.metadata)) for d in CORPUS],
        embed_model=LlamaIndexEmbedding(embedder),
    )
    with ScriptedLLMServer() as server:
        native = _run(native_store, OpenAIChatClient(server.base_url, "scripted"))
        lc = _run(
            LangChainRetriever(lc_store),
            LangChainChatModel(HTTPChatModel(base_url=server.base_url)),
        )
        li = _run(
            LlamaIndexRetriever(li_index), LlamaIndexChatModel(HTTPLLM(base_url=server.base_url))
        )
    native_store.close()
    assert 2 <= native.iterations  # top_k=2: the loop paged past its first hits
    assert {"bees", "hive", "nectar"} <= set(native.kept_ids)
    assert native.kept_ids == lc.kept_ids == li.kept_ids
    assert _trace(native) == _trace(lc) == _trace(li)
    assert native.stop_reason == lc.stop_reason == li.stop_reason
