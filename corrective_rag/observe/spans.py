"""OpenTelemetry spans for runs, iterations, searches and LLM calls.

The package traces through ``opentelemetry-api`` only, which does nothing until the application
installs an SDK (``opentelemetry-sdk``) with an exporter: a library that traces is silent until
asked, as it is with logging. Four spans, each the child of the one enclosing it, named so
that a trace reads as the loop (``iteration 2`` > ``retrieval rewrite``, ``grade: chat m``):

* ``corrective_rag.run``: one :meth:`~corrective_rag.CorrectiveRAGOrchestrator.run` (or
  ``arun``, whose worker thread carries the caller's context), with the stop reason, the kept
  ids and the run's usage;
* ``iteration {n}``: iteration ``n`` (from 1), with its CRAG action and kept ids;
* ``retrieval {lane}``: one :meth:`~corrective_rag.HybridStore.retrieve` (or one query of a
  ``retrieve_many``, whose queries are searched together: their spans last the whole search),
  attributed as OpenTelemetry's GenAI retrieval span (``gen_ai.operation.name``
  ``retrieval``), named with the query's lane (``question``, ``rewrite``, ``feedback``) when the
  loop searched, or the leg (``bm25``, ``dense``) of a one-leg search; plain ``retrieval``
  otherwise;
* ``{stage}: chat {model}``: one :meth:`~corrective_rag.OpenAIChatClient.complete`, a CLIENT
  span with the GenAI semantic conventions' attributes (``gen_ai.operation.name``,
  ``gen_ai.provider.name``, ``gen_ai.request.model``, ``gen_ai.response.id``,
  ``gen_ai.usage.input_tokens``, ...), named with the loop's stage that made the call
  (:data:`STAGES`: ``grade``, ``rewrite``, ``refine``, ``answer``, ``check``; set with
  :func:`stage`), or ``chat {model}`` for a call made outside a run.

Each span also carries OpenInference's attributes (``openinference.span.kind`` ``CHAIN`` for
the run and its iterations, ``RETRIEVER`` for a search with its documents' ids and scores,
``LLM`` for a call with its tokens; ``input.value`` / ``output.value``), which Arize Phoenix and
Langfuse render.

Contents (the question, queries, prompts, replies, documents' ids aside) are recorded only after
:func:`capture_content` ``(True)``, as the GenAI conventions advise: they may hold what users
would not send to a tracing backend. Exception messages can quote a server's reply, so a failed
span carries the exception's type (``error.type``) and its message only with contents on.

Every attribute is bounded, contents or not (:mod:`corrective_rag.observe.bounds`), so that
an exporter never refuses a batch for one long question. docs/tracing.md has the attribute
table.

One concept, kept whole though long: each kind of span with its attributes in both conventions,
read from the outcome of the call it wraps.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar, cast
from urllib.parse import urlsplit

from corrective_rag._version import __version__
from corrective_rag.errors import ConfigError
from corrective_rag.observe.bounds import (
    MAX_ATTRIBUTE_ITEMS,
    MAX_NUMBERED_ITEMS,
    bounded_attributes,
    cut_attribute,
    fitted_json,
    json_value,
    shared_texts,
    shown_ids,
)
from corrective_rag.observe.logs import get_logger

# MAX_ATTRIBUTE_*, STAGES, capture_content, content_captured: their home is corrective_rag.observe
__all__ = [
    "lane",
    "stage",
    "traced_chat",
    "traced_iteration",
    "traced_retrieval",
    "traced_retrievals",
    "traced_run",
]

F = TypeVar("F", bound=Callable[..., Any])

log: Any = get_logger(__name__)

TRACER_NAME = "corrective_rag"
NS = "corrective_rag."  # our attributes' namespace, as the conventions ask of custom ones

# OpenInference (Arize Phoenix, Langfuse): what kind of step a span is, and its input/output.
KIND = "openinference.span.kind"
TEXT = "text/plain"
JSON = "application/json"


class _Options:
    """The process-wide opt-in to contents (set by :func:`capture_content`)."""

    contents = False


_OPT = _Options()
_lane: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "corrective_rag_lane", default=None
)
# The loop's stages that call a model, as LLM spans are named: judging documents, writing the
# next query (the rewriter's own call: in one-call mode the grading call proposes it), judging
# the kept documents' strips (refinement), writing the answer, and checking that the documents
# support it (the generator's support check).
STAGES = ("grade", "rewrite", "refine", "answer", "check")
_stage: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "corrective_rag_stage", default=None
)


def capture_content(enabled: bool) -> None:
    """Record contents on spans from now on (``True``) or stop (``False``, the default).

    Contents: the question and the queries searched, the messages sent to an LLM and its
    reply, and exception messages. Process-wide, like the ``OTEL_INSTRUMENTATION_GENAI_
    CAPTURE_MESSAGE_CONTENT`` switch of OpenTelemetry's own instrumentations (the package reads
    no environment variables: the application decides).
    """
    if not isinstance(enabled, bool):
        raise ConfigError(f"capture_content takes True or False, got {enabled!r}")
    _OPT.contents = enabled


def content_captured() -> bool:
    """True when :func:`capture_content` turned contents on."""
    return _OPT.contents


@contextlib.contextmanager
def lane(name: str) -> Iterator[None]:
    """Searches inside this block belong to the query lane ``name`` (set by the loop)."""
    token = _lane.set(name)
    try:
        yield
    finally:
        _lane.reset(token)


@contextlib.contextmanager
def stage(name: str) -> Iterator[None]:
    """LLM calls inside this block belong to the loop's stage ``name``, one of :data:`STAGES`.

    Set by the loop around each stage; it names the calls' spans (``grade: chat m``) and sets
    their ``corrective_rag.stage``. Worker threads that copy the context (the evaluator's
    parallel grading) carry it.
    """
    if name not in STAGES:
        raise ConfigError(f"stage must be one of {', '.join(STAGES)}, got {name!r}")
    token = _stage.set(name)
    try:
        yield
    finally:
        _stage.reset(token)


def _tracing() -> bool:
    """False until the application sets a tracer provider: then a span is not worth making.

    (``ProxyTracer`` would hand out non-recording spans, at some 10 µs each; spans started
    after an SDK is set are recorded as usual.)
    """
    try:
        from opentelemetry import trace
    except ImportError:  # pragma: no cover - opentelemetry-api is a dependency
        return False
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


@functools.cache
def _tracer() -> Any:
    try:
        from opentelemetry import trace
    except ImportError:  # pragma: no cover - opentelemetry-api is a dependency
        return None
    return trace.get_tracer(TRACER_NAME, __version__)


@contextlib.contextmanager
def _span(
    name: str, attributes: Mapping[str, Any], *, client: bool = False, current: bool = True
) -> Iterator[Any]:
    """A span that records a failure as its type (its message only with contents on).

    ``current``: the span is the current one inside the block (the parent of spans started
    there); else it is only timed by the block (one of several siblings open at once).
    """
    tracer = _tracer()
    if tracer is None:  # pragma: no cover - opentelemetry-api is a dependency
        yield None
        return
    from opentelemetry.trace import SpanKind, Status, StatusCode

    kind = SpanKind.CLIENT if client else SpanKind.INTERNAL
    if current:
        opened = tracer.start_as_current_span(
            name,
            kind=kind,
            attributes=bounded_attributes(attributes),
            record_exception=False,
            set_status_on_exception=False,
        )
    else:
        opened = _ended(
            tracer.start_span(name, kind=kind, attributes=bounded_attributes(attributes))
        )
    with opened as span:
        try:
            yield span
        except BaseException as exc:
            if span.is_recording():
                kind_name = f"{type(exc).__module__}.{type(exc).__qualname__}"
                span.set_attribute("error.type", kind_name)
                message = cut_attribute(str(exc)) if _OPT.contents else kind_name
                span.set_status(Status(StatusCode.ERROR, message))
                if _OPT.contents:
                    # the SDK's own event would carry the message and stack whole
                    stack = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
                    span.record_exception(
                        exc,
                        attributes={
                            "exception.message": message,
                            "exception.stacktrace": cut_attribute(stack),
                        },
                    )
            raise


@contextlib.contextmanager
def _ended(span: Any) -> Iterator[Any]:
    """``span`` for the block, ended with it, without making it the current span."""
    try:
        yield span
    finally:
        span.end()


def _record(span: Any, attributes: Callable[..., Mapping[str, Any]], *outcome: Any) -> None:
    """Set the attributes read from an outcome, if the span records.

    An outcome of an unexpected shape (a user's own retriever returning something else) costs
    its attributes, never the call: tracing must never break what it traces.
    """
    if span is None or not span.is_recording():
        return
    try:
        found = attributes(*outcome)
    except Exception as exc:
        log.debug("trace_attributes_skipped", span=getattr(span, "name", ""), error=repr(exc))
        return
    span.set_attributes(bounded_attributes(found))


# -- the run and its iterations ------------------------------------------------------------


def traced_run(fn: F) -> F:
    """Decorate ``CorrectiveRAGOrchestrator.run``: one span per run, its outcome at the end."""

    @functools.wraps(fn)
    def run(self: Any, question: Any, *args: Any, **kwargs: Any) -> Any:
        if not _tracing():
            return fn(self, question, *args, **kwargs)
        policy = getattr(getattr(self, "policy", None), "name", None)
        start = {"gen_ai.operation.name": "invoke_workflow", KIND: "CHAIN", NS + "policy": policy}
        if _OPT.contents and isinstance(question, str):
            start[NS + "question"] = question
            start.update({"input.value": question, "input.mime_type": TEXT})
        with _span("corrective_rag.run", start) as span:
            result = fn(self, question, *args, **kwargs)
            _record(span, _run_attributes, result)
            return result

    return cast(F, run)


def _run_attributes(result: Any) -> dict[str, Any]:
    total = result.usage.total
    return {
        NS + "run_id": result.run_id,
        NS + "stop_reason": result.stop_reason.value,
        # the detail can quote a model's query ("rewrite rejected: ..."): a content
        NS + "stop_detail": result.stop_detail if _OPT.contents else None,
        NS + "iterations": len(result.history),
        NS + "kept_ids": list(result.kept_ids),
        NS + "llm_calls": total.llm_calls,
        NS + "cost_usd": total.cost_usd,
        "gen_ai.usage.input_tokens": total.prompt_tokens,
        "gen_ai.usage.output_tokens": total.completion_tokens,
        NS + "final_query": result.final_query if _OPT.contents else None,
        "output.value": json_value(
            {"stop_reason": result.stop_reason.value, "kept_ids": shown_ids(result.kept_ids)},
            {
                "final_query": result.final_query if _OPT.contents else None,
                "answer": result.answer.text if _OPT.contents and result.answer else None,
            },
        ),
        "output.mime_type": JSON,
    }


def traced_iteration(fn: F) -> F:
    """Decorate the loop's iteration function, ``iterate(parts, st, index, query, ...)``."""

    @functools.wraps(fn)
    def iterate(parts: Any, st: Any, index: int, query: str, *args: Any, **kwargs: Any) -> Any:
        if not _tracing():
            return fn(parts, st, index, query, *args, **kwargs)
        start: dict[str, Any] = {
            "gen_ai.operation.name": "iteration",  # no predefined name fits a loop's step
            KIND: "CHAIN",
            NS + "iteration": index,
        }
        if _OPT.contents:
            start.update({NS + "query": query, "input.value": query, "input.mime_type": TEXT})
        with _span(f"iteration {index}", start) as span:
            outcome = fn(parts, st, index, query, *args, **kwargs)
            _record(span, _iteration_attributes, *outcome)
            return outcome

    return cast(F, iterate)


def _iteration_attributes(record: Any, ended: Any) -> dict[str, Any]:
    rewrite = record.rewrite
    return {
        NS + "action": record.action.value if record.action is not None else None,
        NS + "fallback": record.fallback.value if record.fallback is not None else None,
        NS + "retrieved": len(record.retrieved),
        NS + "judged": len(record.verdicts),
        NS + "kept_ids": list(record.kept_ids),
        NS + "dropped_ids": list(record.dropped_ids),
        NS + "ungraded_ids": list(record.ungraded_ids),
        NS + "rewrite_source": rewrite.source.value if rewrite is not None else None,
        NS + "rewrite": rewrite.query if rewrite is not None and _OPT.contents else None,
        NS + "stop_reason": ended[0].value if ended is not None else None,
        "gen_ai.usage.input_tokens": record.usage.total.prompt_tokens,
        "gen_ai.usage.output_tokens": record.usage.total.completion_tokens,
        "output.value": json_value(
            {
                "action": record.action.value if record.action is not None else None,
                "kept_ids": shown_ids(record.kept_ids),
                "dropped_ids": shown_ids(record.dropped_ids),
                "stop_reason": ended[0].value if ended is not None else None,
            },
            {"next_query": rewrite.query if rewrite is not None and _OPT.contents else None},
        ),
        "output.mime_type": JSON,
    }


# -- searches ------------------------------------------------------------------------------


def traced_retrieval(fn: F) -> F:
    """Decorate ``HybridStore.retrieve`` and ``.search(query, *, top_k, where[, leg])``.

    The GenAI conventions' retrieval span, with the loop's query lane when the loop searched.
    """

    @functools.wraps(fn)
    def retrieve(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        if not _tracing():
            return fn(self, query, *args, **kwargs)
        start = _retrieval_start(self, query, _lane.get(), kwargs)
        with _span(_retrieval_name(start), start) as span:
            hits = fn(self, query, *args, **kwargs)
            _record(span, _hit_attributes, hits)
            return hits

    return cast(F, retrieve)


@contextlib.contextmanager
def traced_retrievals(
    source: Any, queries: Sequence[Any], lanes: Sequence[str], **kwargs: Any
) -> Iterator[Callable[[list[Any]], list[Any]]]:
    """One retrieval span per query of a search of several (``HybridStore.retrieve_many``).

    The span :func:`traced_retrieval` makes for a search of one, with the query's lane
    (``lanes[i]``; the enclosing :func:`lane` for a query beyond them). The queries are searched
    together, so the spans are siblings under the current span, each lasting the whole search;
    a failure marks them all. The block hands each query's hits, in order, to the ``record``
    it is given, which returns them.
    """
    if not _tracing():
        yield lambda found: found
        return
    outer = _lane.get()
    with contextlib.ExitStack() as stack:
        starts = [
            _retrieval_start(source, query, name, kwargs)
            for query, name in zip(queries, [*lanes, *[outer] * len(queries)], strict=False)
        ]
        spans = [
            stack.enter_context(_span(_retrieval_name(start), start, current=False))
            for start in starts
        ]

        def record(found: list[Any]) -> list[Any]:
            for span, hits in zip(spans, found, strict=False):
                _record(span, _hit_attributes, hits)
            return found

        yield record


def _retrieval_start(
    source: Any, query: Any, lane_name: str | None, kwargs: Mapping[str, Any]
) -> dict[str, Any]:
    """A retrieval span's attributes at its start: the search's settings and lane."""
    text = query if _OPT.contents and isinstance(query, str) else None
    start = {
        "gen_ai.operation.name": "retrieval",
        KIND: "RETRIEVER",
        "gen_ai.data_source.id": getattr(source, "data_source_id", None),
        # not gen_ai.request.top_k: that is the sampling parameter of a chat call
        "gen_ai.retrieval.top_k": kwargs.get("top_k"),
        NS + "lane": lane_name,
        NS + "leg": kwargs.get("leg"),  # HybridStore.search: one leg, unfused
        NS + "filtered": kwargs.get("where") is not None,
        "gen_ai.retrieval.query.text": text,
        "input.value": text,
        "input.mime_type": TEXT if text is not None else None,
    }
    return {k: v for k, v in start.items() if v is not None}


def _retrieval_name(start: Mapping[str, Any]) -> str:
    """``retrieval``, then the query's lane or the search's one leg: ``retrieval rewrite``."""
    part = start.get(NS + "lane") or start.get(NS + "leg")
    return f"retrieval {part}" if part else "retrieval"


def _hit_attributes(hits: Any) -> dict[str, Any]:
    """The hits as GenAI documents and as OpenInference's numbered ``retrieval.documents``.

    The GenAI conventions' ``gen_ai.retrieval.documents`` is JSON of ids and scores; Phoenix's
    retriever panel reads ``retrieval.documents.{i}.document.id/score`` (and ``.content``, set
    with contents on).
    """
    ids = [h.document.id for h in hits]
    shown = [(cut_attribute(str(h.document.id), 256), float(h.score)) for h in hits]
    shown = shown[:MAX_NUMBERED_ITEMS]
    out: dict[str, Any] = {
        NS + "hits": len(ids),
        NS + "hit_ids": ids,
        "gen_ai.retrieval.documents": json.dumps(
            [{"id": i, "score": score} for i, score in shown], ensure_ascii=False
        ),
    }
    for n, (doc_id, score) in enumerate(shown):
        out[f"retrieval.documents.{n}.document.id"] = doc_id
        out[f"retrieval.documents.{n}.document.score"] = score
    if _OPT.contents:
        texts = shared_texts([str(h.document.text) for h in hits[: len(shown)]])
        for n, text in enumerate(texts):
            out[f"retrieval.documents.{n}.document.content"] = text
    return out


# -- LLM calls -----------------------------------------------------------------------------

PROVIDER = "openai"  # the API the client speaks; gen_ai.request.model names what answered


def traced_chat(fn: F) -> F:
    """Decorate ``OpenAIChatClient.complete(messages, *, json_schema, max_tokens, temperature)``.

    One span per call, retries and format step-downs included (the conventions' logical call).
    """

    @functools.wraps(fn)
    def complete(self: Any, messages: Any, *args: Any, **kwargs: Any) -> Any:
        if not _tracing():
            return fn(self, messages, *args, **kwargs)
        model = str(getattr(self, "model", "") or "")
        start = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": PROVIDER,
            "gen_ai.request.model": model or None,
            "gen_ai.request.max_tokens": kwargs.get("max_tokens"),
            "gen_ai.request.temperature": kwargs.get("temperature", 0.0),
            "gen_ai.output.type": "json" if kwargs.get("json_schema") is not None else "text",
            **_server(getattr(self, "url", None) or getattr(self, "base_url", None)),
            KIND: "LLM",
            "llm.system": PROVIDER,
            "llm.provider": PROVIDER,
            "llm.model_name": model or None,
            "llm.invocation_parameters": json.dumps(
                {
                    "max_tokens": kwargs.get("max_tokens"),
                    "temperature": kwargs.get("temperature", 0.0),
                },
                default=str,  # a caller's odd value costs its exactness, never the call
            ),
        }
        step = _stage.get()
        if step is not None:
            start[NS + "stage"] = step
        if _OPT.contents:
            start.update(_input_contents(messages))
        name = f"chat {model}" if model else "chat"
        if step is not None:
            name = f"{step}: {name}"
        attributes = {k: v for k, v in start.items() if v is not None}
        with _span(name, attributes, client=True) as span:
            reply = fn(self, messages, *args, **kwargs)
            _record(span, _reply_attributes, reply)
            return reply

    return cast(F, complete)


def _server(url: Any) -> dict[str, Any]:
    """``server.address`` and ``server.port`` of the endpoint; never its user or password."""
    if not isinstance(url, str):
        return {}
    try:
        parts = urlsplit(url)
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    except ValueError:
        return {}
    return {"server.address": parts.hostname, "server.port": port}


def _input_contents(messages: Any) -> dict[str, Any]:
    """A call's messages, as the GenAI conventions' JSON and as OpenInference's attributes."""
    if not isinstance(messages, Sequence):
        return {}
    sent = [m for m in messages if isinstance(m, Mapping)][:MAX_NUMBERED_ITEMS]
    roles = [str(m.get("role")) for m in sent]
    out: dict[str, Any] = {
        "gen_ai.input.messages": _input_messages(sent),
        "input.value": fitted_json(
            [str(m.get("content")) for m in sent],
            lambda ts: [{"role": r, "content": t} for r, t in zip(roles, ts, strict=True)],
        ),
        "input.mime_type": JSON,
    }
    texts = shared_texts([str(m.get("content")) for m in sent])
    for n, (role, text) in enumerate(zip(roles, texts, strict=True)):
        out[f"llm.input_messages.{n}.message.role"] = role
        out[f"llm.input_messages.{n}.message.content"] = text
    return out


def _input_messages(messages: Any) -> str | None:
    """The conventions' ``gen_ai.input.messages``, as JSON text (span attributes are flat)."""
    if not isinstance(messages, Sequence):
        return None
    sent = [m for m in messages if isinstance(m, Mapping)][:MAX_ATTRIBUTE_ITEMS]

    def shaped(contents: list[str]) -> list[dict[str, Any]]:
        return [
            {"role": m.get("role"), "parts": [{"type": "text", "content": c}]}
            for m, c in zip(sent, contents, strict=True)
        ]

    return fitted_json([str(m.get("content")) for m in sent], shaped)


def _reply_attributes(reply: Any) -> dict[str, Any]:
    usage = reply.usage
    finish = reply.finish_reason
    out: dict[str, Any] = {
        "gen_ai.response.model": reply.model or None,
        "gen_ai.response.id": getattr(reply, "response_id", "") or None,
        "gen_ai.usage.input_tokens": usage.prompt_tokens,
        "gen_ai.usage.output_tokens": usage.completion_tokens,
        "gen_ai.response.finish_reasons": [finish] if finish else None,
        "llm.model_name": reply.model or None,
        "llm.token_count.prompt": usage.prompt_tokens,
        "llm.token_count.completion": usage.completion_tokens,
        "llm.token_count.total": usage.prompt_tokens + usage.completion_tokens,
    }
    if _OPT.contents:

        def shaped(texts: list[str]) -> list[dict[str, Any]]:
            parts = [{"type": "text", "content": texts[0]}]
            return [{"role": "assistant", "parts": parts, "finish_reason": finish or ""}]

        out["gen_ai.output.messages"] = fitted_json([reply.text], shaped)
        out.update(
            {
                "output.value": reply.text,
                "output.mime_type": TEXT,
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": reply.text,
            }
        )
    return out
