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
# The engines' own words, stored width first: chromadb 1.x ("Collection expecting embedding
# with dimension of 27, got 16"), Qdrant ("Vector dimension error: expected dim: 27, got 16")
# and Qdrant's local mode, which multiplies the stored vectors by the query ("shapes (2,27) and
# (16,) not aligned").
_DIMENSION = re.compile(
    r"expecting embedding with dimension of (\d+), got (\d+)"
    r"|expected dim: (\d+), got (\d+)"
    r"|shapes \(\d+,(\d+)\) and \((\d+),\) not aligned"
)


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
    stored, given = (int(g) for g in found.groups() if g is not None)
    built = recorded or f"an embedder of {stored} dimensions"
    return StoreError(
        f"this store was built with another embedder ({built}) than the one given "
        f"({describe(embedder, given)}): open it with the embedder it was indexed with, "
        "or index the documents again with this one"
    )
