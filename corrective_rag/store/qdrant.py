"""QdrantStore: hybrid retrieval with both legs server-side, in one Qdrant collection.

Each document is one Qdrant point carrying two named vectors: ``dense`` (the embedding, cosine)
and ``bm25`` (a sparse vector of BM25 term-frequency weights from the package's own tokenizer,
scored with Qdrant's ``Modifier.IDF`` so the corpus idf is kept by the server; see
:mod:`corrective_rag.store.sparse_bm25`). Both legs are queried in one request, and fused here,
client-side, with the same :mod:`~corrective_rag.store.fusion` as :class:`HybridStore`, so every
hit keeps each leg's rank and score.

Consistency: a document's two legs are one point, written by one upsert, so a write is visible
in both legs or in neither, on one machine or a cluster, with no rollback to get wrong. A write
of many documents is applied point by point: if it fails midway, the documents written are whole
and the call raises :class:`StoreError`; repeating it (upsert is idempotent) finishes it.

BM25 needs the corpus's mean document length. It is measured on the first write into an empty
collection (or given as ``avgdl``) and kept in the collection's metadata, so every client
weighs documents alike; later writes reuse it (as Lucene-style engines do with a frozen norm).

Open with :meth:`in_memory` (tests), :meth:`open` (a local folder; one process) or
:meth:`connect` (a Qdrant server or cluster URL). Needs ``pip install corrective_rag[qdrant]``.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any

import numpy as np

from corrective_rag.errors import ConfigError, StoreError
from corrective_rag.logs import get_logger
from corrective_rag.models.embeddings import SentenceTransformerEmbedder
from corrective_rag.protocols import Embedder
from corrective_rag.store.checks import (
    check_candidates,
    check_not_stored,
    check_parts,
    check_term,
    check_unique,
    check_where,
    validate_documents,
    validate_ids,
)
from corrective_rag.store.failures import embedding_failures, foreign_failures
from corrective_rag.store.fusion import ConvexFusion, Fusion
from corrective_rag.store.qdrant_points import (
    DENSE,
    ID,
    TERMS,
    TEXT,
    create_collection,
    document_of,
    leg_requests,
    make_point,
    point_id,
    recorded_avgdl,
    reuse_or_embed,
)
from corrective_rag.store.qdrant_where import METADATA_KEY, to_qdrant_filter
from corrective_rag.store.search import (
    DEFAULT_ALPHA,
    DEFAULT_CANDIDATES,
    Runs,
    fused_search,
    leg_search,
)
from corrective_rag.store.sparse_bm25 import bm25_idf
from corrective_rag.text import tokenize
from corrective_rag.types import Document, Hit

__all__ = ["DEFAULT_COLLECTION", "QdrantStore"]

log = get_logger(__name__)

DEFAULT_COLLECTION = "corrective_rag"
# For a collection created by another tool, without our metadata: fastembed's BM25 default.
_DEFAULT_AVGDL = 256.0
_WRITE_BATCH = 256  # points per upsert request: bounded request size, few round trips
_PAGE = 1024  # points per scroll page


def _import_qdrant() -> Any:
    try:
        import qdrant_client
    except ImportError as exc:
        raise ConfigError(
            "QdrantStore needs qdrant-client: pip install 'corrective_rag[qdrant]'"
        ) from exc
    return qdrant_client


def _calling(what: str) -> contextlib.AbstractContextManager[None]:
    """Turn a client failure (server down, timeout, bad request) into the package's StoreError."""
    return foreign_failures(f"qdrant {what}")


