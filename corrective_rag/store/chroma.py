"""The chromadb backend: a collection fed with embeddings we compute ourselves, BM25 beside it.

:class:`ChromaBackend` implements :class:`~corrective_rag.store.backend.Backend` (and
:class:`~corrective_rag.store.backend.Stamped`, for a store on disk). chromadb has no local
BM25, so ``lexical`` is None: the store keeps its own BM25 index beside the collection.
chromadb never embeds anything here: every write passes ``embeddings=``, every query
``query_embeddings=`` (its default function would try to download an ONNX model). Each record's
metadata carries a content hash of its text, so an upsert with unchanged text reuses the stored
vector instead of embedding the text again. How a collection is opened (in memory, a folder, a
server) is :mod:`~corrective_rag.store.chroma_open`'s.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from corrective_rag.errors import InputError, StoreError, cut_text
from corrective_rag.models.embeddings import text_key
from corrective_rag.observe.logs import get_logger
from corrective_rag.store.backend import HASH_KEY, RESERVED_PREFIX, Record, Run, Where
from corrective_rag.store.chroma_where import to_chroma_where
from corrective_rag.store.embedders import EMBEDDER_KEY
from corrective_rag.types import Document

__all__ = ["ChromaBackend"]

log: Any = get_logger(__name__)

STAMP_KEY = "crag_stamp"  # in the collection's metadata: ties it to the saved BM25 side
# chromadb rejects batches above its max_batch_size (~5461 on 1.5); stay clear of it.
WRITE_BATCH = 5000
READ_PAGE = 5000


def _strip(meta: Mapping[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in (meta or {}).items() if not k.startswith(RESERVED_PREFIX)}


def _filter_error(exc: Exception, where: Mapping[str, Any] | None) -> Exception:
    """Map chromadb's argument errors (a bad ``where``) to InputError, others to StoreError.

    With no ``where`` there is no filter to blame (a query vector of the wrong width, say).
    """
    # chromadb is imported lazily, so its error classes are recognised by module, not imported
    if where is None:
        return StoreError(f"chroma query failed: {type(exc).__name__}: {cut_text(str(exc), 500)}")
    if isinstance(exc, ValueError) or type(exc).__module__.startswith("chromadb.errors"):
        return InputError(
            f"invalid metadata filter {cut_text(repr(where), 500)}: {cut_text(str(exc), 500)}"
        )
    return StoreError(f"chroma query failed: {cut_text(str(exc), 500)}")


class ChromaBackend:
    """Documents and vectors in one chromadb collection (cosine space): a ``Backend``.

    Args:
        collection: a chromadb collection created with cosine space and no embedding function
            (:func:`~corrective_rag.store.chroma_open.open_collection`).
        on_close: called by :meth:`close` (an in-memory store drops its collection there).
        private: no one but this process's store writes to the collection (an in-memory one,
            or a folder whose writer lock the store holds), so the store may remember its
            searches between its own writes (:class:`~corrective_rag.store.search.SearchMemo`).
        database: the folder's ``chroma.sqlite3``, whose size and mtime :meth:`version` reads.
    """

    lexical = None  # chromadb scores no BM25 locally: the store keeps its index beside

    def __init__(
        self,
        collection: Any,
        *,
        on_close: Callable[[], None] | None = None,
        private: bool = False,
        database: str | None = None,
    ) -> None:
        self.collection = collection
        self._on_close = on_close
        self.private = private
        self._database = database

    def version(self) -> object:
        """A reading that changes when anyone writes to the collection (the memo's check).

        On disk, the database file's size and mtime (a stat, microseconds): every chromadb
        write goes through it. In memory, the document count (about 2 ms at 5,000 documents),
        which an outside add or delete moves and a same-id upsert does not.
        """
        if self._database is not None:
            try:
                found = os.stat(self._database)
            except OSError:
                return None
            return (found.st_mtime_ns, found.st_size)
        return self.count()

    def close(self) -> None:
        """Run the ``on_close`` hook once."""
        hook, self._on_close = self._on_close, None
        if hook is not None:
            hook()

    def count(self) -> int:
        """Number of stored documents."""
        return int(self.collection.count())

    def fetch(self, ids: Sequence[str], *, vectors: bool = False) -> dict[str, Record]:
        """The stored records among ``ids`` (text, metadata; the vector with ``vectors``)."""
        include = ["documents", "metadatas"] + (["embeddings"] if vectors else [])
        out: dict[str, Record] = {}
        for start in range(0, len(ids), READ_PAGE):
            got = self.collection.get(ids=list(ids[start : start + READ_PAGE]), include=include)
            for i, doc_id in enumerate(got["ids"]):
                doc = Document(doc_id, got["documents"][i], _strip(got["metadatas"][i]))
                vec = np.asarray(got["embeddings"][i], dtype=np.float32) if vectors else None
                out[doc_id] = Record(doc, vec)
        return out

    def write(
        self,
        documents: Sequence[Document],
        embeddings: npt.NDArray[np.float32],
        previous: Mapping[str, Record],
    ) -> None:
        """Upsert documents with their vectors, in batches chromadb accepts.

        chromadb's upsert merges metadata into a stored record's; keys the new document lacks
        are sent as ``None`` (chroma's way to delete a key), so a record is replaced whole.
        """
        for start in range(0, len(documents), WRITE_BATCH):
            batch = documents[start : start + WRITE_BATCH]
            metadatas: list[dict[str, Any]] = []
            for doc in batch:
                meta: dict[str, Any] = {**doc.metadata, HASH_KEY: text_key(doc.text)}
                old = previous.get(doc.id)
                if old is not None:
                    meta.update({k: None for k in old.document.metadata if k not in meta})
                metadatas.append(meta)
            self.collection.upsert(
                ids=[d.id for d in batch],
                embeddings=embeddings[start : start + WRITE_BATCH],
                documents=[d.text for d in batch],
                metadatas=metadatas,
            )

    def delete(self, ids: Sequence[str]) -> None:
        """Delete records; unknown ids are ignored."""
        for start in range(0, len(ids), WRITE_BATCH):
            self.collection.delete(ids=list(ids[start : start + WRITE_BATCH]))

    def dense(self, vector: npt.NDArray[np.float32], depth: int, where: Where | None) -> Run:
        """The ``depth`` nearest ``(id, cosine similarity)`` pairs, optionally filtered."""
        return self.dense_many(np.asarray([vector], dtype=np.float32), depth, where)[0]

    def dense_many(
        self, vectors: npt.NDArray[np.float32], depth: int, where: Where | None
    ) -> list[Run]:
        """:meth:`dense` of each row of ``vectors``: one chroma query for all (none for no rows).

        chromadb answers one list of results per query vector. It (1.x) answers a query for
        more results than it holds with all it has, and an empty collection with none, so no
        ``count()`` goes before it: that round trip cost as much as the query itself (a quarter
        of the loop's own time, benchmarks/overhead.py).
        """
        if len(vectors) == 0:
            return []
        chroma_where = to_chroma_where(where) if where else None
        try:
            got = self.collection.query(
                query_embeddings=[np.asarray(v, dtype=np.float32) for v in vectors],
                n_results=depth,
                where=chroma_where,
                include=["distances"],
            )
        except Exception as exc:
            raise _filter_error(exc, where) from exc
        distances = got["distances"] or [[] for _ in got["ids"]]
        return [
            [(i, 1.0 - float(d)) for i, d in zip(ids, row, strict=True)]
            for ids, row in zip(got["ids"], distances, strict=True)
        ]

    def ids(self, where: Where | None) -> list[str]:
        """Ids of the documents whose metadata satisfy ``where`` (every id for ``None``)."""
        if where is not None:
            chroma_where = to_chroma_where(where)
            try:
                got = self.collection.get(where=chroma_where, include=[])
            except Exception as exc:
                raise _filter_error(exc, where) from exc
            return list(got["ids"])
        ids: list[str] = []
        while True:
            got = self.collection.get(include=[], limit=READ_PAGE, offset=len(ids))
            if not got["ids"]:
                return ids
            ids.extend(got["ids"])

    @property
    def stamp(self) -> str | None:
        """The version stamp recorded in the collection's metadata."""
        meta = self.collection.metadata or {}
        value = meta.get(STAMP_KEY)
        return str(value) if value is not None else None

    def set_stamp(self, stamp: str) -> None:
        """Record ``stamp`` in the collection's metadata."""
        meta = dict(self.collection.metadata or {})
        meta[STAMP_KEY] = stamp
        self.collection.modify(metadata=meta)

    @property
    def embedder_label(self) -> str | None:
        """The embedder the stored vectors came from, as recorded in the collection's metadata."""
        value = (self.collection.metadata or {}).get(EMBEDDER_KEY)
        return str(value) if value is not None else None

    def set_embedder_label(self, label: str) -> None:
        """Record the embedder of the stored vectors in the collection's metadata."""
        meta = dict(self.collection.metadata or {})
        meta[EMBEDDER_KEY] = label
        self.collection.modify(metadata=meta)
