"""What the framework adapters share, with no framework imported: pure conversions.

Filters: the store's chroma-style ``where`` evaluated in Python (:func:`where_matches`) for
framework stores that filter with a predicate. Documents: a framework's loose metadata made
flat (:func:`flat_metadata`), an id found for every document (:func:`document_id`), both made
one :class:`~corrective_rag.types.Document` (:func:`framework_document`), and a framework's
search failure as a :class:`~corrective_rag.errors.StoreError` (:func:`search_failures`). Hits:
ranks and scores for a framework's list (:func:`ranked_hits`). Constructors: the retriever
adapters' options (:func:`check_retriever_options`) and the embedder the embedding adapters
wrap (:func:`check_embedder`, :func:`embedding_lists`). Verdicts: what a kept document
carries back into the framework (:func:`verdict_metadata`). Chat: the call's limits on a copy of
the user's model (:func:`with_limits`), the schema as an instruction (:func:`schema_rule`),
usage (:func:`reply_usage`) and provider errors as ours, keys masked (:func:`call_failed`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import numbers
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from corrective_rag.calls import scope
from corrective_rag.errors import (
    ConfigError,
    CorrectiveRAGError,
    InputError,
    LLMError,
    LLMTimeoutError,
    StoreError,
)
from corrective_rag.llm.reply import reported_tokens
from corrective_rag.protocols import Embedder
from corrective_rag.store.checks import FILTER_SCALARS, filter_scalar
from corrective_rag.text.secrets import redact
from corrective_rag.types import Document, Hit, KeptDocument, Usage

__all__ = [
    "VERDICT_KEYS",
    "call_failed",
    "check_call_allowed",
    "check_cap",
    "check_embedder",
    "check_retriever_options",
    "declares",
    "document_id",
    "embedding_lists",
    "flat_metadata",
    "framework_document",
    "model_name",
    "ranked_hits",
    "reply_usage",
    "schema_rule",
    "search_failures",
    "secrets_of_model",
    "verdict_metadata",
    "where_matches",
    "with_limits",
]

# what verdict_metadata adds to a kept document's own metadata
VERDICT_KEYS = (
    "id",
    "score",
    "confidence",
    "relevance",
    "reasoning",
    "iteration",
    "rank",
    "run_id",
)
_RANGES = ("$gt", "$gte", "$lt", "$lte")
_counter_lock = threading.Lock()
_counters: list[Any] = []  # the one cl100k counter, made on first need


# -- filters -------------------------------------------------------------------------------


def where_matches(where: Mapping[str, Any], metadata: Mapping[str, Any]) -> bool:
    """Whether ``metadata`` passes the chroma-style filter ``where`` (as the stores read it).

    ``{"lang": "en"}``, ``{"year": {"$gte": 2020}}`` ($eq $ne $gt $gte $lt $lte $in $nin) and
    ``{"$and": [...]}`` / ``{"$or": [...]}``; several keys must all hold. As in chroma, ``$ne``
    and ``$nin`` are the negations of ``$eq`` and ``$in`` (a document without the field matches
    them), numbers compare by value (``2021 == 2021.0``), a bool is not a number, and ranges
    compare numbers only. The contract is :mod:`corrective_rag.store.backend`'s.

    Raises:
        InputError: an unknown operator, an empty ``$and``/``$or`` or ``$in`` list, or an
            operand that is not a str, int, float or bool.
    """
    if not isinstance(where, Mapping) or not where:
        raise InputError(f"invalid metadata filter {where!r}: expected a non-empty mapping")
    return all(_clause(key, value, metadata, where) for key, value in where.items())


def _clause(key: str, value: Any, metadata: Mapping[str, Any], where: Mapping[str, Any]) -> bool:
    if key in ("$and", "$or"):
        if not isinstance(value, Sequence) or isinstance(value, str) or not value:
            raise InputError(f"invalid metadata filter {where!r}: {key} needs a non-empty list")
        results = [where_matches(part, metadata) for part in value]  # checks every part
        return all(results) if key == "$and" else any(results)
    if key.startswith("$"):
        raise InputError(f"invalid metadata filter {where!r}: unknown operator {key!r}")
    if not isinstance(value, Mapping):
        expected = filter_scalar(value, where)  # checked even where the field is missing
        return key in metadata and _same(metadata[key], expected)
    if len(value) != 1:
        raise InputError(f"invalid metadata filter {where!r}: one operator per field")
    ((op, operand),) = value.items()
    present = key in metadata
    field = metadata.get(key)
    if op in ("$eq", "$ne"):
        expected = filter_scalar(operand, where)
        equal = present and _same(field, expected)
        return equal if op == "$eq" else not equal
    if op in _RANGES:
        bound = filter_scalar(operand, where)
        if not _number(bound):
            raise InputError(f"invalid metadata filter {where!r}: {op} needs a number")
        if not present or not _number(field):
            return False
        return {
            "$gt": field > bound,
            "$gte": field >= bound,
            "$lt": field < bound,
            "$lte": field <= bound,
        }[op]
    if op in ("$in", "$nin"):
        if not isinstance(operand, Sequence) or isinstance(operand, str) or not operand:
            raise InputError(f"invalid metadata filter {where!r}: {op} needs a non-empty list")
        values = [filter_scalar(v, where) for v in operand]
        inside = present and any(_same(field, v) for v in values)
        return inside if op == "$in" else not inside
    raise InputError(f"invalid metadata filter {where!r}: unknown operator {op!r}")


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _same(a: Any, b: Any) -> bool:
    """Equality that does not take True for 1 (metadata values keep their types)."""
    return isinstance(a, bool) == isinstance(b, bool) and a == b


# -- documents and hits --------------------------------------------------------------------


def flat_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """The str/int/float/bool entries of a framework document's metadata.

    A :class:`~corrective_rag.types.Document` holds only what a store can filter on; nested
    values, lists and ``None`` stay behind in the framework's own document.
    """
    return {
        k: v
        for k, v in (metadata or {}).items()
        if isinstance(k, str) and k and isinstance(v, FILTER_SCALARS)
    }


def document_id(
    explicit: object, metadata: Mapping[str, Any] | None, id_key: str, text: str
) -> str:
    """A framework document's id: its own, else ``metadata[id_key]``, else its text's digest.

    The digest (``sha1:`` and 16 hex digits) is stable, so the same text retrieved twice is
    recognised as already judged.
    """
    for candidate in (explicit, (metadata or {}).get(id_key)):
        usable = isinstance(candidate, str | int) and not isinstance(candidate, bool)
        if usable and str(candidate).strip():
            return str(candidate)
    return "sha1:" + hashlib.sha1(text.encode("utf-8", "replace")).hexdigest()[:16]


def framework_document(
    source: object,
    what: str,
    text: object,
    *,
    explicit_id: object,
    metadata: Mapping[str, Any] | None,
    id_key: str,
) -> Document:
    """A document (or node) that ``source`` returned, as ours: id, text and flat metadata.

    Raises:
        StoreError: the text is empty, or the document is unusable (a bad id or metadata);
            the message names ``source``'s type and ``what`` it returned.
    """
    name = type(source).__name__
    if not isinstance(text, str) or not text.strip():
        raise StoreError(f"{name} returned a {what} with no text")
    try:
        return Document(
            document_id(explicit_id, metadata, id_key, text), text, flat_metadata(metadata)
        )
    except InputError as exc:
        raise StoreError(f"{name} returned an unusable {what}: {exc}") from exc


@contextlib.contextmanager
def search_failures(source: object) -> Iterator[None]:
    """A framework's search failure as a StoreError naming ``source``'s type (cause chained).

    Our own errors (a bad filter, a cancelled run) pass through as they are.
    """
    try:
        yield
    except CorrectiveRAGError:
        raise
    except Exception as exc:
        raise StoreError(f"{type(source).__name__} search failed: {exc}") from exc


def check_retriever_options(where_filter: Callable[..., Any] | None, id_key: object) -> None:
    """A retriever adapter's ``where_filter`` (callable or None) and ``id_key`` (non-empty str)."""
    if where_filter is not None and not callable(where_filter):
        raise ConfigError(f"where_filter must be callable, got {where_filter!r}")
    if not isinstance(id_key, str) or not id_key:
        raise ConfigError(f"id_key must be a non-empty string, got {id_key!r}")


