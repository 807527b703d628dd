"""The LangChain adapters, through the real langchain-core, our embedder and a real HTTP server."""

from __future__ import annotations

import json

import pytest
from corpus import CORPUS, QUESTION
from http_models import HTTPChatModel, PlainHTTPChatModel
from langchain_core.documents import Document as LCDocument
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnablePassthrough
from langchain_core.vectorstores import InMemoryVectorStore

from corrective_rag.errors import ConfigError, InputError, LLMError, StoreError
from corrective_rag.evaluate.llm import LLMEvaluator
from corrective_rag.integrations.langchain import (
    CorrectiveRetriever,
    LangChainChatModel,
    LangChainEmbeddings,
    LangChainRetriever,
)
from corrective_rag.llm import prompts
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.rewrite.llm import LLMRewriter
from corrective_rag.testing import Fault, ScriptedLLMServer
from corrective_rag.types import StopReason


@pytest.fixture(scope="module")
def store(embedder):
    """LangChain's in-memory vector store over the corpus, embedded with our model."""
    vs = InMemoryVectorStore(LangChainEmbeddings(embedder))
    vs.add_documents(
        [LCDocument(page_content=d.text, metadata=dict(d.metadata), id=d.id) for d in CORPUS]
    )
    return vs


class KeywordRetriever(BaseRetriever):
    """A retriever that is no vector store's: documents sharing a word, ``k`` at most."""

    docs: list[LCDocument]
    k: int = 2

    def _get_relevant_documents(self, query, *, run_manager):
        words = set(query.lower().split())
        found = [d for d in self.docs if words & set(d.page_content.lower().split())]
        return found[: self.k]


def test_vector_store_hits_are_the_stores_own_ranking(store):
    """Hits keep the store's ids, order and scores, and a deeper top_k extends the same list."""
    expected = store.similarity_search_with_score(QUESTION, k=6)
    hits = LangChainRetriever(store).retrieve(QUESTION, top_k=6)
    assert [(d.id, s) for d, s in expected] == [(h.document.id, h.score) for h in hits]
    assert [1, 2, 3, 4, 5, 6] == [h.rank for h in hits]
    assert [h.document.id for h in hits[:2]] == [
        h.document.id for h in LangChainRetriever(store).retrieve(QUESTION, top_k=2)
    ]
    assert {"kind": "bee"} == dict(
        next(h for h in hits if h.document.id == "bees").document.metadata
    )


def test_where_filters_an_in_memory_store(store):
    """A where filter reaches the in-memory store as a predicate with the stores' semantics."""
    adapter = LangChainRetriever(store)
    hits = adapter.retrieve(QUESTION, top_k=10, where={"kind": {"$in": ["food", "insect"]}})
    assert {"syrup", "sugar", "bread", "wasp", "ants"} == {h.document.id for h in hits}
    with pytest.raises(InputError, match="invalid metadata filter"):
        adapter.retrieve(QUESTION, where={"kind": {"$like": "b%"}})


def test_vector_store_retriever_pages_and_filters(store):
    """A VectorStoreRetriever is searched through its store with the loop's k and filter."""
    adapter = LangChainRetriever(store.as_retriever(search_kwargs={"k": 1}))
    assert 5 == len(adapter.retrieve(QUESTION, top_k=5))
    assert {"bread", "sugar", "syrup"} == {
        h.document.id for h in adapter.retrieve(QUESTION, top_k=5, where={"kind": "food"})
    }
    mmr = LangChainRetriever(store.as_retriever(search_type="mmr"))
    assert 4 == len(mmr.retrieve(QUESTION, top_k=4, where={"kind": {"$ne": "food"}}))


def test_a_plain_retriever_is_sized_by_its_k_and_cannot_filter():
    """A retriever with a k field is copied with the loop's k; where is refused clearly."""
    docs = [LCDocument(page_content=d.text, metadata={"id": d.id}) for d in CORPUS]
    source = KeywordRetriever(docs=docs)
    adapter = LangChainRetriever(source)
    hits = adapter.retrieve("honey bees nectar", top_k=3)
    assert ["bees", "hive", "nectar"] == [h.document.id for h in hits]
    assert 2 == source.k  # the user's retriever is unchanged
    assert [1.0, 0.5, pytest.approx(1 / 3)] == [h.score for h in hits]
    with pytest.raises(ConfigError, match="takes no metadata filter"):
        adapter.retrieve("honey", where={"kind": "bee"})


