"""Argument checks shared by the store's write and read calls, done before anything is written."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from corrective_rag.errors import DuplicateIdError, InputError
from corrective_rag.store.dense import RESERVED_PREFIX
from corrective_rag.types import Document

__all__ = ["check_unique", "validate_documents", "validate_ids"]


def validate_documents(documents: Iterable[Document]) -> list[Document]:
    """Documents as a list, checked for type, reserved metadata keys and repeated ids."""
    if isinstance(documents, Document):
        documents = [documents]
    docs = list(documents)
    for doc in docs:
        if not isinstance(doc, Document):
            raise InputError(f"expected Document, got {type(doc).__name__}")
        reserved = [k for k in doc.metadata if k.startswith(RESERVED_PREFIX)]
        if reserved:
            raise InputError(f"document {doc.id!r}: metadata keys {reserved} are reserved")
    check_unique([d.id for d in docs])
    return docs


def check_unique(ids: Sequence[str]) -> None:
    """Raise DuplicateIdError naming every id that appears more than once."""
    seen: set[str] = set()
    repeated = [i for i in ids if i in seen or seen.add(i)]  # type: ignore[func-returns-value]
    if repeated:
        raise DuplicateIdError(repeated)


def validate_ids(ids: Iterable[str]) -> list[str]:
    """Ids as a list of non-empty strings (one bare string is refused: it would iterate)."""
    if isinstance(ids, str):
        raise InputError("pass a list of ids, not one string")
    out = list(ids)
    for doc_id in out:
        if not isinstance(doc_id, str) or not doc_id:
            raise InputError(f"document ids must be non-empty strings, got {doc_id!r}")
    return out
