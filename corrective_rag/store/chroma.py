"""The chromadb backend: a collection fed with embeddings we compute ourselves, BM25 beside it.

:class:`ChromaBackend` implements :class:`~corrective_rag.store.backend.Backend` (and
:class:`~corrective_rag.store.backend.Stamped`, for a store on disk). chromadb has no local
BM25, so ``lexical`` is None: the store keeps its own BM25 index beside the collection. The
openers (:func:`ephemeral_opener`, :func:`folder_opener`, :func:`server_opener`) return a
callable the store calls on its first use, so constructing a store touches no client. chromadb never
embeds anything here: collections are opened with ``embedding_function=None`` and
every write passes ``embeddings=``, every query ``query_embeddings=`` (its default function would
try to download an ONNX model). Each record's metadata carries a content hash of its text, so an
upsert with unchanged text reuses the stored vector instead of embedding the text again.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from corrective_rag.errors import ConfigError, InputError, StoreError, cut_text
from corrective_rag.inputs import check_int
from corrective_rag.models.embeddings import text_key
from corrective_rag.observe.logs import get_logger
from corrective_rag.store.backend import HASH_KEY, RESERVED_PREFIX, Record, Run, Where
from corrective_rag.store.checks import check_collection
from corrective_rag.store.chroma_where import to_chroma_where
from corrective_rag.store.embedders import EMBEDDER_KEY
from corrective_rag.store.folders import check_store_folder
from corrective_rag.store.persist import LOCK_NAME
from corrective_rag.types import Document

__all__ = [
    "HNSW",
    "MARKER",
    "ChromaBackend",
    "Opener",
    "checked_folder_opener",
    "ephemeral_opener",
    "folder_opener",
    "open_collection",
    "readable_copy",
    "server_opener",
]

log: Any = get_logger(__name__)

STAMP_KEY = "crag_stamp"  # in the collection's metadata: ties it to the saved BM25 side
# chromadb rejects batches above its max_batch_size (~5461 on 1.5); stay clear of it.
WRITE_BATCH = 5000
READ_PAGE = 5000
# The dense index's settings for new collections. chromadb's defaults (ef_construction and
# ef_search 100, 16 neighbours) found 0.953-0.996 of the exact cosine top 100, the depth the
# store asks each leg for, on the development collections, and two builds of the same vectors
# disagreed on it for most queries; these find 0.999-1.000 and agree, for about 1.6 times
# chromadb's insertion time, which the embedding outweighs (`python benchmarks/dense_recall.py
# DIR`, docs/store.md).
# `ef_search` can still be changed on an existing collection, and is raised when a writer
# opens one made with less; the other two are fixed when a collection is made.
HNSW: Mapping[str, Any] = {
    "space": "cosine",
    "ef_construction": 200,
    "max_neighbors": 32,
    "ef_search": 400,
}


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


MARKER = "chroma.sqlite3"  # a folder holding it is a store (chroma writes it at the first open)


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


def open_collection(client: Any, name: str, *, read_only: bool = False) -> Any:
    """Get or create collection ``name`` (:data:`HNSW`: cosine space), with no embedding function.

    A collection made before with a lower ``ef_search`` gets :data:`HNSW`'s. A reader
    (``read_only``) writes nothing: it only gets an existing collection, and a missing one is a
    :class:`StoreError` naming those that exist; a failure to raise ``ef_search`` is logged.
    """
    if read_only:
        return _existing_collection(client, name)
    try:
        collection = client.get_or_create_collection(
            name, embedding_function=None, configuration={"hnsw": dict(HNSW)}
        )
    except Exception as exc:
        raise StoreError(f"cannot open chroma collection {name!r}: {exc}") from exc
    _raise_ef_search(collection)
    return collection


def _existing_collection(client: Any, name: str) -> Any:
    """Collection ``name`` as it is, or a StoreError naming the collections there are."""
    try:
        found = [c if isinstance(c, str) else c.name for c in client.list_collections()]
    except Exception as exc:
        raise StoreError(f"cannot list chroma collections: {exc}") from exc
    if name not in found:
        there = ", ".join(repr(n) for n in sorted(found)) or "none"
        raise StoreError(f"collection {name!r} not found in the store (collections: {there})")
    try:
        return client.get_collection(name, embedding_function=None)
    except Exception as exc:
        raise StoreError(f"cannot open chroma collection {name!r}: {exc}") from exc


def _raise_ef_search(collection: Any) -> None:
    """Give a collection made with a lower ``ef_search`` the store's (a mutable setting)."""
    wanted = int(HNSW["ef_search"])
    try:
        # the JSON form: the `configuration` property warns about our embedding_function=None
        hnsw = (getattr(collection, "configuration_json", None) or {}).get("hnsw") or {}
        if int(hnsw.get("ef_search", wanted)) >= wanted:
            return
        _modify_when_free(collection, {"hnsw": {"ef_search": wanted}})
        log.info("chroma_ef_search_raised", collection=collection.name, ef_search=wanted)
    except Exception as exc:  # an older chromadb or server: search as the collection is
        log.warning("chroma_ef_search_unchanged", error=str(exc))