class QdrantStore:
    """Documents as Qdrant points with a dense and a BM25 sparse vector, searched and fused.

    Prefer the classmethods :meth:`in_memory`, :meth:`open` and :meth:`connect`.

    Args:
        client: a ``qdrant_client.QdrantClient``.
        collection: the collection name (created on the first write).
        embedder: as for :class:`HybridStore` (offline all-MiniLM-L6-v2 by default, lazy).
        fusion: as for :class:`HybridStore` (``ConvexFusion(0.5)`` by default).
        candidates: how many candidates each leg hands to fusion (at least ``top_k``).
        avgdl: the mean document length (in tokens) BM25 normalises by; ``None`` measures it
            on the first write into an empty collection. Ignored when the collection has one.
    """

    def __init__(
        self,
        client: Any,
        *,
        collection: str = DEFAULT_COLLECTION,
        embedder: Embedder | None = None,
        fusion: Fusion | None = None,
        candidates: int = DEFAULT_CANDIDATES,
        avgdl: float | None = None,
        _drop_on_close: bool = False,
        _local: bool = False,
    ) -> None:
        if not isinstance(collection, str) or not 1 <= len(collection) <= 255:
            raise ConfigError(f"collection name must have 1-255 characters, got {collection!r}")
        check_candidates(candidates)
        if avgdl is not None and (
            isinstance(avgdl, bool) or not isinstance(avgdl, int | float) or not avgdl > 0
        ):
            raise ConfigError(f"avgdl must be a positive number or None, got {avgdl!r}")
        check_parts(fusion, embedder)
        self.embedder: Embedder = embedder or SentenceTransformerEmbedder()
        self.fusion: Fusion = fusion or ConvexFusion(DEFAULT_ALPHA)
        self.candidates = candidates
        self.collection_name = collection
        self._client = client
        self._avgdl = float(avgdl) if avgdl is not None else None
        self._drop_on_close = _drop_on_close
        # Writes are serialised (check-then-write must not interleave); reads run in parallel,
        # except in qdrant-client's local mode, which is not thread-safe.
        self._lock = threading.RLock()
        self._local = _local
        self._closed = False
        self._exists = False
        self._recorded: float | None = None  # avgdl as recorded in the collection

    # -- constructors ------------------------------------------------------------------------

    @classmethod
    def in_memory(cls, *, collection: str | None = None, **kwargs: Any) -> QdrantStore:
        """A store in this process only (qdrant-client's local mode), dropped on close."""
        client = _import_qdrant().QdrantClient(":memory:")
        name = collection or f"crag-{uuid.uuid4().hex}"
        return cls(client, collection=name, _drop_on_close=True, _local=True, **kwargs)

    @classmethod
    def open(cls, path: str, **kwargs: Any) -> QdrantStore:
        """A store in a local folder (qdrant-client's local mode; one process at a time)."""
        if not isinstance(path, str) or not path:
            raise ConfigError(f"path must be a non-empty string, got {path!r}")
        with _calling(f"open {path}"):
            client = _import_qdrant().QdrantClient(path=path)
        return cls(client, _local=True, **kwargs)

    @classmethod
    def connect(cls, url: str, *, api_key: str | None = None, **kwargs: Any) -> QdrantStore:
        """A Qdrant server or cluster at ``url`` (e.g. ``http://qdrant:6333``)."""
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ConfigError(f"url must start with http:// or https://, got {url!r}")
        with _calling(f"connect {url}"):
            client = _import_qdrant().QdrantClient(url=url, api_key=api_key)
        return cls(client, **kwargs)

    # -- the collection ----------------------------------------------------------------------

    @contextlib.contextmanager
    def _call(self, what: str) -> Iterator[None]:
        """One client call: errors become StoreError; serialised for a local-mode client."""
        with self._lock if self._local else contextlib.nullcontext(), _calling(what):
            yield

    def _collection_exists(self) -> bool:
        if not self._exists:
            with self._call("collection_exists"):
                self._exists = bool(self._client.collection_exists(self.collection_name))
        return self._exists

    def _stored_avgdl(self) -> float | None:
        with self._call("get_collection"):
            info = self._client.get_collection(self.collection_name)
        return recorded_avgdl(info)

    def _create(self, dimension: int, avgdl: float) -> None:
        with self._call("create_collection"):
            create_collection(self._client, self.collection_name, dimension, avgdl)
        self._exists = True

    # -- reading -----------------------------------------------------------------------------

    def __len__(self) -> int:
        return self.count()

    def count(self) -> int:
        """Number of documents stored."""
        self._check_open()
        if not self._collection_exists():
            return 0
        with self._call("count"):
            return int(self._client.count(self.collection_name, exact=True).count)

    def ids(self, *, where: Mapping[str, Any] | None = None) -> list[str]:
        """All document ids (in the engine's order); with ``where``, those whose metadata match."""
        check_where(where)
        return [p.payload[ID] for p in self._scroll([ID], where=where)]

    def sources(self) -> set[str]:
        """Every distinct ``source`` metadata value: the files the documents came from."""
        found = set()
        for point in self._scroll([METADATA_KEY]):
            source = (point.payload.get(METADATA_KEY) or {}).get("source")
            if isinstance(source, str):
                found.add(source)
        return found

    def _scroll(
        self, payload: list[str], *, where: Mapping[str, Any] | None = None
    ) -> Iterator[Any]:
        self._check_open()
        if not self._collection_exists():
            return
        flt = to_qdrant_filter(where) if where is not None else None
        offset = None
        while True:
            with self._call("scroll"):
                points, offset = self._client.scroll(
                    self.collection_name,
                    limit=_PAGE,
                    offset=offset,
                    with_payload=payload,
                    scroll_filter=flt,
                )
            yield from points
            if offset is None:
                return

    def get(self, ids: Iterable[str]) -> list[Document]:
        """The stored documents among ``ids``, in the order asked; unknown ids are skipped."""
        self._check_open()
        wanted = validate_ids(ids)
        found = self._documents(wanted)
        return [found[i] for i in wanted if i in found]

    def _documents(self, ids: Sequence[str]) -> dict[str, Document]:
        if not ids or not self._collection_exists():
            return {}
        with self._call("retrieve"):
            points = self._client.retrieve(
                self.collection_name, [point_id(i) for i in ids], with_payload=True
            )
        return {p.payload[ID]: document_of(p.payload) for p in points}

    def idf(self, term: str) -> float:
        """Corpus idf of ``term`` as the BM25 leg weighs it (Qdrant's IDF modifier).

        A stop word (no token) gives 0.0, as does a term absent from the corpus.

        Raises:
            InputError: ``term`` is not a string or tokenizes into more than one token.
        """
        from qdrant_client import models

        self._check_open()
        token = check_term(term)
        if token is None or not self._collection_exists():
            return 0.0
        has_term = models.Filter(
            must=[models.FieldCondition(key=TERMS, match=models.MatchValue(value=token))]
        )
        with self._call("count"):
            total = self._client.count(self.collection_name, exact=True).count
            containing = self._client.count(self.collection_name, count_filter=has_term).count
        return bm25_idf(total, containing) if containing else 0.0

    def retrieve(
        self, query: str, *, top_k: int = 10, where: Mapping[str, Any] | None = None
    ) -> list[Hit]:
        """Search both legs in one request, fuse, and return at most ``top_k`` hits ranked 1..n.

        Args:
            query: free text.
            top_k: how many hits to return (1..10,000).
            where: a chroma-style metadata filter, as for :class:`HybridStore` (see
                :mod:`corrective_rag.store.qdrant_where`), applied to both legs.
        """
        self._check_open()
        return fused_search(
            query,
            top_k,
            where,
            candidates=self.candidates,
            fusion=self.fusion,
            run_legs=self._runs,
            fetch=self._documents,
        )

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
        return leg_search(query, leg, top_k, where, run_legs=self._runs, fetch=self._documents)

    def _runs(
        self, query: str, depth: int, where: Mapping[str, Any] | None, legs: Sequence[str]
    ) -> Runs | None:
        """Each leg's ``depth`` best ``(id, score)`` pairs, both legs in one batch request."""
        flt = to_qdrant_filter(where) if where else None
        if not self._collection_exists():
            return None
        requests = leg_requests(query, legs, depth, flt, self.embedder)
        runs: Runs = {leg: [] for leg in legs}
        if requests:
            with self._call("query_batch_points"):
                answers = self._client.query_batch_points(
                    self.collection_name, list(requests.values())
                )
            for leg, answer in zip(requests, answers, strict=True):
                runs[leg] = [(p.payload[ID], float(p.score)) for p in answer.points]
        return runs

    # -- writing -----------------------------------------------------------------------------

    def add(self, documents: Iterable[Document]) -> None:
        """Add new documents.

        Raises:
            DuplicateIdError: an id appears twice in ``documents``.
            InputError: a document is invalid or its id is already stored (use :meth:`upsert`).
            StoreError: the write failed (see the module docstring for what was written).
        """
        self._write(validate_documents(documents), replace=False)

    def upsert(self, documents: Iterable[Document]) -> None:
        """Add documents or replace those with the same id; unchanged texts are not re-embedded."""
        self._write(validate_documents(documents), replace=True)

    def delete(self, ids: Iterable[str]) -> int:
        """Delete documents by id (both legs at once); unknown ids are ignored.

        Returns:
            How many were deleted.
        """
        from qdrant_client import models

        wanted = validate_ids(ids)
        check_unique(wanted)
        with self._lock:
            self._check_open()
            gone = list(self._documents(wanted))
            if not gone:
                return 0
            with self._call("delete"):
                self._client.delete(
                    self.collection_name,
                    points_selector=models.PointIdsList(points=[point_id(i) for i in gone]),
                    wait=True,
                )
        log.debug("store_deleted", documents=len(gone))
        return len(gone)

    def _write(self, docs: list[Document], *, replace: bool) -> None:
        if not docs:
            return
        with self._lock:
            self._check_open()
            previous = self._previous([d.id for d in docs])
            check_not_stored(previous, replace=replace)
            with embedding_failures():  # the model may be missing: nothing is written yet
                vectors = reuse_or_embed(self.embedder, docs, previous)
            tokens = [tokenize(d.text) for d in docs]
            avgdl = self._avgdl_for(tokens, vectors.shape[1])
            points = [
                make_point(d, v, t, avgdl) for d, v, t in zip(docs, vectors, tokens, strict=True)
            ]
            for start in range(0, len(points), _WRITE_BATCH):
                with self._call("upsert"):
                    self._client.upsert(
                        self.collection_name, points[start : start + _WRITE_BATCH], wait=True
                    )
        log.debug("store_written", documents=len(docs), replace=replace)

    def _previous(self, ids: Sequence[str]) -> dict[str, tuple[str, np.ndarray]]:
        """Stored ``id -> (text, dense vector)`` among ``ids``."""
        if not self._collection_exists():
            return {}
        with self._call("retrieve"):
            points = self._client.retrieve(
                self.collection_name,
                [point_id(i) for i in ids],
                with_payload=[ID, TEXT],
                with_vectors=[DENSE],
            )
        return {
            p.payload[ID]: (p.payload[TEXT], np.asarray(p.vector[DENSE], dtype=np.float32))
            for p in points
        }

    def _avgdl_for(self, tokens: Sequence[Sequence[str]], dimension: int) -> float:
        """The collection's avgdl; the first write into an empty one measures and records it."""
        if self._collection_exists():
            if self._recorded is None:
                self._recorded = self._stored_avgdl() or self._avgdl or _DEFAULT_AVGDL
            return self._recorded
        avgdl = self._avgdl or max(1.0, sum(map(len, tokens)) / len(tokens))
        self._create(dimension, avgdl)
        self._recorded = avgdl
        return avgdl

    # -- lifetime ----------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("the store is closed")

    def close(self) -> None:
        """Close the client (in-memory stores drop their collection first)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                if self._drop_on_close and self._exists:
                    self._client.delete_collection(self.collection_name)
                self._client.close()
            except Exception as exc:  # already gone: nothing to free
                log.debug("qdrant_close_failed", error=str(exc))

    def __enter__(self) -> QdrantStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
