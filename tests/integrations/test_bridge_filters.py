"""The filter suite of :mod:`corrective_rag.testing.filter_contract`, run over both bridges.

LangChain's in-memory store filters with :func:`~corrective_rag.integrations.bridge.where_matches`;
LlamaIndex's in-memory index with what the bridge gives it. Both must select what the reference
selects.
"""

from __future__ import annotations

import pytest

from corrective_rag.integrations.bridge import where_matches
from corrective_rag.testing import FilterContract
from corrective_rag.testing.filter_contract import FILTER_DOCUMENTS, LetterEmbedder

TOP = len(FILTER_DOCUMENTS)


@pytest.fixture(scope="module")
def langchain_retriever():
    """Our retriever over LangChain's in-memory store holding the suite's documents."""
    from langchain_core.documents import Document as LCDocument
    from langchain_core.vectorstores import InMemoryVectorStore

    from corrective_rag.integrations.langchain import LangChainEmbeddings, LangChainRetriever

    vs = InMemoryVectorStore(LangChainEmbeddings(LetterEmbedder()))
    vs.add_documents(
        [
            LCDocument(page_content=d.text, metadata=dict(d.metadata), id=d.id)
            for d in FILTER_DOCUMENTS
        ]
    )
    return LangChainRetriever(vs)


@pytest.fixture(scope="module")
def llamaindex_retriever():
    """Our retriever over LlamaIndex's in-memory vector index holding the suite's documents."""
    from llama_index.core import VectorStoreIndex
    from llama_index.core.schema import TextNode

    from corrective_rag.integrations.llamaindex import LlamaIndexEmbedding, LlamaIndexRetriever

    nodes = [TextNode(id_=d.id, text=d.text, metadata=dict(d.metadata)) for d in FILTER_DOCUMENTS]
    return LlamaIndexRetriever(
        VectorStoreIndex(nodes, embed_model=LlamaIndexEmbedding(LetterEmbedder()))
    )


class TestWhereMatches(FilterContract):
    """The bridge's predicate, document by document."""

    def select(self, where):
        return [d.id for d in FILTER_DOCUMENTS if where_matches(where, d.metadata)]


class TestLangChainBridge(FilterContract):
    """``LangChainRetriever`` over an ``InMemoryVectorStore``."""

    @pytest.fixture(autouse=True)
    def _hold(self, langchain_retriever) -> None:
        self.retriever = langchain_retriever

    def select(self, where):
        return [h.document.id for h in self.retriever.retrieve("year", top_k=TOP, where=where)]


class TestLlamaIndexBridge(FilterContract):
    """``LlamaIndexRetriever`` over a ``VectorStoreIndex`` (LlamaIndex's in-memory store)."""

    @pytest.fixture(autouse=True)
    def _hold(self, llamaindex_retriever) -> None:
        self.retriever = llamaindex_retriever

    def select(self, where):
        return [h.document.id for h in self.retriever.retrieve("year", top_k=TOP, where=where)]
