"""What is retrieved: a document, where each leg placed it, and a hit as the history keeps it.

These and the other values of :mod:`corrective_rag.types` are imported from that face; its
``__all__`` (or the root's) lists them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from corrective_rag.errors import InputError
from corrective_rag.inputs import inexact_int, surrogate_at

MAX_ID_LENGTH = 512  # chromadb accepts longer ids, but ids are shown in tables and logs


def _frozen_mapping(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(value or {}))


@dataclass(frozen=True, slots=True)
class Document:
    """A unit of retrievable text.

    Attributes:
        id: unique, non-empty, at most 512 characters, no NUL and no control characters.
        text: non-empty, not only whitespace, no NUL characters; neither id nor text may hold
            a lone surrogate (text that is not valid Unicode).
        metadata: flat mapping of str to str / int / float / bool (what chromadb can filter on);
            an int within +-2**53 (``inputs.MAX_EXACT_INT``), which the stores compare exactly.
    """

    id: str
    text: str
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id.strip():
            raise InputError(f"document id must be a non-empty string, got {self.id!r}")
        if len(self.id) > MAX_ID_LENGTH:
            raise InputError(
                f"document id longer than {MAX_ID_LENGTH} characters: {self.id[:40]!r}..."
            )
        if any(ord(c) < 32 for c in self.id):
            raise InputError(f"document id contains control characters: {self.id!r}")
        if not isinstance(self.text, str):
            raise InputError(
                f"document {self.id!r}: text must be a string, got {type(self.text).__name__}"
            )
        if not self.text.strip():
            raise InputError(f"document {self.id!r}: text is empty or only whitespace")
        if "\x00" in self.text:
            raise InputError(f"document {self.id!r}: text contains NUL characters")
        for part in ("id", "text"):
            position = surrogate_at(getattr(self, part))
            if position is not None:  # cannot be stored, embedded or written as UTF-8
                raise InputError(
                    f"document {self.id!r}: {part} is not valid Unicode "
                    f"(lone surrogate at character {position})"
                )
        meta = self.metadata if self.metadata is not None else {}
        if not isinstance(meta, Mapping):
            raise InputError(f"document {self.id!r}: metadata must be a mapping")
        for key, value in meta.items():
            if not isinstance(key, str) or not key:
                raise InputError(f"document {self.id!r}: metadata keys must be non-empty strings")
            if not isinstance(value, str | int | float | bool):
                raise InputError(
                    f"document {self.id!r}: metadata {key!r} must be str, int, float or bool, "
                    f"got {type(value).__name__}"
                )
            if inexact_int(value):  # the stores would compare it as another number
                raise InputError(
                    f"document {self.id!r}: metadata {key!r} is an integer past 2**53, which "
                    "the stores cannot compare exactly; store it as a string"
                )
        object.__setattr__(self, "metadata", _frozen_mapping(meta))

    def __hash__(self) -> int:
        return hash((self.id, self.text))


@dataclass(frozen=True, slots=True)
class LegScore:
    """Where one retrieval leg placed a document: ``leg`` is e.g. ``"bm25"`` or ``"dense"``."""

    leg: str
    rank: int  # 1-based
    score: float


@dataclass(frozen=True, slots=True)
class Hit:
    """A retrieved document with its fused score and rank and each leg's own rank and score."""

    document: Document
    score: float
    rank: int  # 1-based, after fusion
    legs: tuple[LegScore, ...] = ()


@dataclass(frozen=True, slots=True)
class Retrieved:
    """A hit as recorded in the history: the document id without its text."""

    document_id: str
    score: float
    rank: int
    legs: tuple[LegScore, ...] = ()

    @classmethod
    def from_hit(cls, hit: Hit) -> Retrieved:
        """Drop the document text from a hit, keeping ranks and scores."""
        return cls(hit.document.id, hit.score, hit.rank, hit.legs)
