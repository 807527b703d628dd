"""LangChain adapters, both ways (extra ``[langchain]``: ``langchain-core`` only).

- :class:`CorrectiveRetriever`: the corrective loop as a LangChain ``BaseRetriever``, so it drops
  into an LCEL chain or a LangGraph node; ``invoke(question)`` returns the kept documents with
  their verdicts in ``metadata``.
- :class:`LangChainRetriever`: a LangChain ``VectorStore`` or ``BaseRetriever`` as the loop's
  :class:`~corrective_rag.protocols.Retriever`, so an existing index is the loop's corpus.
- :class:`LangChainChatModel`: a LangChain ``BaseChatModel`` as the loop's
  :class:`~corrective_rag.protocols.ChatModel`, so the evaluator, rewriter and generator run
  on the provider the user already configured.
- :class:`LangChainEmbeddings`: our :class:`~corrective_rag.protocols.Embedder` as LangChain
  ``Embeddings``, to build a LangChain vector store with the loop's embedding model.
"""

from __future__ import annotations

import contextlib
import inspect
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, ClassVar

from corrective_rag.integrations import MissingExtraError

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForRetrieverRun,
        CallbackManagerForRetrieverRun,
    )
    from langchain_core.documents import Document as LCDocument
    from langchain_core.embeddings import Embeddings
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import convert_to_messages
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables.config import run_in_executor
    from langchain_core.vectorstores import InMemoryVectorStore, VectorStore, VectorStoreRetriever
    from pydantic import ConfigDict, Field
except (
    ImportError
) as _missing:  # pragma: no cover - exercised in a subprocess without the framework
    raise MissingExtraError(
        "corrective_rag.integrations.langchain needs langchain-core: "
        "pip install 'corrective_rag[langchain]'"
    ) from _missing

from corrective_rag.errors import ConfigError
from corrective_rag.evaluate.profile import JudgeProfile
from corrective_rag.integrations.bridge import (
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
    where_matches,
    with_limits,
)
from corrective_rag.integrations.chat import FrameworkChatModel
from corrective_rag.integrations.judged import judged_loop
from corrective_rag.llm.reply import read_logprobs
from corrective_rag.protocols import ChatModel, Embedder, Retriever
from corrective_rag.store.checks import check_search
from corrective_rag.types import ChatReply, Document, Hit, RunResult

__all__ = [
    "CorrectiveRetriever",
    "LangChainChatModel",
    "LangChainEmbeddings",
    "LangChainRetriever",
]

Filter = Callable[[Mapping[str, Any]], Any]


# -- the loop as a LangChain retriever -----------------------------------------------------


