"""The shipped dense backend: a chromadb collection fed with embeddings we compute ourselves.

:class:`ChromaIndex` implements :class:`~corrective_rag.store.dense.DenseIndex`. chromadb never
embeds anything here: collections are opened with ``embedding_function=None`` and
every write passes ``embeddings=``, every query ``query_embeddings=`` (its default function would
try to download an ONNX model). Each record's metadata carries a content hash of its text, so an
upsert with unchanged text reuses the stored vector instead of embedding the text again.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from corrective_rag.errors import InputError, StoreError
from corrective_rag.logs import get_logger
from corrective_rag.models.embeddings import text_key
from corrective_rag.store.dense import HASH_KEY, RESERVED_PREFIX, Record
from corrective_rag.store.persist import LOCK_NAME
from corrective_rag.types import Document

__all__ = ["ChromaIndex", "open_collection", "readable_copy", "store_state"]

log = get_logger(__name__)

STAMP_KEY = "crag_stamp"  # in the collection's metadata: ties it to the saved BM25 side
# chromadb rejects batches above its max_batch_size (~5461 on 1.5); stay clear of it.
WRITE_BATCH = 5000
READ_PAGE = 5000


def _strip(meta: Mapping[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in (meta or {}).items() if not k.startswith(RESERVED_PREFIX)}


def _filter_error(exc: Exception, where: Mapping[str, Any] | None) -> Exception:
    """Map chromadb's argument errors (a bad ``where``) to InputError, others to StoreError."""
    # chromadb is imported lazily, so its error classes are recognised by module, not imported
    if isinstance(exc, ValueError) or type(exc).__module__.startswith("chromadb.errors"):
        return InputError(f"invalid metadata filter {where!r}: {exc}")
    return StoreError(f"chroma query failed: {exc}")


MARKER = "chroma.sqlite3"  # a folder holding it is a store (chroma writes it at the first open)


def store_state(directory: str) -> str:
    """What ``directory`` is: a ``"store"``, ``"empty"``, ``"missing"``, ``"file"`` or ``"other"``.

    A folder holding only our lock file counts as empty; ``"other"`` is a folder of other files.
    """
    if not os.path.exists(directory):
        return "missing"
    if not os.path.isdir(directory):
        return "file"
    names = set(os.listdir(directory))
    if MARKER in names:
        return "store"
    return "empty" if names <= {LOCK_NAME} else "other"


def readable_copy(directory: str) -> tuple[str, Callable[[], None]]:
    """A folder chromadb can open for reading ``directory``, and how to clean it up.

    chromadb writes to its database even to read (it opens it for writing), so a folder this
    process cannot write to is copied to a temporary folder first (logged: it costs the size
    of the store). A writable folder is used in place.
    """
    if os.access(directory, os.W_OK) and os.access(os.path.join(directory, MARKER), os.W_OK):
        return directory, lambda: None
    tmp = tempfile.mkdtemp(prefix="crag-readonly-")
    copy = os.path.join(tmp, "store")
    shutil.copytree(directory, copy, ignore=shutil.ignore_patterns(LOCK_NAME))
    for root, dirs, files in os.walk(copy):  # copies keep the read-only modes
        for name in dirs + files:
            os.chmod(os.path.join(root, name), 0o700 if name in dirs else 0o600)
    os.chmod(copy, 0o700)
    log.info("store_read_from_copy", directory=directory, copy=copy)
    return copy, lambda: shutil.rmtree(tmp, ignore_errors=True)


def open_collection(client: Any, name: str) -> Any:
    """Get or create collection ``name`` in cosine space, with no embedding function."""
    try:
        return client.get_or_create_collection(
            name, embedding_function=None, configuration={"hnsw": {"space": "cosine"}}
        )
    except Exception as exc:
        raise StoreError(f"cannot open chroma collection {name!r}: {exc}") from exc


