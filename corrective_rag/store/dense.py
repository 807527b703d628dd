"""The seam between the hybrid store and its dense backend: the :class:`DenseIndex` protocol.

A dense backend stores each document's text, metadata and vector, and finds the nearest vectors
to a query vector. It never embeds: :class:`~corrective_rag.store.hybrid.HybridStore` computes
every vector with its embedder (:func:`embed_documents`) and hands it over. chromadb
(:class:`~corrective_rag.store.chroma.ChromaIndex`) is the one shipped backend; another is one
new module implementing the methods below.

Contract:

* Records are whole: :meth:`DenseIndex.write` replaces a stored record's text, metadata and
  vector together (a metadata key the new document lacks is gone afterwards).
* ``where`` filters use chromadb's metadata filter language (``{"kind": "x"}``, ``$and``,
  ``$or``, ``$in``, ``$eq``, ``$ne``, ``$gt``/``$gte``/``$lt``/``$lte``, ``$nin``); a backend
  translates it and raises :class:`~corrective_rag.errors.InputError` for a filter it cannot
  read. Metadata keys starting with :data:`RESERVED_PREFIX` belong to the store; a backend may
  keep its own there and must leave them out of the documents it returns.
* Scores are cosine similarities (higher is better); vectors are L2-normalised float32.
* ``stamp`` is a version string kept with the data; persistent stores compare it with the BM25
  side's at open. A backend with no place for it may keep it anywhere durable beside the data.
* Unknown ids are skipped by every read and ignored by :meth:`DenseIndex.delete`.
* Foreign exceptions may escape; the store maps them to :class:`~corrective_rag.errors.StoreError`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from corrective_rag.errors import StoreError
from corrective_rag.logs import get_logger
from corrective_rag.protocols import Embedder
from corrective_rag.types import Document

__all__ = ["HASH_KEY", "RESERVED_PREFIX", "DenseIndex", "Record", "embed_documents"]

log = get_logger(__name__)

RESERVED_PREFIX = "_crag_"  # metadata keys the store writes itself; users may not
HASH_KEY = "_crag_hash"
EMBED_BATCH = 1024  # texts per embed() call: bounds memory, lets progress be logged


@dataclass(frozen=True, slots=True)
class Record:
    """One stored document with its vector, as needed to restore it after a failed write."""

    document: Document
    embedding: npt.NDArray[np.float32]


@runtime_checkable
class DenseIndex(Protocol):
    """Documents with vectors, searched by cosine similarity (see the module's contract)."""

    def count(self) -> int:
        """Number of stored documents."""
        ...

    def records(self, ids: Sequence[str]) -> dict[str, Record]:
        """The stored records among ``ids``: document (text, metadata) and vector."""
        ...

    def documents(self, ids: Sequence[str]) -> dict[str, Document]:
        """The stored documents among ``ids``, without vectors."""
        ...

    def write(
        self,
        documents: Sequence[Document],
        embeddings: npt.NDArray[np.float32],
        previous: Mapping[str, Record],
    ) -> None:
        """Store (insert or replace whole) ``documents`` with their vectors, row for row.

        ``previous`` holds the records now stored under those ids, for backends that must
        clear what a replacement drops.
        """
        ...

    def delete(self, ids: Sequence[str]) -> None:
        """Delete records; unknown ids are ignored."""
        ...

    def query(
        self, vector: npt.NDArray[np.float32], n: int, where: Mapping[str, Any] | None
    ) -> list[tuple[str, float]]:
        """The ``n`` nearest ``(id, cosine similarity)`` pairs, best first, within ``where``."""
        ...

    def matching_ids(self, where: Mapping[str, Any]) -> set[str]:
        """Ids of the documents whose metadata satisfy ``where``."""
        ...

    def iter_all(self) -> Iterator[tuple[str, str]]:
        """Every stored ``(id, text)`` (used to build the BM25 side)."""
        ...

    def all_ids(self) -> set[str]:
        """Every stored id."""
        ...

    def metadata_values(self, key: str) -> set[str]:
        """Every distinct value of metadata ``key``, as strings."""
        ...

    @property
    def stamp(self) -> str | None:
        """The version stamp last set, or None."""
        ...

    def set_stamp(self, stamp: str) -> None:
        """Record the version stamp durably."""
        ...

    def close(self) -> None:
        """Free what the backend holds (an in-memory collection is dropped)."""
        ...


def embed_documents(
    embedder: Embedder, documents: Sequence[Document], previous: Mapping[str, Record]
) -> npt.NDArray[np.float32]:
    """Vectors for ``documents``, reusing the stored vector where the text is unchanged."""
    rows: list[npt.NDArray[np.float32] | None] = []
    todo: list[int] = []
    for i, doc in enumerate(documents):
        old = previous.get(doc.id)
        if old is not None and old.document.text == doc.text:
            rows.append(old.embedding)
        else:
            rows.append(None)
            todo.append(i)
    for start in range(0, len(todo), EMBED_BATCH):
        batch = todo[start : start + EMBED_BATCH]
        vectors = embedder.embed([documents[i].text for i in batch])
        if vectors.shape[0] != len(batch):
            raise StoreError(f"embedder returned {vectors.shape[0]} vectors for {len(batch)}")
        for i, vec in zip(batch, vectors, strict=True):
            rows[i] = vec
        if len(todo) > EMBED_BATCH:
            log.info("embedded", done=min(start + EMBED_BATCH, len(todo)), total=len(todo))
    if not rows:
        return np.zeros((0, 0), dtype=np.float32)
    return np.vstack([r for r in rows if r is not None]).astype(np.float32, copy=False)
