"""HybridStore: BM25 and dense legs over the same documents, fused into one ranking.

The one store a user meets. Its engine is a :class:`~corrective_rag.store.backend.Backend`,
chosen by constructor: chromadb with our BM25 index beside it (:meth:`HybridStore.in_memory`,
:meth:`HybridStore.open` for a folder, :meth:`HybridStore.connect` for a chroma server), Qdrant
with both legs in one engine (:meth:`HybridStore.qdrant`), or any backend object passed to the
constructor. The constructors, the lazy open (:meth:`HybridStore.warm_up`) and the close are
the store's lifetime (:mod:`~corrective_rag.store.lifetime`, its base class); here is what an
open store does: the reads, the searches (the outline in :mod:`~corrective_rag.store.search`)
and the writes, written once for every backend.

Where the backend scores no BM25 itself (chromadb), the store keeps a BM25 index beside it and
writes go to the backend first, then BM25; if either fails the other is rolled back, so both
sides always hold the same documents (:mod:`~corrective_rag.store.atomic`).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterable, Iterator, Mapping, MutableMapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from corrective_rag.errors import InputError
from corrective_rag.observe.logs import get_logger
from corrective_rag.observe.spans import lane, traced_retrieval, traced_retrievals
from corrective_rag.store.atomic import Sides, delete_documents, write_documents
from corrective_rag.store.backend import FETCH_PAGE, Record, embed_documents
from corrective_rag.store.checks import (
    check_not_stored,
    check_term,
    check_unique,
    check_where,
    validate_documents,
    validate_ids,
)
from corrective_rag.store.embedders import Labelled, describe, mismatch
from corrective_rag.store.failures import embedding_failures, foreign_failures
from corrective_rag.store.lifetime import StoreLifetime
from corrective_rag.store.persist import SavedBM25
from corrective_rag.store.search import Runs, fused_search_many, leg_search
from corrective_rag.types import Document, Hit

# HybridStore: its home is corrective_rag
__all__: list[str] = []

log: Any = get_logger(__name__)

# Query embeddings by text, kept by a caller across searches (the loop keeps one per run).
QueryVectors = MutableMapping[str, npt.NDArray[np.float32]]


class HybridStore(StoreLifetime):
    """Documents indexed for BM25 and dense search over one backend, searched together and fused.

    Prefer the classmethods :meth:`in_memory`, :meth:`open`, :meth:`connect` and :meth:`qdrant`
    (they, :meth:`warm_up` and :meth:`close` are the store's lifetime, in its base class
    :class:`~corrective_rag.store.lifetime.StoreLifetime`).

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

    Attributes:
        data_source_id: what the store is, the same each time it is opened, for traces
            (``gen_ai.data_source.id``): ``chroma:memory`` (``chroma:memory#NAME`` given a
            collection name), ``chroma:/folder#collection``, ``chroma:http://host:port#
            collection``, ``qdrant:...``; ``collection`` for a store built on a backend.
    """

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

    def vectors(self, documents: Iterable[Document]) -> list[npt.NDArray[np.float32] | None]:
        """Each document's stored vector, where it is what embedding its text now would give.

        A document gets the vector stored under its id when the stored text is exactly its
        text and the backend records that this store's embedder wrote its vectors (chromadb
        keeps that note; a backend that keeps none, such as Qdrant, cannot tell, and gets
        ``None`` for every document); otherwise ``None``: a document never stored, or whose
        text was cut, refined or given a title since. A judge that embeds the same text with
        the same model reads these instead of embedding the documents again.

        Raises:
            InputError: ``documents`` is not an iterable of Document.
        """
        self._check_open()
        if isinstance(documents, Document):
            raise InputError("documents must be an iterable of Document, not one Document")
        docs = list(documents)
        if not all(isinstance(d, Document) for d in docs):
            raise InputError("documents must be an iterable of Document")
        backend = self._dense
        if not docs or not isinstance(backend, Labelled):
            return [None for _ in docs]
        with foreign_failures("vectors"):
            stored = backend.fetch(list(dict.fromkeys(d.id for d in docs)), vectors=True)
            label = backend.embedder_label
        found: list[npt.NDArray[np.float32] | None] = []
        for doc in docs:
            record = stored.get(doc.id)
            vector = record.embedding if record and record.document.text == doc.text else None
            if vector is not None and label != describe(self.embedder, vector.shape[-1]):
                vector = None  # written by another embedder (or one the store cannot name)
            found.append(vector)
        return found

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
        return self._fused([query], top_k, where)[0]

    def retrieve_many(
        self,
        queries: Sequence[str],
        *,
        top_k: int = 10,
        where: Mapping[str, Any] | None = None,
        lanes: Sequence[str] | None = None,
        lexical: Sequence[bool] | None = None,
        vectors: QueryVectors | None = None,
    ) -> list[list[Hit]]:
        """:meth:`retrieve` of each query, in order, searched together.

        The loop searches all its queries of one iteration this way, with the same hits as a
        :meth:`retrieve` per query for fewer calls: one forward pass of the embedding model,
        one dense query and one fetch of the hits' documents for all the queries (BM25 scores
        each query). A subclass that overrides :meth:`retrieve` has it called per query
        instead, so that what it adds still applies. ``lanes``: the loop's name for each query,
        recorded on its search's trace span (one per query, each lasting the whole search).
        ``lexical``: one flag per query; a flagged query is searched by BM25 alone (the hits of
        ``search(query, leg="bm25")``), with no embedding: for keyword queries such as the
        loop's feedback lane (a subclass's :meth:`retrieve` searches it as any other).
        ``vectors``: query embeddings the caller keeps, by text (the loop keeps one per run): a
        query found there is not embedded again, and those embedded now are added to it.
        """
        if isinstance(queries, str | bytes) or not isinstance(queries, Iterable):
            raise InputError("queries must be a sequence of strings")
        queries = list(queries)
        if type(self).retrieve is not HybridStore.retrieve:  # each in its lane, as the loop's own
            named: list[str | None] = [*(lanes or ()), *[None] * len(queries)]
            found = []
            for query, name in zip(queries, named, strict=False):
                with lane(name) if name else contextlib.nullcontext():
                    found.append(self.retrieve(query, top_k=top_k, where=where))
            return found
        self._check_open()
        with traced_retrievals(self, queries, lanes or (), top_k=top_k, where=where) as record:
            return record(self._fused(queries, top_k, where, lexical, vectors))

    def _fused(
        self,
        queries: Sequence[str],
        top_k: int,
        where: Mapping[str, Any] | None,
        lexical: Sequence[bool] | None = None,
        vectors: QueryVectors | None = None,
    ) -> list[list[Hit]]:
        """Each query's legs, fused and cut to ``top_k`` (BM25's alone for a ``lexical`` one)."""
        run_legs = self._runs if vectors is None else functools.partial(self._runs, vectors=vectors)
        with foreign_failures("retrieve"):  # no lock: readers run in parallel (see _runs)
            return fused_search_many(
                queries,
                top_k,
                where,
                candidates=self.candidates,
                fusion=self.fusion,
                run_legs=run_legs,
                fetch=self._documents,
                memo=self._memo,
                lexical=lexical,
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
        queries: Sequence[str],
        depth: int,
        where: Mapping[str, Any] | None,
        legs: Sequence[str],
        vectors: QueryVectors | None = None,
    ) -> Sequence[Runs | None]:
        """Per query, each leg's ``depth`` best ``(id, score)`` pairs; ``None``: none matches.

        BM25 scores each query; the dense legs are one batch of embeddings (of the queries not
        in ``vectors``, which gains them) and one backend call.
        Takes no store lock: the embedder, the BM25 index (a snapshot per query) and the
        backends are each safe for concurrent readers (a local-mode Qdrant client serialises
        its own calls). A query that runs during a write may see one leg before the write and
        the other after it; hits whose document vanished are dropped
        (:func:`~corrective_rag.store.search.found_hits`).
        """
        backend, bm25 = self._dense, self._bm25
        allowed = None
        if bm25 is not None and where:
            allowed = set(backend.ids(where))
            if not allowed:
                return [None for _ in queries]
        runs: list[Runs] = [{} for _ in queries]
        if "bm25" in legs:
            for query, found in zip(queries, runs, strict=True):
                if bm25 is not None:
                    found["bm25"] = bm25.top_k(query, depth, allowed=allowed)
                else:
                    assert backend.lexical is not None  # a backend without one has BM25 beside
                    found["bm25"] = backend.lexical.sparse(query, depth, where)
        if "dense" in legs:
            embedded = self._embed_queries(queries, vectors)
            try:
                dense = backend.dense_many(embedded, depth, where)
            except Exception as exc:
                wrong = self._mismatch(exc)
                if wrong is None:
                    raise
                raise wrong from exc
            for found, run in zip(runs, dense, strict=True):
                found["dense"] = run
        return runs

    def _embed_queries(
        self, queries: Sequence[str], vectors: QueryVectors | None
    ) -> npt.NDArray[np.float32]:
        """The queries' embeddings, one row each: those not in ``vectors`` in one batch."""
        if vectors is None:
            return self.embedder.embed(list(queries))
        missing = [q for q in dict.fromkeys(queries) if q not in vectors]
        if missing:
            vectors.update(zip(missing, self.embedder.embed(missing), strict=True))
        return np.stack([vectors[q] for q in queries])

    def _mismatch(self, exc: BaseException) -> Exception | None:
        """The error naming both embedders when ``exc`` is a vector width mismatch, else None."""
        backend = self._dense
        recorded = backend.embedder_label if isinstance(backend, Labelled) else None
        return mismatch(exc, self.embedder, recorded)

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
            try:
                if self._bm25 is None:  # one engine holds both legs: one write reaches both
                    with foreign_failures("write"):
                        self._dense.write(docs, embeddings, previous)
                else:
                    self._stamp = write_documents(
                        self._sides(), docs, embeddings, previous, self._stamp
                    )
            except Exception as exc:
                wrong = self._mismatch(exc)
                if wrong is None:
                    raise
                raise wrong from exc
            self._label(embeddings.shape[1])
        log.debug("store_written", documents=len(docs), replace=replace)

    def _label(self, width: int) -> None:
        """Record which embedder wrote the vectors, where the backend keeps such a note."""
        backend = self._dense
        label = describe(self.embedder, width)
        if isinstance(backend, Labelled) and backend.embedder_label != label:
            with foreign_failures("recording the embedder"):
                backend.set_embedder_label(label)

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