def check_cap(k: object, name: str = "k") -> int | None:
    """A retriever adapter's cap on the documents it returns: None (no cap) or an int >= 1.

    Raises:
        ConfigError: anything else (a bool, a float, zero or less).
    """
    if k is None:
        return None
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigError(f"{name} must be None or an int >= 1, got {k!r}")
    return k


def check_embedder(embedder: object) -> None:
    """What an embedding adapter wraps: anything with an ``embed(texts)`` method."""
    if not callable(getattr(embedder, "embed", None)):
        raise ConfigError(f"embedder must have an embed(texts) method, got {embedder!r}")


def embedding_lists(embedder: Embedder, texts: list[str]) -> list[list[float]]:
    """One unit vector per text, as the lists of floats frameworks take (none for no text)."""
    return [[float(x) for x in row] for row in embedder.embed(texts)] if texts else []


def _score(value: Any) -> float | None:
    """A framework's score as a float: any finite real number (numpy's float32 too), else None."""
    if value is None or isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def ranked_hits(items: Sequence[tuple[Document, float | None]], top_k: int) -> list[Hit]:
    """Hits ranked 1..n in the order given, at most ``top_k``, each id once (its best place).

    A framework that reports no score (or NaN, infinity, a bool) gets ``1 / rank``, so that
    scores still fall with rank; a numpy score (``float32``) is kept as the float it is.
    """
    hits: list[Hit] = []
    seen: set[str] = set()
    for document, score in items:
        if document.id in seen:
            continue
        seen.add(document.id)
        rank = len(hits) + 1
        value = _score(score)
        value = 1.0 / rank if value is None else value
        hits.append(Hit(document, value, rank))
        if len(hits) == top_k:
            break
    return hits


