"""Argument checks shared by the stores' constructors, reads and writes, done before any work."""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from corrective_rag.errors import (
    ConfigError,
    DuplicateIdError,
    FilterTooLargeError,
    InputError,
    cut_text,
)
from corrective_rag.inputs import check_int, check_query, inexact_int
from corrective_rag.store.backend import RESERVED_PREFIX
from corrective_rag.text import tokenize
from corrective_rag.types import Document

__all__ = [
    "FILTER_SCALARS",
    "MAX_FILTER_DEPTH",
    "MAX_FILTER_TERMS",
    "MAX_FILTER_VALUES",
    "MAX_TEXT_CHARS",
    "MAX_TOP_K",
    "check_candidates",
    "check_collection",
    "check_filter_size",
    "check_not_stored",
    "check_parts",
    "check_search",
    "check_term",
    "check_unique",
    "check_where",
    "filter_scalar",
    "validate_documents",
    "validate_ids",
]

# The embedding model reads ~256 tokens (~1 KB) of a text; a megabyte document is indexed by its
# first lines only and stalls the write for tens of seconds. Longer texts belong in chunks.
MAX_TEXT_CHARS = 1_000_000
# The most hits one search returns, and so the most the loop takes from a source per iteration
# (its top_k) or asks a retriever for (candidate_limit): one bound for every top_k of the
# package, a sanity bound: larger requests are a bug in the caller, not a search.
MAX_TOP_K = 10_000


def check_candidates(candidates: int) -> None:
    """A store's ``candidates`` (how deep each leg searches before fusion): an int in range."""
    check_int(candidates, "candidates")
    if not 1 <= candidates <= MAX_TOP_K:
        raise ConfigError(f"candidates must be in 1..{MAX_TOP_K}, got {candidates}")


def check_collection(name: object) -> None:
    """A collection name: 3-512 characters (chromadb's own rule, checked up front).

    The store names its BM25 side's files after it, whatever the engine.
    """
    if not isinstance(name, str) or not 3 <= len(name) <= 512:
        raise ConfigError(f"collection name must have 3-512 characters, got {name!r}")


def check_parts(fusion: object, embedder: object) -> None:
    """A store's injected ``fusion`` and ``embedder``: ``None`` (the default) or duck-typed."""
    if fusion is not None and not callable(getattr(fusion, "fuse", None)):
        raise ConfigError("fusion must have a fuse(runs) method")
    if embedder is not None and not callable(getattr(embedder, "embed", None)):
        raise ConfigError("embedder must have an embed(texts) method")


def check_where(where: Mapping[str, Any] | None) -> None:
    """A metadata filter: ``None`` or a non-empty mapping within the filter bounds."""
    if where is not None and (not isinstance(where, Mapping) or not where):
        raise InputError(f"where must be a non-empty mapping or None, got {where!r}")
    if where is not None:
        check_filter_size(where)


# Bounds on one metadata filter, checked before any engine sees it. chromadb binds every number
# of an $in/$nin list twice (its int and float columns) and SQLite takes at most 32,766 bound
# values per query: 16,381 numbers fail, 10,000 leave room for the rest of the filter. A number
# with a fractional part counts twice: chroma_where adds its integer part as a companion.
MAX_FILTER_VALUES = 10_000
# chromadb nests a flat $or/$and of n comparisons n deep: SQLite refuses 1,000 ("Expression tree
# is too large") and 10,000 crash the process (SIGSEGV in chromadb's Rust bindings). Each term
# becomes at most 7 comparisons once translated, so 100 terms stay far below both.
MAX_FILTER_TERMS = 100
# chromadb refuses a filter nested ~100 deep; translation adds up to two levels per level.
MAX_FILTER_DEPTH = 16


def _filter_weight(value: Any) -> int:
    """What one $in/$nin value counts towards :data:`MAX_FILTER_VALUES`: a fraction 2, else 1."""
    if isinstance(value, float) and math.isfinite(value) and not value.is_integer():
        return 2
    return 1


