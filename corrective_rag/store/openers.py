"""Where a :class:`~corrective_rag.store.hybrid.HybridStore` keeps its dense side, opened lazily.

Each function returns an *opener*: a callable the store calls on its first use
(:meth:`~corrective_rag.store.hybrid.HybridStore.warm_up`), so that constructing a store
touches no chromadb client. :func:`check_store_folder` is the check a persistent store's folder
passes before anything is written into it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from corrective_rag.errors import ConfigError, StoreError
from corrective_rag.logs import get_logger
from corrective_rag.store.chroma import ChromaIndex, open_collection, readable_copy, store_state
from corrective_rag.store.dense import DenseIndex

__all__ = [
    "Opener",
    "check_store_folder",
    "ephemeral_opener",
    "folder_opener",
    "server_opener",
]

log = get_logger(__name__)

Opener = Callable[[], DenseIndex]


def check_store_folder(directory: str, *, create: bool, read_only: bool) -> None:
    """Refuse a ``directory`` that is not a store (or, to create one, empty or missing).

    Raises:
        ConfigError: ``directory`` is a file and the store was to be created.
        StoreError: ``directory`` is a file, a folder that is not a store, or (``create=False``
            or ``read_only``) holds no store.
    """
    state = store_state(directory)
    if state == "file":  # a bad argument for a writer; for a reader, no store to read
        error = ConfigError if create and not read_only else StoreError
        raise error(f"store not found: {directory} exists and is not a directory")
    if state == "other":
        raise StoreError(
            f"{directory} is not a corrective_rag store: it holds other files "
            "(index into a new or empty folder)"
        )
    if state != "store" and (read_only or not create):
        raise StoreError(f"store not found: {directory} (create it with 'corrective-rag index')")


def ephemeral_opener(name: str) -> Opener:
    """Collection ``name`` in this process's chromadb ``EphemeralClient``, dropped on close.

    Every ephemeral client in a process shares one backend: the collection is all that is
    the store's own.
    """

    def dense() -> DenseIndex:
        import chromadb

        client = chromadb.EphemeralClient()

        def drop() -> None:
            try:
                client.delete_collection(name)
            except Exception as exc:  # already gone: nothing to free
                log.debug("collection_drop_failed", error=str(exc))

        return ChromaIndex(open_collection(client, name), on_close=drop)

    return dense


def folder_opener(directory: str, collection: str, *, read_only: bool) -> Opener:
    """Collection ``collection`` of the chromadb database in ``directory``.

    Read-only, a folder this process cannot write to is read from a temporary copy, removed
    when the index closes.
    """
    if read_only:

        def reader() -> DenseIndex:
            import chromadb

            data, cleanup = readable_copy(directory)
            client = chromadb.PersistentClient(path=data)
            return ChromaIndex(open_collection(client, collection), on_close=cleanup)

        return reader

    def writer() -> DenseIndex:
        import chromadb

        client = chromadb.PersistentClient(path=directory)
        return ChromaIndex(open_collection(client, collection))

    return writer


def server_opener(
    host: str, port: int, collection: str, *, ssl: bool, headers: Mapping[str, str] | None
) -> Opener:
    """Collection ``collection`` on the chroma server at ``host:port``."""

    def dense() -> DenseIndex:
        import chromadb

        try:
            client = chromadb.HttpClient(host=host, port=port, ssl=ssl, headers=dict(headers or {}))
        except Exception as exc:
            raise StoreError(f"cannot reach chroma server {host}:{port}: {exc}") from exc
        return ChromaIndex(open_collection(client, collection))

    return dense
