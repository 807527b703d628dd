"""Which embedder a store's vectors came from, and the error when another one reads them.

A store's dense leg compares query vectors with stored ones: both must come from one embedder.
A backend that can keep a note with its data (:class:`Labelled`: chromadb, in its collection's
metadata) records the embedder of the last write; a query or write whose vectors do not fit
the stored ones is then refused with a :class:`~corrective_rag.errors.StoreError` naming both
embedders, instead of the engine's own dimension error (which chromadb raised as "invalid
metadata filter None").
"""

from __future__ import annotations

import re
from typing import Protocol, runtime_checkable

from corrective_rag.errors import StoreError

__all__ = ["EMBEDDER_KEY", "Labelled", "describe", "mismatch"]

EMBEDDER_KEY = "crag_embedder"  # in a chroma collection's metadata
# chromadb 1.x: "Collection expecting embedding with dimension of 27, got 16"
_DIMENSION = re.compile(r"expecting embedding with dimension of (\d+), got (\d+)")


@runtime_checkable
class Labelled(Protocol):
    """A backend that keeps the label of the embedder its vectors came from."""

    @property
    def embedder_label(self) -> str | None:
        """The label last recorded, or None (a store written before labels, or never)."""
        ...

    def set_embedder_label(self, label: str) -> None:
        """Record ``label`` durably with the data."""
        ...


def describe(embedder: object, width: int) -> str:
    """``embedder`` as a user would recognise it, with its vectors' width."""
    name = getattr(embedder, "name", None)
    shown = type(embedder).__name__ + (f"({name!r})" if isinstance(name, str) else "")
    return f"{shown}, {width} dimensions"


def mismatch(exc: BaseException, embedder: object, recorded: str | None) -> StoreError | None:
    """The error naming both embedders when ``exc`` is the engine's dimension mismatch, else None.

    ``recorded`` is the store's label (:class:`Labelled`), None when it has none.
    """
    found = _DIMENSION.search(str(exc))
    if found is None:
        return None
    stored, given = int(found.group(1)), int(found.group(2))
    built = recorded or f"an embedder of {stored} dimensions"
    return StoreError(
        f"this store was built with another embedder ({built}) than the one given "
        f"({describe(embedder, given)}): open it with the embedder it was indexed with, "
        "or index the documents again with this one"
    )