def test_a_failing_store_is_a_store_error(store):
    """An exception inside the framework's search comes out as our StoreError, cause chained."""
    adapter = LangChainRetriever(store, where_filter=lambda where: "not a predicate")
    with pytest.raises(StoreError, match="InMemoryVectorStore search failed") as info:
        adapter.retrieve(QUESTION, where={"kind": "bee"})
    assert isinstance(info.value.__cause__, TypeError)


def test_source_must_be_a_langchain_retriever_or_store():
    """Anything else is refused at construction."""
    with pytest.raises(ConfigError, match="VectorStore or BaseRetriever"):
        LangChainRetriever(object())


def test_chat_model_uses_structured_output_limits_and_reported_usage():
    """A model with tool binding answers JSON through it; limits and usage cross the adapter."""
    schema = prompts.rewrite_schema()
    with ScriptedLLMServer() as server:
        chat = LangChainChatModel(HTTPChatModel(base_url=server.base_url, temperature=0.7))
        reply = chat.complete(
            prompts.rewriter_messages(QUESTION, [QUESTION], []),
            json_schema=schema,
            max_tokens=64,
            temperature=0.0,
        )
        sent = server.requests[0]
    assert "json_schema" == sent["response_format"]["type"]
    assert {k: v for k, v in schema.items() if k != "title"}.items() <= sent["response_format"][
        "json_schema"
    ]["schema"].items()
    assert (0.0, 64) == (sent["temperature"], sent["max_tokens"])
    assert f"{QUESTION} background 1" == json.loads(reply.text)["query"]
    assert "scripted" == reply.model
    assert 1 == reply.usage.llm_calls and reply.usage.prompt_tokens > 0
    assert reply.usage.completion_tokens > 0


def test_chat_model_without_structured_output_gets_the_schema_as_instructions():
    """A model without tool binding is sent the schema as a rule; the reply is its text."""
    with ScriptedLLMServer(usage=False) as server:
        chat = LangChainChatModel(PlainHTTPChatModel(base_url=server.base_url))
        reply = chat.complete(
            prompts.rewriter_messages(QUESTION, [QUESTION], []),
            json_schema=prompts.rewrite_schema(),
        )
        sent = server.requests[0]
    assert "response_format" not in sent
    assert sent["messages"][-1]["content"].startswith("Reply with one JSON object")
    assert f"{QUESTION} background 1" == json.loads(reply.text)["query"]
    assert reply.usage.prompt_tokens > 0  # not reported: counted


def test_chat_model_failure_is_an_llm_error_with_the_key_masked():
    """A provider error becomes our LLMError, and the API key in its text is masked."""
    with ScriptedLLMServer() as server:
        server.enqueue(Fault.error(500, body='{"error": "bad key {authorization}"}'))
        model = HTTPChatModel(base_url=server.base_url)
        with pytest.raises(LLMError, match="call failed") as info:
            LangChainChatModel(model).complete([{"role": "user", "content": "hi"}])
    assert "HTTP 500" in str(info.value)
    assert model.api_key.get_secret_value() not in str(info.value)


