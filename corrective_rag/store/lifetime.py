"""A store's life: its parts, its constructor for each engine, the lazy open, the close.

:class:`StoreLifetime` is the base of :class:`~corrective_rag.store.hybrid.HybridStore`, which
adds what an open store does (reads, searches, writes). Here: the arguments every store checks,
the constructors (:meth:`~StoreLifetime.in_memory`, :meth:`~StoreLifetime.open`,
:meth:`~StoreLifetime.connect` for chromadb with our BM25 index beside it,
:meth:`~StoreLifetime.qdrant` for both legs in Qdrant), each naming its engine in
:mod:`~corrective_rag.store.engines` rather than importing it, :meth:`~StoreLifetime.warm_up`,
the heavy step done on first use, and :meth:`~StoreLifetime.close`.

Construction is cheap: it checks arguments (and, for :meth:`~StoreLifetime.open`, the folder
and the writer lock) but touches no engine. :meth:`~StoreLifetime.warm_up` opens the backend
and loads the BM25 side (checked against the backend's ids, or built from its whole corpus for a
server or an in-memory store): done on first use, or explicitly by a caller who wants the cost
(and any error) up front.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from corrective_rag.errors import ConfigError, StoreError
from corrective_rag.models.onnx_embedder import default_embedder
from corrective_rag.observe.logs import get_logger
from corrective_rag.protocols import Embedder
from corrective_rag.store.backend import DEFAULT_COLLECTION, Backend
from corrective_rag.store.bm25 import BM25Index
from corrective_rag.store.checks import check_candidates, check_collection, check_parts
from corrective_rag.store.engines import open_engine
from corrective_rag.store.failures import foreign_failures
from corrective_rag.store.fusion import ConvexFusion, Fusion
from corrective_rag.store.persist import WriterLock, load_bm25
from corrective_rag.store.search import DEFAULT_ALPHA, DEFAULT_CANDIDATES, SearchMemo
from corrective_rag.text.urls import mask_url

__all__ = ["StoreLifetime"]

log: Any = get_logger(__name__)

_Store = TypeVar("_Store", bound="StoreLifetime")


def _data_source_id(engine: str, where: str, collection: str | None) -> str:
    """What a store is, for a trace's ``gen_ai.data_source.id``: the same store, the same id.

    ``{engine}:{where}#{collection}``: ``chroma:/srv/index#corrective_rag``,
    ``qdrant:https://host:6333#docs``; an in-memory store is ``chroma:memory``, or
    ``chroma:memory#wiki`` when given a collection name (its engine's collection has a fresh
    name per store, which no trace should carry). Credentials in ``where`` are masked.
    """
    return f"{engine}:{where}#{collection}" if collection else f"{engine}:{where}"


def _qdrant_source(target: str | os.PathLike[str], collection: str | None) -> str:
    """The data source id of a Qdrant store on ``target`` (one the engine accepted)."""
    where = os.fspath(target)
    if where == ":memory:":
        return _data_source_id("qdrant", "memory", collection)
    if where.startswith(("http://", "https://")):
        where = mask_url(where.rstrip("/"))  # a password or key in the URL is not the store
    else:
        where = str(Path(where).resolve())
    return _data_source_id("qdrant", where, collection or DEFAULT_COLLECTION)


class StoreLifetime:
    """A store's parts and lifetime: :class:`~corrective_rag.store.hybrid.HybridStore`'s base.

    The arguments are :class:`~corrective_rag.store.hybrid.HybridStore`'s (documented there).
    """

    def __init__(
        self,
        backend: Backend | Callable[[], Backend],
        *,
        collection: str = DEFAULT_COLLECTION,
        embedder: Embedder | None = None,
        fusion: Fusion | None = None,
        candidates: int = DEFAULT_CANDIDATES,
        directory: str | None = None,
        read_only: bool = False,
        prefer_fast_bm25: bool = True,
        _writer: WriterLock | None = None,
        _source_id: str | None = None,
    ) -> None:
        check_collection(collection)
        check_candidates(candidates)
        check_parts(fusion, embedder)
        if not isinstance(backend, Backend) and not callable(backend):
            raise ConfigError("backend must be a Backend or a callable returning one")
        self.embedder: Embedder = embedder or default_embedder()
        self.fusion: Fusion = fusion or ConvexFusion(DEFAULT_ALPHA)
        self.candidates = candidates
        self.collection_name = collection
        # what the store is, for a trace (gen_ai.data_source.id): set by each constructor
        self.data_source_id: str = _source_id or collection
        self.directory = directory
        self.read_only = read_only
        self._source = backend
        self._prefer_fast = prefer_fast_bm25
        self._lock = threading.RLock()  # held by writers (and by warm_up)
        self._writer = _writer
        self._closed = False
        self._stamp: str | None = None
        self._backend: Backend | None = None
        self._beside: BM25Index | None = None  # our BM25 index, for a backend with no lexical leg
        self._memo: SearchMemo | None = None  # for a backend only this store writes to

    # -- constructors ------------------------------------------------------------------------

    @classmethod
    def in_memory(cls: type[_Store], *, collection: str | None = None, **kwargs: Any) -> _Store:
        """A store that lives in this process only (chromadb ``EphemeralClient``, BM25 beside).

        Every ephemeral client in a process shares one backend, so each store gets its own
        collection (a fresh name unless given), dropped again on :meth:`close`. A store given a
        ``collection`` name shares it with any other store of the process given that name, so
        it remembers no searches (docs/store.md, "The search memo").
        """
        name = collection or f"crag-{uuid.uuid4().hex}"
        engine = open_engine("chroma", name, own=collection is None)
        source = _data_source_id("chroma", "memory", collection)
        return cls(engine, collection=name, _source_id=source, **kwargs)

    @classmethod
    def open(
        cls: type[_Store],
        path: str | os.PathLike[str],
        *,
        create: bool = True,
        read_only: bool = False,
        **kwargs: Any,
    ) -> _Store:
        """Open a persistent store (chromadb, BM25 beside) in directory ``path``; a writer locks it.

        Only a store, an empty folder or a missing one is accepted: a folder holding other
        files is refused before anything is written into it.

        Args:
            path: the store's folder.
            create: make a new store when ``path`` is missing or empty; with ``False`` such a
                folder is refused (every command but ``index`` opens this way).
            read_only: open for reading only: no lock is taken, none of the store's files is
                written (chromadb itself writes its bookkeeping, docs/store.md), and several
                readers (and one writer) may use the folder at once. A folder this process
                cannot write to (chromadb cannot open its database there) is read from a
                temporary copy, removed on :meth:`close`.
            **kwargs: as for the constructor.

        Raises:
            ConfigError: ``path`` is a file and the store was to be created.
            StoreError: ``path`` is a file, a folder that is not a store, or (``create=False`` or
                ``read_only``) holds no store.
            StoreLockedError: another writer holds the directory.
        """
        directory = str(Path(path).resolve())
        collection = kwargs.get("collection", DEFAULT_COLLECTION)
        opener = open_engine(
            "chroma-folder", directory, collection, create=create, read_only=read_only
        )
        source = _data_source_id("chroma", directory, collection)
        if read_only:
            return cls(opener, directory=directory, read_only=True, _source_id=source, **kwargs)
        os.makedirs(directory, exist_ok=True)
        # Lock before chroma opens its files, so a second writer is refused before it touches them.
        lock = WriterLock(directory)
        try:
            return cls(opener, directory=directory, _writer=lock, _source_id=source, **kwargs)
        except BaseException:
            lock.release()
            raise

    @classmethod
    def connect(
        cls: type[_Store],
        host: str,
        port: int,
        *,
        ssl: bool = False,
        headers: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> _Store:
        """Use a chroma server (``chroma run``); the BM25 side is built from its documents.

        Nothing is fetched until :meth:`warm_up` (or the first use), which reads the server's
        whole corpus to build BM25. Writes made through this store keep both sides in step;
        writes other clients make to the server are seen by the dense leg at once and by BM25
        only after reconnecting.
        """
        collection = kwargs.get("collection", DEFAULT_COLLECTION)
        opener = open_engine("chroma-server", host, port, collection, ssl=ssl, headers=headers)
        where = f"{'https' if ssl else 'http'}://{host}:{port}"
        return cls(opener, _source_id=_data_source_id("chroma", where, collection), **kwargs)

    @classmethod
    def qdrant(
        cls: type[_Store],
        target: str | os.PathLike[str],
        *,
        api_key: str | None = None,
        collection: str | None = None,
        avgdl: float | None = None,
        create: bool = True,
        **kwargs: Any,
    ) -> _Store:
        """Both legs in Qdrant: a server, a local-mode folder, or this process only.

        Each document is one point with a dense and a BM25 sparse vector, so a write reaches
        both legs at once (see :mod:`~corrective_rag.store.qdrant`). Needs
        ``pip install 'corrective_rag[qdrant]'``.

        Args:
            target: an ``http(s)://`` URL (a Qdrant server or cluster), ``":memory:"`` (this
                process only, dropped on close) or a folder (qdrant-client's local mode, one
                process at a time).
            api_key: sent to a server.
            collection: the collection name (1-255 characters; created on the first write;
                a fresh one for ``":memory:"`` unless given).
            avgdl: the mean document length BM25 normalises by; ``None`` measures it on the
                first write into an empty collection.
            create: for a folder: make a new store when it is missing or empty; with ``False``
                such a folder is refused. A folder holding other files is always refused.
            **kwargs: as for the constructor (``embedder``, ``fusion``, ``candidates``).

        Raises:
            ConfigError: a bad setting, or ``target`` is a file and the store was to be created.
            StoreError: a folder that is not a Qdrant store (or, with ``create=False``, holds
                none).
        """
        settings = {"api_key": api_key, "collection": collection, "avgdl": avgdl}
        opener = open_engine("qdrant", target, create=create, **settings)
        return cls(opener, _source_id=_qdrant_source(target, collection), **kwargs)

    # -- the heavy step ----------------------------------------------------------------------

    def warm_up(self) -> None:
        """Open the backend and load the BM25 side (once; later calls return at once).

        Every other method calls it first, so calling it is optional: it moves the cost, and
        errors such as an unreachable server or an inconsistent store, to a moment of the
        caller's choosing.

        Raises:
            StoreError: the backend cannot be opened.
            StoreConsistencyError: the BM25 side disagrees with the backend and cannot be
                rebuilt.
        """
        if self._backend is not None:
            return
        with self._lock:
            self._check_open()
            if self._backend is not None:
                return
            with foreign_failures("opening the store"):
                source = self._source
                backend = source if isinstance(source, Backend) else source()
            if backend.lexical is None:
                try:
                    self._beside, self._stamp = load_bm25(
                        backend,
                        self.directory,
                        self.collection_name,
                        prefer_fast=self._prefer_fast,
                        read_only=self.read_only,
                    )
                except BaseException:
                    backend.close()
                    raise
            if getattr(backend, "private", False):
                self._memo = SearchMemo(version=getattr(backend, "version", backend.count))
            self._backend = backend
            log.debug("store_warmed_up", directory=self.directory)

    @property
    def _dense(self) -> Backend:
        self.warm_up()
        assert self._backend is not None  # set by warm_up
        return self._backend

    @property
    def _bm25(self) -> BM25Index | None:
        """The BM25 index kept beside the backend; None when the backend scores BM25 itself."""
        self.warm_up()
        return self._beside

    # -- lifetime ----------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("the store is closed")

    def _check_writable(self) -> None:
        self._check_open()
        if self.read_only:
            raise StoreError("the store was opened read-only")

    def close(self) -> None:
        """Release the writer lock and what the backend holds.

        That is an in-memory collection, a read-only copy or a client; a store never warmed up
        touches nothing.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._backend is not None:
                self._backend.close()
            if self._writer is not None:
                self._writer.release()

    def __enter__(self: _Store) -> _Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
