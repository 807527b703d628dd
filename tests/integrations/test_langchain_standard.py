"""LangChain's own standard tests (langchain-tests) on our retriever and embeddings adapters.

They run offline: the retriever's loop is the offline judge (``LocalEvaluator``) and the local
rewriter over a keyword retriever; the embeddings are the real default model, from the cache.
"""

from __future__ import annotations

import functools
from typing import Any

from corpus import CORPUS, QUESTION
from langchain_tests.integration_tests import (
    EmbeddingsIntegrationTests,
    RetrieversIntegrationTests,
)
from langchain_tests.unit_tests import EmbeddingsUnitTests

from corrective_rag.evaluate.local import LocalEvaluator
from corrective_rag.integrations.langchain import CorrectiveRetriever, LangChainEmbeddings
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.models.embeddings import SentenceTransformerEmbedder
from corrective_rag.rewrite.local import LocalRewriter
from corrective_rag.testing import ListRetriever


@functools.cache
def _embedder() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder()


@functools.cache
def _orchestrator() -> CorrectiveRAGOrchestrator:
    """An offline loop that keeps three documents of the corpus for QUESTION."""
    return CorrectiveRAGOrchestrator(
        ListRetriever(CORPUS), LocalEvaluator(_embedder()), LocalRewriter(), top_k=5
    )


class TestCorrectiveRetrieverStandard(RetrieversIntegrationTests):
    """LangChain's retriever suite: k in the constructor and in invoke caps what is returned."""

    @property
    def retriever_constructor(self) -> type[CorrectiveRetriever]:
        return CorrectiveRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"orchestrator": _orchestrator()}

    @property
    def retriever_query_example(self) -> str:
        return QUESTION


class TestLangChainEmbeddingsUnit(EmbeddingsUnitTests):
    """LangChain's embeddings unit suite on LangChainEmbeddings."""

    @property
    def embeddings_class(self) -> type[LangChainEmbeddings]:
        return LangChainEmbeddings

    @property
    def embedding_model_params(self) -> dict[str, Any]:
        return {"embedder": _embedder()}


class TestLangChainEmbeddingsIntegration(EmbeddingsIntegrationTests):
    """LangChain's embeddings integration suite on LangChainEmbeddings."""

    @property
    def embeddings_class(self) -> type[LangChainEmbeddings]:
        return LangChainEmbeddings

    @property
    def embedding_model_params(self) -> dict[str, Any]:
        return {"embedder": _embedder()}