class ChromaIndex:
    """Vectors of documents in one chromadb collection (cosine space): a ``DenseIndex``.

    Args:
        collection: a chromadb collection created with cosine space and no embedding function
            (:func:`open_collection`).
        on_close: called by :meth:`close` (an in-memory store drops its collection there).
    """

    def __init__(self, collection: Any, *, on_close: Callable[[], None] | None = None) -> None:
        self.collection = collection
        self._on_close = on_close

    def close(self) -> None:
        """Run the ``on_close`` hook once."""
        hook, self._on_close = self._on_close, None
        if hook is not None:
            hook()

    def count(self) -> int:
        """Number of stored documents."""
        return int(self.collection.count())

    def records(self, ids: Sequence[str]) -> dict[str, Record]:
        """The stored records among ``ids`` (text, metadata and vector)."""
        out: dict[str, Record] = {}
        for start in range(0, len(ids), READ_PAGE):
            got = self.collection.get(
                ids=list(ids[start : start + READ_PAGE]),
                include=["documents", "metadatas", "embeddings"],
            )
            for i, doc_id in enumerate(got["ids"]):
                doc = Document(doc_id, got["documents"][i], _strip(got["metadatas"][i]))
                vec = np.asarray(got["embeddings"][i], dtype=np.float32)
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

    def query(
        self, vector: npt.NDArray[np.float32], n: int, where: Mapping[str, Any] | None
    ) -> list[tuple[str, float]]:
        """The ``n`` nearest ``(id, cosine similarity)`` pairs, optionally filtered."""
        total = self.count()
        if total == 0:
            return []
        try:
            got = self.collection.query(
                query_embeddings=[np.asarray(vector, dtype=np.float32)],
                n_results=min(n, total),
                where=dict(where) if where else None,
                include=["distances"],
            )
        except Exception as exc:
            raise _filter_error(exc, where) from exc
        ids = got["ids"][0]
        distances = got["distances"][0] if got["distances"] else []
        return [(i, 1.0 - float(d)) for i, d in zip(ids, distances, strict=True)]

    def matching_ids(self, where: Mapping[str, Any]) -> set[str]:
        """Ids of the documents whose metadata satisfy a chromadb ``where`` filter."""
        try:
            got = self.collection.get(where=dict(where), include=[])
        except Exception as exc:
            raise _filter_error(exc, where) from exc
        return set(got["ids"])

    def documents(self, ids: Sequence[str]) -> dict[str, Document]:
        """Stored documents by id (without vectors)."""
        got = self.collection.get(ids=list(ids), include=["documents", "metadatas"])
        return {
            doc_id: Document(doc_id, got["documents"][i], _strip(got["metadatas"][i]))
            for i, doc_id in enumerate(got["ids"])
        }

    def iter_all(self) -> Iterator[tuple[str, str]]:
        """Every stored ``(id, text)``, page by page (used to rebuild the BM25 side)."""
        offset = 0
        while True:
            got = self.collection.get(include=["documents"], limit=READ_PAGE, offset=offset)
            if not got["ids"]:
                return
            yield from zip(got["ids"], got["documents"], strict=True)
            offset += len(got["ids"])

    def metadata_values(self, key: str) -> set[str]:
        """Every distinct string value of metadata ``key``, page by page."""
        values: set[str] = set()
        offset = 0
        while True:
            got = self.collection.get(include=["metadatas"], limit=READ_PAGE, offset=offset)
            if not got["ids"]:
                return values
            values.update(str(m[key]) for m in got["metadatas"] if m and m.get(key) is not None)
            offset += len(got["ids"])

    def all_ids(self) -> set[str]:
        """Every stored id."""
        ids: set[str] = set()
        offset = 0
        while True:
            got = self.collection.get(include=[], limit=READ_PAGE, offset=offset)
            if not got["ids"]:
                return ids
            ids.update(got["ids"])
            offset += len(got["ids"])

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