def check_filter_size(where: Mapping[str, Any]) -> None:
    """Refuse a filter past the bounds: list values, field terms, ``$and``/``$or`` nesting.

    Only the size is checked here (iteratively, so a deep filter cannot exhaust the stack); each
    backend's translation refuses a malformed filter with :class:`InputError`.

    Raises:
        FilterTooLargeError: more than :data:`MAX_FILTER_VALUES` values in its ``$in``/``$nin``
            lists together (a number with a fractional part counts twice), more than
            :data:`MAX_FILTER_TERMS` field terms, or ``$and``/``$or`` nested deeper than
            :data:`MAX_FILTER_DEPTH`.
    """
    values = terms = 0
    pending: list[tuple[Any, int]] = [(where, 0)]
    while pending:
        node, depth = pending.pop()
        if not isinstance(node, Mapping):
            continue
        for key, value in node.items():
            if key in ("$and", "$or"):
                if depth >= MAX_FILTER_DEPTH:
                    raise FilterTooLargeError(
                        f"metadata filter nests $and/$or deeper than {MAX_FILTER_DEPTH} levels"
                    )
                if isinstance(value, list | tuple):
                    pending.extend((part, depth + 1) for part in value)
                continue
            terms += 1
            if isinstance(value, Mapping):
                for operand in value.values():
                    if isinstance(operand, list | tuple):
                        values += sum(map(_filter_weight, operand))
            if terms > MAX_FILTER_TERMS:
                raise FilterTooLargeError(
                    f"metadata filter has more than {MAX_FILTER_TERMS} field terms; "
                    "put the values of one field in one $in list"
                )
            if values > MAX_FILTER_VALUES:
                raise FilterTooLargeError(
                    f"metadata filter holds more than {MAX_FILTER_VALUES} $in/$nin values (a "
                    "fractional number counts twice); narrow it, or filter by a coarser field"
                )


def check_search(query: str, top_k: int, where: Mapping[str, Any] | None) -> None:
    """The arguments of a store's ``retrieve`` and ``search``, checked alike by every store."""
    check_query(query, what="query")
    check_int(top_k, "top_k", minimum=1, maximum=MAX_TOP_K)
    check_where(where)


def check_term(term: str) -> str | None:
    """The one token of an ``idf()`` argument, or ``None`` for a stop word (no token).

    Raises:
        InputError: ``term`` is not a string or tokenizes into more than one token.
    """
    if not isinstance(term, str):
        raise InputError(f"term must be a string, got {type(term).__name__}")
    tokens = tokenize(term)
    if len(tokens) > 1:
        raise InputError(f"idf() takes one term, {term!r} has {len(tokens)} tokens")
    return tokens[0] if tokens else None


def _as_list(items: Any, what: str) -> list[Any]:
    if isinstance(items, str | bytes):
        raise InputError(f"{what} must be an iterable, not one {type(items).__name__}")
    try:
        return list(items)
    except TypeError as exc:
        raise InputError(f"{what} must be an iterable, got {type(items).__name__}") from exc


def validate_documents(documents: Iterable[Document]) -> list[Document]:
    """Documents as a list, checked for type, reserved metadata keys and repeated ids."""
    if isinstance(documents, Document):
        documents = [documents]
    docs = _as_list(documents, "documents")
    for doc in docs:
        if not isinstance(doc, Document):
            raise InputError(f"expected Document, got {type(doc).__name__}")
        if len(doc.text) > MAX_TEXT_CHARS:
            raise InputError(
                f"document {doc.id!r}: text of {len(doc.text)} characters is longer than "
                f"{MAX_TEXT_CHARS}; split it (load_documents cuts files into token windows)"
            )
        reserved = [k for k in doc.metadata if k.startswith(RESERVED_PREFIX)]
        if reserved:
            raise InputError(f"document {doc.id!r}: metadata keys {reserved} are reserved")
    check_unique([d.id for d in docs])
    return docs


def check_not_stored(stored: Collection[str], *, replace: bool) -> None:
    """Refuse to ``add`` (``replace=False``) documents whose ids are already ``stored``."""
    if stored and not replace:
        shown = ", ".join(repr(i) for i in sorted(stored)[:10])
        raise InputError(f"{len(stored)} ids already stored: {shown} (use upsert)")


def check_unique(ids: Sequence[str]) -> None:
    """Raise DuplicateIdError naming every id that appears more than once."""
    seen: set[str] = set()
    repeated = [i for i in ids if i in seen or seen.add(i)]  # type: ignore[func-returns-value]
    if repeated:
        raise DuplicateIdError(repeated)


def validate_ids(ids: Iterable[str]) -> list[str]:
    """Ids as a list of non-empty strings (one bare string is refused: it would iterate)."""
    if isinstance(ids, str | bytes):
        raise InputError("pass a list of ids, not one string")
    out = _as_list(ids, "ids")
    for doc_id in out:
        if not isinstance(doc_id, str) or not doc_id:
            raise InputError(f"document ids must be non-empty strings, got {doc_id!r}")
    return out


FILTER_SCALARS = (str, int, float, bool)  # the value types a metadata filter compares


def filter_scalar(value: Any, where: Mapping[str, Any]) -> Any:
    """``value`` if a metadata filter may compare it, else :class:`InputError` naming ``where``."""
    if not isinstance(value, FILTER_SCALARS):
        raise InputError(
            f"invalid metadata filter {where!r}: {value!r} is not a str, int, float or bool"
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(f"invalid metadata filter {where!r}: {value!r} is not a finite number")
    if inexact_int(value):
        raise InputError(
            f"invalid metadata filter {cut_text(repr(where), 200)}: {value} is an integer past "
            "2**53, which the stores cannot compare exactly"
        )
    return value