def test_loop_inside_an_lcel_chain(store, elsewhere):
    """The loop runs inside an LCEL chain over LangChain parts: its kept documents carry their
    verdicts into the prompt, the chain's model answers from them, and nothing but 127.0.0.1
    is contacted."""
    with ScriptedLLMServer() as server:
        lc_model = HTTPChatModel(base_url=server.base_url)
        chat = LangChainChatModel(lc_model)
        retriever = CorrectiveRetriever(
            orchestrator=CorrectiveRAGOrchestrator(
                LangChainRetriever(store),
                LLMEvaluator(chat, batch_size=2, max_workers=1),
                LLMRewriter(chat),
                top_k=2,
                max_iterations=4,
            )
        )
        prompt = ChatPromptTemplate.from_messages(
            [("system", "Answer from the context."), ("user", "{question}\n\n{context}")]
        )

        def context(docs):
            return "\n".join(f"[{d.id} score={d.metadata['score']}] {d.page_content}" for d in docs)

        chain = (
            {"context": retriever | context, "question": RunnablePassthrough()}
            | prompt
            | lc_model
            | StrOutputParser()
        )
        answer = chain.invoke(QUESTION)
        last = server.requests[-1]["messages"][-1]["content"]
    assert [] == elsewhere
    result = retriever.last_result
    assert result is not None and StopReason.ENOUGH_RELEVANT == result.stop_reason
    assert {"bees", "hive", "nectar"} <= set(result.kept_ids)
    assert 2 <= result.iterations  # top_k=2: the loop paged past its first hits
    for kept in result.kept:
        assert f"[{kept.document.id} score={kept.verdict.score}]" in last
    assert "ok" == answer  # the scripted server's reply to a prompt that is not ours
    docs = retriever.invoke(QUESTION)
    assert list(result.kept_ids) == [d.id for d in docs]
    first = docs[0].metadata
    assert {"score", "confidence", "reasoning", "iteration", "rank", "run_id", "kind"} <= set(first)


def test_chat_model_reads_block_content_and_counts_unreported_tokens():
    """A reply made of content blocks is read as their joined text; with no usage reported the
    tokens are counted."""
    from langchain_core.language_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    blocks = [{"type": "text", "text": '{"query": "a", '}, {"type": "text", "text": '"x": 1}'}]
    model = GenericFakeChatModel(messages=iter([AIMessage(content=blocks)]))
    reply = LangChainChatModel(model).complete([{"role": "user", "content": "two words"}])
    assert '{"query": "a", "x": 1}' == reply.text
    from corrective_rag.models.tokens import TiktokenCounter

    counter = TiktokenCounter()
    expected = (counter.count("two words"), counter.count(reply.text))
    assert expected == (reply.usage.prompt_tokens, reply.usage.completion_tokens)


def test_a_cancelled_run_makes_no_call():
    """Inside a cancelled call scope (Ctrl-C), the adapter raises Cancelled before calling."""
    from corrective_rag.calls.scope import call_scope
    from corrective_rag.errors import Cancelled

    with ScriptedLLMServer() as server:
        chat = LangChainChatModel(HTTPChatModel(base_url=server.base_url))
        with call_scope() as cancel, pytest.raises(Cancelled):
            cancel.set()
            chat.complete([{"role": "user", "content": "hi"}])
        assert 0 == server.request_count


def test_k_caps_the_documents_returned_best_first(offline_orchestrator):
    """k, in the constructor or per invoke/ainvoke, returns the k best kept documents; the run
    keeps all it found."""
    import asyncio

    retriever = CorrectiveRetriever(orchestrator=offline_orchestrator, k=2)
    docs = retriever.invoke(QUESTION)
    result = retriever.last_result
    assert result is not None and 3 == len(result.kept)
    assert list(result.kept_ids[:2]) == [d.id for d in docs]
    assert [result.kept_ids[0]] == [d.id for d in retriever.invoke(QUESTION, k=1)]
    assert 3 == len(retriever.invoke(QUESTION, k=10))
    assert 1 == len(asyncio.run(retriever.ainvoke(QUESTION, k=1)))


def test_unknown_fields_and_keywords_are_refused(offline_orchestrator):
    """A misspelt field or invoke keyword, or a k that is no int >= 1, raises instead of being
    ignored."""
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="top_n"):
        CorrectiveRetriever(orchestrator=offline_orchestrator, top_n=3)
    with pytest.raises(ValidationError):
        CorrectiveRetriever(orchestrator=offline_orchestrator, k=0)
    retriever = CorrectiveRetriever(orchestrator=offline_orchestrator)
    with pytest.raises(ConfigError, match="unknown keyword 'top_n'"):
        retriever.invoke(QUESTION, top_n=1)
    with pytest.raises(ConfigError, match="k must be None or an int >= 1"):
        retriever.invoke(QUESTION, k=True)