def verdict_metadata(kept: KeptDocument, run_id: str) -> dict[str, Any]:
    """A kept document's metadata plus the verdict that kept it, for the framework's document.

    The verdict's keys (``id``, ``score``, ``confidence``, ``relevance``, ``reasoning``,
    ``iteration``, ``rank``, ``run_id``) take the place of metadata entries of the same name.
    """
    verdict = kept.verdict
    return {
        **kept.document.metadata,
        "id": kept.document.id,
        "score": verdict.score,
        "confidence": verdict.confidence,
        "relevance": verdict.label.value if verdict.label else None,
        "reasoning": verdict.reasoning,
        "iteration": kept.iteration,
        "rank": kept.rank,
        "run_id": run_id,
    }


# -- chat ----------------------------------------------------------------------------------


def model_name(model: object) -> str:
    """The name a framework's chat model goes by (its model id where it has one)."""
    for attr in ("model_name", "model", "model_id"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(model).__name__


def with_limits(model: Any, limits: Mapping[str, Any]) -> Any:
    """A shallow copy of a pydantic framework model with those of ``limits`` it declares as fields.

    Frameworks read ``temperature`` and ``max_tokens`` from the model object at call time, and
    not every provider accepts them as call keywords; a model without such a field keeps its own
    setting. The user's object is never changed (concurrent calls each get their copy).
    """
    fields = getattr(type(model), "model_fields", None)
    if not isinstance(fields, Mapping) or not callable(getattr(model, "model_copy", None)):
        return model
    update = {k: v for k, v in limits.items() if k in fields and v is not None}
    return model.model_copy(update=update) if update else model


def declares(model: Any, names: Sequence[str]) -> bool:
    """Whether a pydantic framework model's class declares every field in ``names``."""
    fields = getattr(type(model), "model_fields", None)
    return isinstance(fields, Mapping) and all(name in fields for name in names)


def schema_rule(schema: Mapping[str, Any]) -> str:
    """The instruction that carries a JSON schema to a model with no structured output."""
    return "Reply with one JSON object matching this JSON schema: " + json.dumps(
        schema, separators=(",", ":")
    )


def reply_usage(
    prompt_tokens: object,
    completion_tokens: object,
    seconds: float,
    messages: Sequence[Mapping[str, str]],
    text: str,
) -> Usage:
    """One call's usage: the tokens the framework reported, else counted (cl100k_base).

    A count that is no int from 0 to :data:`~corrective_rag.llm.reply.MOST_TOKENS_PER_CALL` is
    not reported. Counting keeps token budgets meaningful for providers that report nothing.
    """
    prompt, completion = reported_tokens(prompt_tokens), reported_tokens(completion_tokens)
    if prompt is None or completion is None:
        counter = _token_counter()
        prompt = sum(counter.count(m.get("content", "")) for m in messages)
        completion = counter.count(text)
    return Usage(
        llm_calls=1,
        prompt_tokens=prompt,
        completion_tokens=completion,
        latency_seconds=seconds,
    )


def _token_counter() -> Any:
    with _counter_lock:
        if not _counters:
            from corrective_rag.models.tokens import TiktokenCounter

            _counters.append(TiktokenCounter())
        return _counters[0]


def secrets_of_model(model: object) -> tuple[str, ...]:
    """The secret values (pydantic ``SecretStr`` fields: API keys) a framework model holds."""
    found: list[str] = []
    for value in vars(model).values() if hasattr(model, "__dict__") else ():
        reveal = getattr(value, "get_secret_value", None)
        if callable(reveal):
            secret = reveal()
            if isinstance(secret, str) and secret:
                found.append(secret)
    return tuple(found)


def check_call_allowed(name: str) -> None:
    """Raise before a framework call that the run's scope no longer allows.

    A cancelled or expired run makes no call; one in flight is cut off by
    :func:`corrective_rag.integrations.awaiting.await_in_scope`.

    Raises:
        Cancelled: the run was cancelled.
        LLMTimeoutError: the run's deadline has passed.
    """
    scope.raise_if_cancelled()
    at = scope.deadline()
    if at is not None and time.monotonic() >= at:
        raise LLMTimeoutError(f"{name}: the run's deadline passed before the call")


def call_failed(name: str, exc: BaseException, secrets: Sequence[str]) -> LLMError:
    """A framework model's failure as our :class:`~corrective_rag.errors.LLMError`, keys masked."""
    return LLMError(redact(f"{name} call failed: {type(exc).__name__}: {exc}", secrets))
