"""HybridStore: BM25 and dense legs over the same documents, fused into one ranking.

The one store a user meets. Its engine is a :class:`~corrective_rag.store.backend.Backend`,
chosen by constructor: chromadb with our BM25 index beside it (:meth:`HybridStore.in_memory`,
:meth:`HybridStore.open` for a folder, :meth:`HybridStore.connect` for a chroma server), Qdrant
with both legs in one engine (:meth:`HybridStore.qdrant`), or any backend object passed to the
constructor. The checks, the fusion, the id bookkeeping, the filters and the writes are here,
written once for every backend.

Where the backend scores no BM25 itself (chromadb), the store keeps a BM25 index beside it and
writes go to the backend first, then BM25; if either fails the other is rolled back, so both
sides always hold the same documents (:mod:`~corrective_rag.store.atomic`).

Construction is cheap: it checks arguments (and, for :meth:`~HybridStore.open`, the folder and
the writer lock) but touches no engine. The heavy step, opening the backend and loading the
BM25 side (checked against the backend's ids, or built from its whole corpus for a server or an
in-memory store), is :meth:`HybridStore.warm_up`: done on first use, or explicitly by a caller
who wants the cost (and any error) up front.
"""

from __future__ import annotations

import contextlib
import os
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Any

from corrective_rag.errors import ConfigError, InputError, StoreError
from corrective_rag.inputs import check_int
from corrective_rag.logs import get_logger
from corrective_rag.models.onnx_embedder import default_embedder
from corrective_rag.protocols import Embedder
from corrective_rag.store import chroma, qdrant
from corrective_rag.store.atomic import Sides, delete_documents, write_documents
from corrective_rag.store.backend import FETCH_PAGE, Backend, Record, embed_documents
from corrective_rag.store.bm25 import BM25Index
from corrective_rag.store.checks import (
    MAX_TOP_K,
    check_candidates,
    check_not_stored,
    check_parts,
    check_search,
    check_term,
    check_unique,
    check_where,
    validate_documents,
    validate_ids,
)
from corrective_rag.store.failures import embedding_failures, foreign_failures
from corrective_rag.store.folders import check_store_folder
from corrective_rag.store.fusion import ConvexFusion, Fusion
from corrective_rag.store.persist import SavedBM25, WriterLock, load_bm25
from corrective_rag.store.search import (
    DEFAULT_ALPHA,
    DEFAULT_CANDIDATES,
    LEGS,  # noqa: F401 (importable from here, as before the outline moved to search.py)
    Runs,
    SearchMemo,
    fused_search,
    leg_search,
)
from corrective_rag.tracing import lane, traced_retrieval
from corrective_rag.types import Document, Hit

__all__ = ["DEFAULT_ALPHA", "DEFAULT_CANDIDATES", "DEFAULT_COLLECTION", "MAX_TOP_K", "HybridStore"]

log = get_logger(__name__)

DEFAULT_COLLECTION = "corrective_rag"