class CorrectiveRetriever(BaseRetriever):
    """The corrective loop as a LangChain retriever: ``invoke(question)`` runs it.

    Returns the kept documents, best first, as LangChain ``Document`` s (``id`` set) whose
    metadata is the document's own plus the verdict that kept it: ``score``, ``confidence``,
    ``relevance``, ``reasoning``, ``iteration``, ``rank`` and the ``run_id``. The last run's
    :class:`~corrective_rag.types.RunResult` (history, usage, stop reason) is ``last_result``.

    ``k`` caps what is returned (LangChain's name for it): the ``k`` best kept documents; the
    run itself is not shortened, so ``last_result`` holds all it kept. ``top_k`` is not a cap:
    it is how many hits the loop judges per iteration. Each of the fields but
    ``orchestrator`` can also be given per call, ``invoke(question, k=1)``; an unknown
    keyword, in the constructor or in ``invoke``, raises rather than being ignored.

    Attributes:
        orchestrator: a :class:`~corrective_rag.loop.orchestrator.CorrectiveRAGOrchestrator`.
        k: the most documents returned (``None``: all kept).
        where, top_k, max_iterations: passed to each ``run`` (``None``: the orchestrator's).
    """

    model_config: ClassVar[ConfigDict] = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    orchestrator: Any
    k: int | None = Field(default=None, ge=1, strict=True)
    where: dict[str, Any] | None = None
    top_k: int | None = None
    max_iterations: int | None = None
    last_result: RunResult | None = None

    @classmethod
    def from_profile(
        cls,
        profile: JudgeProfile,
        retriever: Retriever,
        chat: ChatModel | None = None,
        *,
        loop: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> CorrectiveRetriever:
        """The retriever over a loop that judges with ``profile`` (what ``judge-check`` chose).

        ``retriever`` and ``chat`` are the loop's (e.g. ``LangChainRetriever(store)`` and
        ``LangChainChatModel(model)``); ``loop`` holds the orchestrator's other keywords
        (:func:`~corrective_rag.integrations.judged.judged_loop`), ``fields`` this retriever's
        (``k``, ``top_k``, ...). A profile measured for another model, prompt or call shape is
        refused (:class:`~corrective_rag.errors.ConfigError`).
        """
        return cls(orchestrator=judged_loop(profile, retriever, chat, **dict(loop or {})), **fields)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[LCDocument]:
        k = self.k
        options: dict[str, Any] = {
            "where": self.where,
            "top_k": self.top_k,
            "max_iterations": self.max_iterations,
        }
        for name, value in kwargs.items():
            if name == "k":
                k = k if value is None else check_cap(value)
            elif name in options:
                if value is not None:  # per call, None keeps the retriever's own
                    options[name] = value
            elif name != "verbose":  # LangChain's own, read by invoke and passed on
                raise ConfigError(
                    f"CorrectiveRetriever.invoke got an unknown keyword {name!r} "
                    f"(it takes k, {', '.join(options)})"
                )
        result = self.orchestrator.run(query, **options)
        self.last_result = result
        return [
            LCDocument(
                page_content=kept.document.text,
                metadata=verdict_metadata(kept, result.run_id),
                id=kept.document.id,
            )
            for kept in result.kept[:k]
        ]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[LCDocument]:
        # LangChain's default drops invoke's keywords (k): run the sync path in its executor.
        return await run_in_executor(
            None,
            self._get_relevant_documents,
            query,
            run_manager=run_manager.get_sync(),
            **kwargs,
        )


# -- a LangChain index as the loop's retriever ---------------------------------------------


class LangChainRetriever:
    """A LangChain ``VectorStore`` or ``BaseRetriever`` as our ``Retriever``.

    What the loop needs of a retriever, and what each kind of source gives:

    - more candidates as the loop pages past judged documents: a ``VectorStore`` (or a
      ``VectorStoreRetriever``) is asked for ``k=top_k``; any other retriever with a ``k``
      field is copied with ``k=top_k`` for the call; a retriever without one returns what it
      returns (cut to ``top_k``), so a loop that has judged all of it stops with
      ``no_progress``.
    - ``where`` filters: an ``InMemoryVectorStore`` gets a predicate that reads ``where`` as
      the store does (:func:`~corrective_rag.integrations.bridge.where_matches`); another vector
      store gets ``filter=where`` as given (the chroma-style dict that Chroma, PGVector and
      others read), or ``where_filter(where)`` to translate it; a retriever that is not a vector
      store's raises :class:`~corrective_rag.errors.ConfigError`.

    Documents keep their LangChain ``id``, else ``metadata[id_key]``, else a digest of their
    text; their metadata keeps its str/int/float/bool entries. Scores are the store's
    (``similarity_search_with_score``), else ``1 / rank``.

    Args:
        source: a ``VectorStore`` or a ``BaseRetriever``.
        where_filter: turns a ``where`` mapping into the store's ``filter`` argument.
        id_key: metadata key holding a document's id when LangChain's ``id`` is unset.

    Raises:
        ConfigError: ``source`` is neither.
        StoreError: (from ``retrieve``) the store or retriever failed; the cause is chained.
    """

    def __init__(
        self, source: Any, *, where_filter: Filter | None = None, id_key: str = "id"
    ) -> None:
        if not isinstance(source, VectorStore | BaseRetriever):
            raise ConfigError(
                f"source must be a LangChain VectorStore or BaseRetriever, got {source!r}"
            )
        check_retriever_options(where_filter, id_key)
        self.source = source
        self.where_filter = where_filter
        self.id_key = id_key

    def __repr__(self) -> str:
        return f"LangChainRetriever({type(self.source).__name__})"

    def retrieve(
        self, query: str, *, top_k: int = 10, where: Mapping[str, Any] | None = None
    ) -> list[Hit]:
        """Return at most ``top_k`` hits for ``query``, ranked 1..n (see the class docstring)."""
        check_search(query, top_k, where)
        source = self.source
        if isinstance(source, VectorStoreRetriever):
            if source.search_type == "similarity":
                kwargs = {**source.search_kwargs, **self._filter(source.vectorstore, where)}
                return self._scored(source.vectorstore, query, top_k, kwargs)
            kwargs = {**self._filter(source.vectorstore, where), "k": top_k}
            return self._listed(lambda: source.invoke(query, **kwargs), top_k)
        if isinstance(source, VectorStore):
            return self._scored(source, query, top_k, self._filter(source, where))
        if where is not None:
            raise ConfigError(
                f"{type(source).__name__} takes no metadata filter: pass its VectorStore "
                "(or a VectorStoreRetriever) to filter with where"
            )
        sized = with_limits(source, {"k": top_k})
        return self._listed(lambda: sized.invoke(query), top_k)

    def _filter(self, store: VectorStore, where: Mapping[str, Any] | None) -> dict[str, Any]:
        if where is None:
            return {}
        if self.where_filter is not None:
            return {"filter": self.where_filter(where)}
        if isinstance(store, InMemoryVectorStore):
            where_matches(where, {})  # an invalid filter fails here, not per document
            return {"filter": lambda doc: where_matches(where, doc.metadata or {})}
        search = store.similarity_search_with_score
        parameters = inspect.signature(search).parameters
        takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
        if "filter" not in parameters and not takes_any:
            raise ConfigError(f"{type(store).__name__} takes no filter argument: cannot use where")
        return {"filter": dict(where)}

    def _scored(
        self, store: VectorStore, query: str, top_k: int, kwargs: Mapping[str, Any]
    ) -> list[Hit]:
        kwargs = {k: v for k, v in kwargs.items() if k != "k"}
        with search_failures(store):
            try:
                pairs = store.similarity_search_with_score(query, k=top_k, **kwargs)
            except NotImplementedError:  # a store that only lists documents
                pairs = None
        if pairs is None:
            return self._listed(lambda: store.similarity_search(query, k=top_k, **kwargs), top_k)
        return ranked_hits([(self._document(d), s) for d, s in pairs], top_k)

    def _listed(self, search: Callable[[], Sequence[LCDocument]], top_k: int) -> list[Hit]:
        with search_failures(self.source):
            docs = search()
        return ranked_hits([(self._document(d), None) for d in docs], top_k)

    def _document(self, doc: LCDocument) -> Document:
        return framework_document(
            self.source,
            "document",
            doc.page_content,
            explicit_id=doc.id,
            metadata=doc.metadata,
            id_key=self.id_key,
        )


# -- a LangChain chat model as the loop's chat model ---------------------------------------


class LangChainChatModel(FrameworkChatModel):
    """A LangChain ``BaseChatModel`` as a :class:`~corrective_rag.protocols.ChatModel`.

    With a ``json_schema`` the model's ``with_structured_output`` is used where it has one
    (OpenAI, Anthropic, Ollama, ... each in its own way), and the parsed object is returned as
    JSON text; where it has none, the schema travels as an instruction and our lenient parser
    reads the reply. ``temperature`` and ``max_tokens`` are set on a copy of the model for the
    call where the model has fields of those names (most providers' do); otherwise the model's
    own settings hold. Tokens are the model's ``usage_metadata`` where it reports them, else
    counted with cl100k_base; cost is not known (0). Token probabilities (``logprobs``) are
    asked on a copy of a model whose class has ``logprobs`` and ``top_logprobs`` fields
    (``ChatOpenAI`` and the models built on it), or with ``bind_logprobs`` as call keywords
    (``model.bind(logprobs=True, top_logprobs=N)``) of any other model on the unstructured
    path, and read from the reply's ``response_metadata["logprobs"]``.

    The call is the model's ``ainvoke``, awaited under the run's deadline: cancelling the run
    (Ctrl-C, ``asyncio.timeout`` around ``arun``, a ``Budget`` deadline) cancels a call in
    flight and raises at once (:mod:`corrective_rag.integrations.awaiting` says what a model
    with no async implementation of its own still spends).

    Args:
        model: the LangChain chat model, configured with the user's provider and key.
        structured: use the model's structured output for JSON replies where it has one.
        limits: set ``temperature`` / ``max_tokens`` per call (see above).
        bind_logprobs: ask a model without ``logprobs`` / ``top_logprobs`` fields for token
            probabilities as call keywords (its provider must take them: others refuse the
            call); False: such a model is not asked.

    Attributes:
        model: the model's name (``model_name`` / ``model``), used in verdict cache keys.
    """

    def __init__(
        self,
        model: Any,
        *,
        structured: bool = True,
        limits: bool = True,
        bind_logprobs: bool = False,
    ) -> None:
        if not isinstance(model, BaseChatModel):
            raise ConfigError(f"model must be a LangChain BaseChatModel, got {model!r}")
        super().__init__(model, name=model_name(model), structured=structured, limits=limits)
        self.chat = model
        self.bind_logprobs: bool = bool(bind_logprobs)

    def __repr__(self) -> str:
        return f"LangChainChatModel({type(self.chat).__name__}, model={self.model!r})"

    def _ask(
        self,
        messages: list[dict[str, str]],
        json_schema: Mapping[str, Any] | None,
        limits: Mapping[str, Any],
        asked: Mapping[str, Any],
    ) -> Callable[[], Awaitable[tuple[Any, str, list[dict[str, str]]]]]:
        fields = declares(self.chat, tuple(asked))
        model = with_limits(self.chat, {**limits, **(asked if fields else {})})
        bound = asked if asked and not fields and self.bind_logprobs else {}

        async def call() -> tuple[Any, str, list[dict[str, str]]]:
            sent = messages
            if json_schema is not None and self.structured:
                reply = await _structured(model, sent, json_schema)
                if reply is not None:
                    return (*reply, sent)
            if json_schema is not None:
                sent = [*sent, {"role": "system", "content": schema_rule(json_schema)}]
            runnable = model.bind(**bound) if bound else model
            message = await runnable.ainvoke(convert_to_messages(sent))
            return message, _text(message), sent

        return call

    def _reply(self, answer: tuple[Any, str, list[dict[str, str]]], seconds: float) -> ChatReply:
        message, text, sent = answer
        return _chat_reply(message, text, sent, seconds, self.model)


async def _structured(
    model: BaseChatModel, msgs: list[dict[str, str]], schema: Mapping[str, Any]
) -> tuple[Any, str] | None:
    """The model's structured reply as (message, JSON text); None: it has no structured output."""
    try:
        runnable = model.with_structured_output(dict(schema), include_raw=True)
    except NotImplementedError:
        return None
    out = await runnable.ainvoke(convert_to_messages(msgs))
    raw = out.get("raw") if isinstance(out, Mapping) else None
    parsed = out.get("parsed") if isinstance(out, Mapping) else None
    if isinstance(parsed, Mapping):
        written = _text(raw)
        with contextlib.suppress(ValueError, RecursionError):
            if json.loads(written) == parsed:  # the model's own text: its tokens spell it
                return raw, written
        return raw, json.dumps(parsed, ensure_ascii=False)
    calls = getattr(raw, "tool_calls", None) or []
    if calls and isinstance(calls[0].get("args"), Mapping):
        return raw, json.dumps(calls[0]["args"], ensure_ascii=False)
    return raw, _text(raw)  # unparsed: the lenient parser reads whatever came


def _text(message: object) -> str:
    """A message's text: its string content, or the text blocks of a list content, joined."""
    content = getattr(message, "content", "")
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "".join(
        p if isinstance(p, str) else str(p.get("text", ""))
        for p in parts
        if isinstance(p, str) or (isinstance(p, Mapping) and p.get("type") == "text")
    )


def _chat_reply(
    message: object, text: str, msgs: list[dict[str, str]], seconds: float, name: str
) -> ChatReply:
    usage = getattr(message, "usage_metadata", None) or {}
    meta = getattr(message, "response_metadata", None) or {}
    finish = meta.get("finish_reason") or meta.get("stop_reason")
    return ChatReply(
        text=text,
        model=str(meta.get("model_name") or meta.get("model") or name),
        usage=reply_usage(
            usage.get("input_tokens"), usage.get("output_tokens"), seconds, msgs, text
        ),
        finish_reason=str(finish) if finish is not None else None,
        logprobs=read_logprobs(meta.get("logprobs"), text),
    )


# -- our embedder as LangChain embeddings --------------------------------------------------


class LangChainEmbeddings(Embeddings):
    """Our :class:`~corrective_rag.protocols.Embedder` as LangChain ``Embeddings``.

    Args:
        embedder: e.g. :class:`~corrective_rag.models.embeddings.SentenceTransformerEmbedder`.
    """

    def __init__(self, embedder: Embedder) -> None:
        check_embedder(embedder)
        self.embedder = embedder

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """One unit vector per text."""
        return embedding_lists(self.embedder, texts)

    def embed_query(self, text: str) -> list[float]:
        """The query's unit vector."""
        return self.embed_documents([text])[0]