# sqlite answers "database is locked" while another client of the folder writes (chromadb's own
# log compaction included), for milliseconds: a setting is written again after a short wait
BUSY_TRIES = 5


def _modify_when_free(collection: Any, configuration: Mapping[str, Any]) -> None:
    """``collection.modify(configuration=...)``, tried again while sqlite reports the folder busy.

    At most :data:`BUSY_TRIES` tries, 0.75 s of waiting in all; any other error at once.
    """
    for attempt in range(BUSY_TRIES):
        try:
            collection.modify(configuration=dict(configuration))
            return
        except Exception as exc:
            if "database is locked" not in str(exc) or attempt == BUSY_TRIES - 1:
                raise
            time.sleep(0.05 * 2**attempt)


class ChromaBackend:
    """Documents and vectors in one chromadb collection (cosine space): a ``Backend``.

    Args:
        collection: a chromadb collection created with cosine space and no embedding function
            (:func:`open_collection`).
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


Opener = Callable[[], ChromaBackend]


def ephemeral_opener(name: str, *, own: bool = True) -> Opener:
    """Collection ``name`` in this process's chromadb ``EphemeralClient``, dropped on close.

    Every ephemeral client in a process shares one backend: the collection is all that is
    the store's own. ``own=False`` (a name the user chose, which another store of the process
    may open too) makes it shared: the store then remembers no searches.
    """
    check_collection(name)

    def backend() -> ChromaBackend:
        import chromadb

        client = chromadb.EphemeralClient()

        def drop() -> None:
            try:
                client.delete_collection(name)
            except Exception as exc:  # already gone: nothing to free
                log.debug("collection_drop_failed", error=str(exc))

        return ChromaBackend(open_collection(client, name), on_close=drop, private=own)

    return backend


def folder_opener(directory: str, collection: str, *, read_only: bool) -> Opener:
    """Collection ``collection`` of the chromadb database in ``directory``.

    Read-only, a folder this process cannot write to is read from a temporary copy, removed
    when the backend closes.
    """
    if read_only:

        def reader() -> ChromaBackend:
            import chromadb

            data, cleanup = readable_copy(directory)
            client = chromadb.PersistentClient(path=data)

            def close() -> None:
                _close_client(client)
                cleanup()

            try:
                found = open_collection(client, collection, read_only=True)
            except BaseException:
                close()
                raise
            return ChromaBackend(found, on_close=close)

        return reader

    def writer() -> ChromaBackend:
        import chromadb

        client = chromadb.PersistentClient(path=directory)
        return ChromaBackend(  # the store that opens it holds the folder's writer lock
            open_collection(client, collection),
            on_close=lambda: _close_client(client),
            private=True,
            database=os.path.join(directory, MARKER),
        )

    return writer


def checked_folder_opener(
    directory: str, collection: str, *, create: bool, read_only: bool
) -> Opener:
    """:func:`folder_opener`, once ``directory`` is known to be a store (or, to create one, empty).

    Raises:
        ConfigError: ``directory`` is a file and the store was to be created, or a bad name.
        StoreError: ``directory`` is a folder that is not a store, or (``create=False`` or
            ``read_only``) holds no store.
    """
    check_store_folder(directory, MARKER, create=create, read_only=read_only)
    check_collection(collection)
    return folder_opener(directory, collection, read_only=read_only)


def _close_client(client: Any) -> None:
    """Release a persistent client's database (chromadb shares one per path in a process).

    Until the last client of a path is closed, chromadb keeps the database open, so a folder
    removed and made again in the same process (a failed first ``index``) could not be reopened.
    """
    close = getattr(client, "close", None)  # chromadb 1.x; older clients hold nothing to free
    if callable(close):
        try:
            close()
        except Exception as exc:  # already closed or gone: nothing to free
            log.debug("chroma_close_failed", error=str(exc))


def server_opener(
    host: str, port: int, collection: str, *, ssl: bool, headers: Mapping[str, str] | None
) -> Opener:
    """Collection ``collection`` on the chroma server at ``host:port``."""
    if not isinstance(host, str) or not host:
        raise ConfigError(f"host must be a non-empty string, got {host!r}")
    check_int(port, "port", minimum=1, maximum=65535)
    check_collection(collection)

    def backend() -> ChromaBackend:
        import chromadb

        try:
            client = chromadb.HttpClient(host=host, port=port, ssl=ssl, headers=dict(headers or {}))
        except Exception as exc:
            raise StoreError(f"cannot reach chroma server {host}:{port}: {exc}") from exc
        return ChromaBackend(open_collection(client, collection))

    return backend
