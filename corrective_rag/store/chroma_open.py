"""Opening a chromadb collection: in this process's memory, in a folder, or on a chroma server.

The openers (:func:`ephemeral_opener`, :func:`folder_opener`, :func:`checked_folder_opener`,
:func:`server_opener`) return a callable the store calls on its first use, so constructing a
store touches no client; each gives a :class:`~corrective_rag.store.chroma.ChromaBackend`.
Collections are opened with ``embedding_function=None`` (chromadb's default function would try
to download an ONNX model) and the dense index settings of :data:`HNSW`; a folder this process
cannot write to is read from a copy, since chromadb writes to its database even to read.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from typing import Any

from corrective_rag.errors import ConfigError, StoreError
from corrective_rag.inputs import check_int
from corrective_rag.observe.logs import get_logger
from corrective_rag.store.checks import check_collection
from corrective_rag.store.chroma import ChromaBackend
from corrective_rag.store.folders import check_store_folder
from corrective_rag.store.persist import LOCK_NAME

__all__ = [
    "HNSW",
    "MARKER",
    "Opener",
    "checked_folder_opener",
    "ephemeral_opener",
    "folder_opener",
    "open_collection",
    "readable_copy",
    "server_opener",
]

log: Any = get_logger(__name__)

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
