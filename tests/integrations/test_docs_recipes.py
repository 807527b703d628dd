"""The recipes in docs/integrations.md run as printed, over the real frameworks."""

from __future__ import annotations

import re
from pathlib import Path

from corpus import CORPUS, QUESTION
from http_models import HTTPLLM, HTTPChatModel
from langchain_core.documents import Document as LCDocument
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core import VectorStoreIndex
from llama_index.core.schema import TextNode

from corrective_rag.integrations.langchain import LangChainEmbeddings
from corrective_rag.integrations.llamaindex import LlamaIndexEmbedding
from corrective_rag.testing import ScriptedLLMServer

PAGE = Path(__file__).resolve().parents[2] / "docs" / "integrations.md"


def _recipes(heading: str) -> dict[str, object]:
    """The functions the page's Python blocks under ``heading`` define."""
    section = PAGE.read_text(encoding="utf-8").split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]
    namespace: dict[str, object] = {}
    for code in re.findall(r"```python\n(.*?)```", section, re.S):
        exec(compile(code, str(PAGE), "exec"), namespace)
    return namespace


def test_langchain_recipes_run(embedder):
    """The LangChain loop and chain recipes keep the answering documents and answer."""
    recipes = _recipes("## LangChain")
    store = InMemoryVectorStore(LangChainEmbeddings(embedder))
    store.add_documents([LCDocument(page_content=d.text, id=d.id) for d in CORPUS])
    prompt = ChatPromptTemplate.from_messages([("user", "{question}\n{context}")])
    with ScriptedLLMServer() as server:
        llm = HTTPChatModel(base_url=server.base_url)
        orchestrator = recipes["corrective_loop"](store, llm)
        assert {"bees", "hive", "nectar"} <= set(orchestrator.run(QUESTION).kept_ids)
        answer = recipes["corrective_chain"](orchestrator, prompt, llm).invoke(QUESTION)
    assert "ok" == answer.content


def test_llamaindex_recipes_run(embedder):
    """The LlamaIndex loop and query-engine recipes keep the answering documents and answer."""
    recipes = _recipes("## LlamaIndex")
    nodes = [TextNode(id_=d.id, text=d.text) for d in CORPUS]
    index = VectorStoreIndex(nodes, embed_model=LlamaIndexEmbedding(embedder))
    with ScriptedLLMServer() as server:
        llm = HTTPLLM(base_url=server.base_url)
        orchestrator = recipes["corrective_loop"](index, llm)
        assert {"bees", "hive", "nectar"} <= set(orchestrator.run(QUESTION).kept_ids)
        response = recipes["corrective_engine"](orchestrator, llm).query(QUESTION)
    assert {"bees", "hive", "nectar"} <= {n.node.node_id for n in response.source_nodes}
