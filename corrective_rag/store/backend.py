"""The seam between the store and an engine: the :class:`Backend` protocol.

A backend of :class:`~corrective_rag.store.hybrid.HybridStore` stores each document's text,
metadata and vector, and finds the nearest vectors to a query vector. It never embeds: the store
computes every vector with its embedder (:func:`embed_documents`) and hands it over. Everything
else (argument checks, fusion, the atomic two-sided write, id bookkeeping, filters, lifetime) is
the store's, written once.

A backend whose engine also scores BM25 (Qdrant's sparse vectors) offers it as ``lexical``;
one that does not (chromadb) sets ``lexical = None`` and the store keeps its own BM25 index
beside it, written together with it (:mod:`~corrective_rag.store.atomic`). A new engine is one
module implementing the methods below (and a function returning its opener), one line in
:data:`corrective_rag.store.engines.ENGINES`, and one entry in ``tests/store/test_backends.py``.

Contract:

* Records are whole: :meth:`Backend.write` replaces a stored record's text, metadata and vector
  together (a metadata key the new document lacks is gone afterwards).
* ``where`` filters use chromadb's metadata filter language (``{"kind": "x"}``, ``$and``,
  ``$or``, ``$in``, ``$eq``, ``$ne``, ``$gt``/``$gte``/``$lt``/``$lte``, ``$nin``); a backend
  translates it and raises :class:`~corrective_rag.errors.InputError` for a filter it cannot
  read. The meaning is chroma's, the same on every backend and bridge: numbers compare by value
  (``2021`` matches a stored ``2021.0``; ``0.5`` never matches ``0``), a bool equals only a bool,
  ``$ne``/``$nin`` are the negations of ``$eq``/``$in`` (a document without the field matches
  them), ranges match numbers only, several keys in one mapping must all hold. The oracle is
  :func:`corrective_rag.testing.filter_contract.reference_matches`; a backend passes
  :class:`corrective_rag.testing.FilterContract`. The store refuses a filter past its bounds
  (:func:`~corrective_rag.store.checks.check_filter_size`: 10,000 list values, 100 terms, 16
  levels) before a backend sees it. Metadata keys starting with
  :data:`RESERVED_PREFIX` belong to the store; a backend may keep its own there and must leave
  them out of the documents it returns.
* Dense scores are cosine similarities (higher is better); vectors are L2-normalised float32.
* Unknown ids are skipped by every read and ignored by :meth:`Backend.delete`.
* Foreign exceptions may escape; the store maps them to :class:`~corrective_rag.errors.StoreError`.
* A backend whose folder holds the store's BM25 files (chromadb on disk) is also
  :class:`Stamped`: it keeps a version stamp durably with its data, which the store compares
  with the BM25 files' at open.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from corrective_rag.errors import StoreError
from corrective_rag.observe.logs import get_logger
from corrective_rag.protocols import Embedder
from corrective_rag.types import Document

__all__ = [
    "DEFAULT_COLLECTION",
    "HASH_KEY",
    "RESERVED_PREFIX",
    "Backend",
    "Lexical",
    "Record",
    "Run",
    "Stamped",
    "Where",
    "all_texts",
    "embed_documents",
]

log: Any = get_logger(__name__)

DEFAULT_COLLECTION = "corrective_rag"  # the collection a store uses unless told, on every engine
RESERVED_PREFIX = "_crag_"  # metadata keys the store writes itself; users may not
HASH_KEY = "_crag_hash"
EMBED_BATCH = 1024  # texts per embed() call: bounds memory, lets progress be logged
FETCH_PAGE = 1024  # ids per fetch when reading a whole corpus: bounded requests

Run = list[tuple[str, float]]  # (id, score) pairs, best first
Where = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Record:
    """One stored document, with its vector when it was asked for (to restore or reuse it)."""

    document: Document
    embedding: npt.NDArray[np.float32] | None = None


class Lexical(Protocol):
    """A BM25 leg an engine scores itself (see the module's contract)."""

    def sparse(self, query: str, depth: int, where: Where | None) -> Run:
        """The ``depth`` best ``(id, BM25 score)`` pairs for ``query``, within ``where``."""
        ...

    def idf(self, token: str) -> float:
        """Corpus idf of one token as the leg weighs it (0.0 when absent)."""
        ...


@runtime_checkable
class Backend(Protocol):
    """Documents with vectors, searched by cosine similarity (see the module's contract)."""

    @property
    def lexical(self) -> Lexical | None:
        """The engine's own BM25 leg, or None: the store keeps its BM25 index beside it."""
        ...

    def count(self) -> int:
        """Number of stored documents."""
        ...

    def ids(self, where: Where | None) -> list[str]:
        """Ids of the documents whose metadata satisfy ``where`` (``None``: every id)."""
        ...

    def fetch(self, ids: Sequence[str], *, vectors: bool = False) -> dict[str, Record]:
        """The stored records among ``ids``; with ``vectors``, each with its embedding."""
        ...

    def dense(self, vector: npt.NDArray[np.float32], depth: int, where: Where | None) -> Run:
        """The ``depth`` nearest ``(id, cosine similarity)`` pairs, best first, within ``where``."""
        ...

    def dense_many(
        self, vectors: npt.NDArray[np.float32], depth: int, where: Where | None
    ) -> list[Run]:
        """:meth:`dense` of each row of ``vectors``, in order, in as few engine calls as it can.

        Row for row equal to :meth:`dense` of that row (same ids, scores and order); no rows,
        no runs (and no call). The store searches all of a loop iteration's queries this way:
        an engine's fixed cost per call outweighs the work per query vector.
        """
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

    def close(self) -> None:
        """Free what the backend holds (an in-memory collection is dropped)."""
        ...


@runtime_checkable
class Stamped(Protocol):
    """A backend that keeps a version stamp with its data (its folder holds our BM25 files)."""

    @property
    def stamp(self) -> str | None:
        """The version stamp last set, or None."""
        ...

    def set_stamp(self, stamp: str) -> None:
        """Record the version stamp durably."""
        ...


def all_texts(backend: Backend) -> Iterator[tuple[str, str]]:
    """Every stored ``(id, text)``, a page at a time (what a BM25 index beside is built from)."""
    ids = backend.ids(None)
    for start in range(0, len(ids), FETCH_PAGE):
        page = ids[start : start + FETCH_PAGE]
        found = backend.fetch(page)
        yield from ((i, found[i].document.text) for i in page if i in found)


def embed_documents(
    embedder: Embedder, documents: Sequence[Document], previous: Mapping[str, Record]
) -> npt.NDArray[np.float32]:
    """Vectors for ``documents``, reusing the stored vector where the text is unchanged."""
    rows: list[npt.NDArray[np.float32] | None] = []
    todo: list[int] = []
    for i, doc in enumerate(documents):
        old = previous.get(doc.id)
        if old is not None and old.embedding is not None and old.document.text == doc.text:
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