class HybridStore:
    """Documents indexed for BM25 and dense search over one backend, searched together and fused.

    Prefer the classmethods :meth:`in_memory`, :meth:`open`, :meth:`connect` and :meth:`qdrant`.

    Args:
        backend: the engine (a :class:`~corrective_rag.store.backend.Backend`), or a callable
            returning one, called by :meth:`warm_up` (so that opening it is lazy).
        collection: the name of the BM25 side's files in ``directory`` (3-512 characters).
        embedder: computes embeddings; ``default_embedder()`` (the offline all-MiniLM-L6-v2
            run by ONNX Runtime, float32) by default, created lazily.
        fusion: how the legs are fused; ``ConvexFusion(0.5)`` by default (equal weights on
            min-max normalised scores: the best mean nDCG@10 over the four benchmark
            collections, and better than either leg alone on each); ``RRFusion()`` for RRF.
        candidates: how many candidates each leg hands to fusion (at least ``top_k`` is used).
        directory: for persistent stores, where the BM25 side is saved.
        read_only: refuse writes; a persistent store's files are never written (a BM25 side
            that disagrees with the backend is rebuilt in memory only).
        prefer_fast_bm25: use ``rank_bm25_rs`` when installed (identical scores to rank_bm25).
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
    ) -> None:
        chroma.check_collection(collection)
        check_candidates(candidates)
        check_parts(fusion, embedder)
        if not isinstance(backend, Backend) and not callable(backend):
            raise ConfigError("backend must be a Backend or a callable returning one")
        self.embedder: Embedder = embedder or default_embedder()
        self.fusion: Fusion = fusion or ConvexFusion(DEFAULT_ALPHA)
        self.candidates = candidates
        self.collection_name = collection
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
    def in_memory(cls, *, collection: str | None = None, **kwargs: Any) -> HybridStore:
        """A store that lives in this process only (chromadb ``EphemeralClient``, BM25 beside).

        Every ephemeral client in a process shares one backend, so each store gets its own
        collection (a fresh name unless given), dropped again on :meth:`close`.
        """
        name = collection or f"crag-{uuid.uuid4().hex}"
        chroma.check_collection(name)
        return cls(chroma.ephemeral_opener(name), collection=name, **kwargs)

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        create: bool = True,
        read_only: bool = False,
        **kwargs: Any,
    ) -> HybridStore:
        """Open a persistent store (chromadb, BM25 beside) in directory ``path``; a writer locks it.

        Only a store, an empty folder or a missing one is accepted: a folder holding other
        files is refused before anything is written into it.

        Args:
            path: the store's folder.
            create: make a new store when ``path`` is missing or empty; with ``False`` such a
                folder is refused (every command but ``index`` opens this way).
            read_only: open for reading only: no lock is taken, nothing is written, and several
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
        check_store_folder(directory, chroma.MARKER, create=create, read_only=read_only)
        collection = kwargs.get("collection", DEFAULT_COLLECTION)
        chroma.check_collection(collection)
        opener = chroma.folder_opener(directory, collection, read_only=read_only)
        if read_only:
            return cls(opener, directory=directory, read_only=True, **kwargs)
        os.makedirs(directory, exist_ok=True)
        # Lock before chroma opens its files, so a second writer is refused before it touches them.
        lock = WriterLock(directory)
        try:
            return cls(opener, directory=directory, _writer=lock, **kwargs)
        except BaseException:
            lock.release()
            raise

    @classmethod
    def connect(
        cls,
        host: str,
        port: int,
        *,
        ssl: bool = False,
        headers: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> HybridStore:
        """Use a chroma server (``chroma run``); the BM25 side is built from its documents.

        Nothing is fetched until :meth:`warm_up` (or the first use), which reads the server's
        whole corpus to build BM25. Writes made through this store keep both sides in step;
        writes other clients make to the server are seen by the dense leg at once and by BM25
        only after reconnecting.
        """
        if not isinstance(host, str) or not host:
            raise ConfigError(f"host must be a non-empty string, got {host!r}")
        check_int(port, "port", minimum=1, maximum=65535)
        collection = kwargs.get("collection", DEFAULT_COLLECTION)
        chroma.check_collection(collection)
        opener = chroma.server_opener(host, port, collection, ssl=ssl, headers=headers)
        return cls(opener, **kwargs)

    @classmethod
    def qdrant(
        cls,
        target: str | os.PathLike[str],
        *,
        api_key: str | None = None,
        collection: str | None = None,
        avgdl: float | None = None,
        create: bool = True,
        **kwargs: Any,
    ) -> HybridStore:
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
        where = os.fspath(target) if isinstance(target, os.PathLike) else target
        if not isinstance(where, str) or not where:
            raise ConfigError(f"target must be a URL, ':memory:' or a folder, got {target!r}")
        memory = where == ":memory:"
        if collection is None:
            collection = f"crag-{uuid.uuid4().hex}" if memory else DEFAULT_COLLECTION
        name = collection
        qdrant.check_settings(name, avgdl)
        if not memory and not where.startswith(("http://", "https://")):
            where = str(Path(where).resolve())
            check_store_folder(where, qdrant.MARKER, create=create, read_only=False)
        opener = qdrant.client_opener(where, api_key=api_key, collection=name, avgdl=avgdl)
        return cls(opener, **kwargs)

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
                self._memo = SearchMemo()
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

    # -- reading -----------------------------------------------------------------------------

    def __len__(self) -> int:
        return self.count()

    def count(self) -> int:
        """Number of documents stored."""
        self._check_open()
        bm25 = self._bm25
        if bm25 is not None:
            return len(bm25)
        with foreign_failures("count"):
            return self._dense.count()

    def ids(self, *, where: Mapping[str, Any] | None = None) -> list[str]:
        """All document ids (in insertion order with BM25 beside, else the engine's order).

        With ``where``, those whose metadata match.
        """
        self._check_open()
        check_where(where)
        bm25 = self._bm25
        with foreign_failures("ids"):
            if bm25 is None:
                return self._dense.ids(where)
            if where is None:
                return bm25.ids()
            allowed = set(self._dense.ids(where))
        return [i for i in bm25.ids() if i in allowed]

    def sources(self) -> set[str]:
        """Every distinct ``source`` metadata value: the files the documents came from."""
        self._check_open()
        found: set[str] = set()
        with foreign_failures("sources"):
            ids = self._dense.ids(None)
            for start in range(0, len(ids), FETCH_PAGE):
                for record in self._dense.fetch(ids[start : start + FETCH_PAGE]).values():
                    source = record.document.metadata.get("source")
                    if source is not None:
                        found.add(str(source))
        return found

    def get(self, ids: Iterable[str]) -> list[Document]:
        """The stored documents among ``ids``, in the order asked; unknown ids are skipped."""
        self._check_open()
        wanted = validate_ids(ids)
        with foreign_failures("get"):
            found = self._documents(wanted) if wanted else {}
        return [found[i] for i in wanted if i in found]

    def idf(self, term: str) -> float:
        """Corpus idf of ``term`` as the BM25 leg weighs it, after the store's tokenizer.

        A stop word (no token) gives 0.0, as does a term absent from the corpus.

        Raises:
            InputError: ``term`` is not a string or tokenizes into more than one token.
        """
        self._check_open()
        token = check_term(term)
        if token is None:
            return 0.0
        bm25 = self._bm25
        if bm25 is not None:
            return bm25.idf(token)
        lexical = self._dense.lexical
        assert lexical is not None  # a backend without one has BM25 beside
        with foreign_failures("idf"):
            return lexical.idf(token)

    @traced_retrieval
    def retrieve(
        self, query: str, *, top_k: int = 10, where: Mapping[str, Any] | None = None
    ) -> list[Hit]:
        """Search both legs, fuse, and return at most ``top_k`` hits ranked 1..n.

        Args:
            query: free text.
            top_k: how many hits to return (1..10,000).
            where: a chromadb-style metadata filter (e.g. ``{"lang": "en"}``,
                ``{"$or": [{"year": 2020}, {"year": {"$in": [2021, 2022]}}]}``), applied to
                both legs, whatever the backend.
        """
        self._check_open()
        with foreign_failures("retrieve"):  # no lock: readers run in parallel (see _runs)
            return fused_search(
                query,
                top_k,
                where,
                candidates=self.candidates,
                fusion=self.fusion,
                run_legs=self._runs,
                fetch=self._documents,
                memo=self._memo,
            )

    def retrieve_many(
        self,
        queries: Sequence[str],
        *,
        top_k: int = 10,
        where: Mapping[str, Any] | None = None,
        lanes: Sequence[str] | None = None,
    ) -> list[list[Hit]]:
        """:meth:`retrieve` of each query, in order, their embeddings computed in one batch.

        The loop searches all its queries of one iteration this way: one forward pass of the
        embedding model instead of one per query. A subclass that overrides :meth:`retrieve`
        has it called per query instead, so that what it adds still applies. ``lanes``: the
        loop's name for each query, recorded on its search's trace span.
        """
        if isinstance(queries, str | bytes) or not isinstance(queries, Iterable):
            raise InputError("queries must be a sequence of strings")
        queries = list(queries)
        names = list(lanes or ())
        if type(self).retrieve is not HybridStore.retrieve:
            return [self.retrieve(q, top_k=top_k, where=where) for q in queries]
        self._check_open()
        for query in queries:
            check_search(query, top_k, where)
        if not queries:
            return []
        with foreign_failures("retrieve"):
            vectors = self.embedder.embed(queries)
        found = []
        for i, (query, vector) in enumerate(zip(queries, vectors, strict=True)):
            with lane(names[i]) if i < len(names) else contextlib.nullcontext():
                hits = self._retrieve_embedded(query, top_k=top_k, where=where, vector=vector)
            found.append(hits)
        return found

    @traced_retrieval
    def _retrieve_embedded(
        self, query: str, *, top_k: int, where: Mapping[str, Any] | None, vector: Any
    ) -> list[Hit]:
        """:meth:`retrieve` with the query's embedding already computed (one traced search)."""
        with foreign_failures("retrieve"):
            return fused_search(
                query,
                top_k,
                where,
                candidates=self.candidates,
                fusion=self.fusion,
                run_legs=partial(self._runs, vector=vector),
                fetch=self._documents,
                memo=self._memo,
            )

    @traced_retrieval
    def search(
        self,
        query: str,
        *,
        leg: str,
        top_k: int = 10,
        where: Mapping[str, Any] | None = None,
    ) -> list[Hit]:
        """Search one leg only (``"bm25"`` or ``"dense"``), unfused: for ablations and debugging.

        Each hit's ``score`` is the leg's own score (BM25 score or cosine similarity).
        """
        self._check_open()
        with foreign_failures("search"):
            return leg_search(query, leg, top_k, where, run_legs=self._runs, fetch=self._documents)

    def _runs(
        self,
        query: str,
        depth: int,
        where: Mapping[str, Any] | None,
        legs: Sequence[str],
        *,
        vector: Any = None,
    ) -> Runs | None:
        """Each leg's ``depth`` best ``(id, score)`` pairs; ``None``: the filter matches nothing.

        Takes no store lock: the embedder, the BM25 index (a snapshot per query) and the
        backends are each safe for concurrent readers (a local-mode Qdrant client serialises
        its own calls). A query that runs during a write may see one leg before the write and
        the other after it; hits whose document vanished are dropped
        (:func:`~corrective_rag.store.search.fetched_hits`). ``vector``: the query's embedding,
        when the caller computed it (:meth:`retrieve_many`).
        """
        backend, bm25 = self._dense, self._bm25
        runs: Runs = {}
        if bm25 is not None:
            allowed = set(backend.ids(where)) if where else None
            if allowed is not None and not allowed:
                return None
            if "bm25" in legs:
                runs["bm25"] = bm25.top_k(query, depth, allowed=allowed)
        elif "bm25" in legs:
            assert backend.lexical is not None  # a backend without one has BM25 beside
            runs["bm25"] = backend.lexical.sparse(query, depth, where)
        if "dense" in legs:
            if vector is None:
                vector = self.embedder.embed([query])[0]
            runs["dense"] = backend.dense(vector, depth, where)
        return runs

    def _documents(self, ids: list[str]) -> dict[str, Document]:
        """The stored documents among ``ids``, by id: what hits are made of."""
        return {i: r.document for i, r in self._dense.fetch(ids).items()}

    # -- writing -----------------------------------------------------------------------------

    def add(self, documents: Iterable[Document]) -> None:
        """Add new documents.

        Raises:
            DuplicateIdError: an id appears twice in ``documents``.
            InputError: a document is invalid or its id is already stored (use :meth:`upsert`).
            StoreError: the write failed; with BM25 beside, nothing was written (a backend
                that scores BM25 itself keeps the documents it wrote whole; write again).
        """
        self._write(validate_documents(documents), replace=False)

    def upsert(self, documents: Iterable[Document]) -> None:
        """Add documents or replace those with the same id; unchanged texts are not re-embedded."""
        self._write(validate_documents(documents), replace=True)

    def delete(self, ids: Iterable[str]) -> int:
        """Delete documents by id; unknown ids are ignored. Returns how many were deleted."""
        wanted = validate_ids(ids)
        check_unique(wanted)
        with self._lock, self._forgetting():
            self._check_writable()
            beside = self._bm25 is not None
            with foreign_failures("delete"):
                previous = self._dense.fetch(wanted, vectors=beside) if wanted else {}
                if previous and not beside:
                    self._dense.delete(list(previous))
            if not previous:
                return 0
            if beside:
                self._stamp = delete_documents(self._sides(), previous, self._stamp)
        log.debug("store_deleted", documents=len(previous))
        return len(previous)

    def _write(self, docs: list[Document], *, replace: bool) -> None:
        if not docs:
            return
        with self._lock, self._forgetting():
            self._check_writable()
            with foreign_failures("write"):
                previous: dict[str, Record] = self._dense.fetch([d.id for d in docs], vectors=True)
            check_not_stored(previous, replace=replace)
            with embedding_failures():  # the model may be missing: nothing is written yet
                embeddings = embed_documents(self.embedder, docs, previous)
            if self._bm25 is None:  # one engine holds both legs: one write reaches both
                with foreign_failures("write"):
                    self._dense.write(docs, embeddings, previous)
            else:
                self._stamp = write_documents(
                    self._sides(), docs, embeddings, previous, self._stamp
                )
        log.debug("store_written", documents=len(docs), replace=replace)

    @contextlib.contextmanager
    def _forgetting(self) -> Iterator[None]:
        """The remembered searches are forgotten when the write inside ends, however it ends."""
        try:
            yield
        finally:
            if self._memo is not None:
                self._memo.forget()

    def _sides(self) -> Sides:
        """Backend and BM25 beside, for :mod:`~corrective_rag.store.atomic` to write all or none."""
        directory = self.directory
        saved = SavedBM25(directory, self.collection_name) if directory is not None else None
        assert self._beside is not None  # only stores with BM25 beside write through here
        return Sides(self._dense, self._beside, saved)

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

    def __enter__(self) -> HybridStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
