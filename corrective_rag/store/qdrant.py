"""The Qdrant backend: both legs in one Qdrant collection, dense and BM25 sparse vectors.

Each document is one Qdrant point carrying two named vectors: ``dense`` (the embedding, cosine)
and ``bm25`` (a sparse vector of BM25 term-frequency weights from the package's own tokenizer,
scored with Qdrant's ``Modifier.IDF`` so the corpus idf is kept by the server; see
:mod:`corrective_rag.store.sparse_bm25`), and a payload holding the id, the text, the metadata
and the distinct terms (indexed, for :meth:`QdrantBackend.idf`). :class:`QdrantBackend` is the
store's :class:`~corrective_rag.store.backend.Backend` *and* its lexical leg, so
:class:`~corrective_rag.store.hybrid.HybridStore` keeps no BM25 index beside it; open one with
:meth:`HybridStore.qdrant <corrective_rag.store.hybrid.HybridStore.qdrant>`.

Consistency: a document's two legs are one point, written by one upsert, so a write is visible
in both legs or in neither, on one machine or a cluster, with no rollback to get wrong. A write
of many documents is applied point by point: if it fails midway, the documents written are whole
and the call raises :class:`StoreError`; repeating it (upsert is idempotent) finishes it.

BM25 needs the corpus's mean document length. It is measured on the first write into an empty
collection (or given as ``avgdl``) and kept in the collection's metadata, so every client
weighs documents alike; later writes reuse it (as Lucene-style engines do with a frozen norm).
Needs ``pip install corrective_rag[qdrant]``.
"""

from __future__ import annotations

import contextlib
import os
import threading
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from corrective_rag.errors import ConfigError
from corrective_rag.observe.logs import get_logger
from corrective_rag.store.backend import DEFAULT_COLLECTION, Record, Run, Where
from corrective_rag.store.failures import foreign_failures
from corrective_rag.store.folders import check_store_folder
from corrective_rag.store.qdrant_where import METADATA_KEY, to_qdrant_filter
from corrective_rag.store.sparse_bm25 import K1, B, bm25_idf, document_vector, query_vector
from corrective_rag.text import tokenize
from corrective_rag.types import Document

__all__ = [
    "QDRANT_MARKER",
    "QdrantBackend",
    "check_settings",
    "import_qdrant",
    "point_id",
    "store_opener",
]

log: Any = get_logger(__name__)

QDRANT_MARKER = "meta.json"  # qdrant-client's local mode writes it in a folder it opens
DENSE, SPARSE = "dense", "bm25"
ID, TEXT, TERMS = "id", "text", "terms"
AVGDL_KEY = "crag_bm25_avgdl"  # in the collection's metadata
# For a collection created by another tool, without our metadata: fastembed's BM25 default.
_DEFAULT_AVGDL = 256.0
_WRITE_BATCH = 256  # points per upsert request: bounded request size, few round trips
_PAGE = 1024  # points per scroll page
# Point ids must be UUIDs or integers: a document id maps to a fixed UUID in this namespace.
_NAMESPACE = uuid.UUID("6f1c2d3e-8a4b-4c5d-9e6f-7a8b9c0d1e2f")


def import_qdrant() -> Any:
    """The ``qdrant_client`` module, or a ConfigError saying which extra brings it."""
    try:
        import qdrant_client
    except ImportError as exc:
        raise ConfigError(
            "the Qdrant backend needs qdrant-client: pip install 'corrective_rag[qdrant]'"
        ) from exc
    return qdrant_client


def point_id(doc_id: str) -> str:
    """The Qdrant point id of a document id (UUID 5, the same in every process)."""
    return str(uuid.uuid5(_NAMESPACE, doc_id))


def check_settings(collection: object, avgdl: object) -> None:
    """Qdrant's collection name (1-255 characters) and ``avgdl`` (positive, or None)."""
    if not isinstance(collection, str) or not 1 <= len(collection) <= 255:
        raise ConfigError(f"collection name must have 1-255 characters, got {collection!r}")
    if avgdl is not None and (
        isinstance(avgdl, bool) or not isinstance(avgdl, int | float) or not avgdl > 0
    ):
        raise ConfigError(f"avgdl must be a positive number or None, got {avgdl!r}")


class QdrantBackend:
    """Documents as Qdrant points with a dense and a BM25 sparse vector (a ``Backend``).

    Args:
        client: a ``qdrant_client.QdrantClient``.
        collection: the collection name (created on the first write).
        avgdl: the mean document length (in tokens) BM25 normalises by; ``None`` measures it
            on the first write into an empty collection. Ignored when the collection has one.
        drop_on_close: delete the collection on :meth:`close` (an in-memory store).
        local: the client is qdrant-client's local mode, which is not thread-safe: its calls
            are serialised.
    """

    def __init__(
        self,
        client: Any,
        *,
        collection: str = DEFAULT_COLLECTION,
        avgdl: float | None = None,
        drop_on_close: bool = False,
        local: bool = False,
    ) -> None:
        check_settings(collection, avgdl)
        self.client = client
        self.collection_name = collection
        self.lexical = self  # the engine scores BM25 itself: no index beside
        self._avgdl = float(avgdl) if avgdl is not None else None
        self._drop_on_close = drop_on_close
        self._lock = threading.RLock() if local else None
        self._exists = False
        self._recorded: float | None = None  # avgdl as recorded in the collection

    @contextlib.contextmanager
    def _call(self, what: str) -> Iterator[None]:
        """One client call: errors become StoreError; serialised for a local-mode client."""
        with self._lock or contextlib.nullcontext(), foreign_failures(f"qdrant {what}"):
            yield

    def _collection_exists(self) -> bool:
        if not self._exists:
            with self._call("collection_exists"):
                self._exists = bool(self.client.collection_exists(self.collection_name))
        return self._exists

    # -- reading -----------------------------------------------------------------------------

    def count(self) -> int:
        """Number of stored points."""
        if not self._collection_exists():
            return 0
        with self._call("count"):
            return int(self.client.count(self.collection_name, exact=True).count)

    def ids(self, where: Where | None) -> list[str]:
        """Ids of the documents whose metadata satisfy ``where`` (every id for ``None``)."""
        flt = to_qdrant_filter(where) if where is not None else None
        if not self._collection_exists():
            return []
        found: list[str] = []
        offset = None
        while True:
            with self._call("scroll"):
                points, offset = self.client.scroll(
                    self.collection_name,
                    limit=_PAGE,
                    offset=offset,
                    with_payload=[ID],
                    scroll_filter=flt,
                )
            found.extend(p.payload[ID] for p in points)
            if offset is None:
                return found

    def fetch(self, ids: Sequence[str], *, vectors: bool = False) -> dict[str, Record]:
        """The stored records among ``ids``; with ``vectors``, each with its dense vector."""
        if not ids or not self._collection_exists():
            return {}
        with self._call("retrieve"):
            points = self.client.retrieve(
                self.collection_name,
                [point_id(i) for i in ids],
                with_payload=True,
                with_vectors=[DENSE] if vectors else False,
            )
        return {
            p.payload[ID]: Record(
                _document(p.payload),
                np.asarray(p.vector[DENSE], dtype=np.float32) if vectors else None,
            )
            for p in points
        }

    def dense(self, vector: npt.NDArray[np.float32], depth: int, where: Where | None) -> Run:
        """The ``depth`` nearest ``(id, cosine similarity)`` pairs within ``where``."""
        return self.dense_many(np.asarray([vector], dtype=np.float32), depth, where)[0]

    def dense_many(
        self, vectors: npt.NDArray[np.float32], depth: int, where: Where | None
    ) -> list[Run]:
        """:meth:`dense` of each row of ``vectors``: one ``query_batch_points`` request for all."""
        probes = [np.asarray(v, dtype=np.float32).tolist() for v in vectors]
        return self._queries(probes, DENSE, depth, where)

    def sparse(self, query: str, depth: int, where: Where | None) -> Run:
        """The ``depth`` best ``(id, BM25 score)`` pairs, scored by the server's IDF modifier."""
        indices, values = query_vector(tokenize(query))
        if not indices:  # a query of stop words only matches nothing lexically
            return []
        from qdrant_client import models

        probe = models.SparseVector(indices=indices, values=values)
        return self._queries([probe], SPARSE, depth, where)[0]

    def _queries(self, probes: list[Any], using: str, depth: int, where: Where | None) -> list[Run]:
        """Each probe's ``depth`` best ``(id, score)`` pairs of vector ``using``, in one request."""
        flt = to_qdrant_filter(where) if where else None
        if not probes or not self._collection_exists():
            return [[] for _ in probes]
        from qdrant_client import models

        requests = [
            models.QueryRequest(
                query=probe, using=using, filter=flt, limit=depth, with_payload=[ID]
            )
            for probe in probes
        ]
        with self._call("query_batch_points"):
            answers = self.client.query_batch_points(self.collection_name, requests)
        return [[(p.payload[ID], float(p.score)) for p in a.points] for a in answers]

    def idf(self, token: str) -> float:
        """Corpus idf of ``token`` as the BM25 leg weighs it (Qdrant's IDF modifier)."""
        if not self._collection_exists():
            return 0.0
        from qdrant_client import models

        has_term = models.Filter(
            must=[models.FieldCondition(key=TERMS, match=models.MatchValue(value=token))]
        )
        with self._call("count"):
            total = self.client.count(self.collection_name, exact=True).count
            containing = self.client.count(self.collection_name, count_filter=has_term).count
        return bm25_idf(total, containing) if containing else 0.0

    # -- writing -----------------------------------------------------------------------------

    def write(
        self,
        documents: Sequence[Document],
        embeddings: npt.NDArray[np.float32],
        previous: Mapping[str, Record],
    ) -> None:
        """Upsert one point per document (both legs at once), in bounded requests."""
        tokens = [tokenize(d.text) for d in documents]
        avgdl = self._avgdl_for(tokens, embeddings.shape[1])
        points = [
            _point(d, v, t, avgdl) for d, v, t in zip(documents, embeddings, tokens, strict=True)
        ]
        for start in range(0, len(points), _WRITE_BATCH):
            with self._call("upsert"):
                self.client.upsert(
                    self.collection_name, points[start : start + _WRITE_BATCH], wait=True
                )

    def delete(self, ids: Sequence[str]) -> None:
        """Delete points (both legs at once); unknown ids are ignored."""
        if not ids or not self._collection_exists():
            return
        from qdrant_client import models

        with self._call("delete"):
            self.client.delete(
                self.collection_name,
                points_selector=models.PointIdsList(points=[point_id(i) for i in ids]),
                wait=True,
            )

    def _avgdl_for(self, tokens: Sequence[Sequence[str]], dimension: int) -> float:
        """The collection's avgdl; the first write into an empty one measures and records it."""
        if self._collection_exists():
            if self._recorded is None:
                with self._call("get_collection"):
                    info = self.client.get_collection(self.collection_name)
                meta = getattr(info.config, "metadata", None) or {}
                stored = float(meta[AVGDL_KEY]) if meta.get(AVGDL_KEY) else None
                self._recorded = stored or self._avgdl or _DEFAULT_AVGDL
            return self._recorded
        avgdl = self._avgdl or max(1.0, sum(map(len, tokens)) / len(tokens))
        with self._call("create_collection"):
            _create_collection(self.client, self.collection_name, dimension, avgdl)
        self._exists = True
        self._recorded = avgdl
        return avgdl

    def close(self) -> None:
        """Close the client (an in-memory store drops its collection first)."""
        try:
            if self._drop_on_close and self._exists:
                self.client.delete_collection(self.collection_name)
            self.client.close()
        except Exception as exc:  # already gone: nothing to free
            log.debug("qdrant_close_failed", error=str(exc))


def client_opener(target: str, *, api_key: str | None = None, **backend: Any) -> Callable[[], Any]:
    """How to open a :class:`QdrantBackend` on ``target``, when the store first needs it.

    ``target``: ``":memory:"`` (this process only, dropped on close), an ``http(s)://`` URL (a
    server or cluster) or a folder (local mode, one process at a time).
    """

    def opener() -> QdrantBackend:
        qdrant = import_qdrant()
        with foreign_failures(f"qdrant open {target}"):
            if target == ":memory:":
                client = qdrant.QdrantClient(":memory:")
                return QdrantBackend(client, drop_on_close=True, local=True, **backend)
            if target.startswith(("http://", "https://")):
                client = qdrant.QdrantClient(url=target, api_key=api_key)
                return QdrantBackend(client, **backend)
            return QdrantBackend(qdrant.QdrantClient(path=target), local=True, **backend)

    return opener


def store_opener(
    target: str | os.PathLike[str],
    *,
    api_key: str | None = None,
    collection: str | None = None,
    avgdl: float | None = None,
    create: bool = True,
) -> Callable[[], QdrantBackend]:
    """:func:`client_opener` for :meth:`HybridStore.qdrant`, every argument checked first.

    ``target``: as for :func:`client_opener`; a folder is resolved and must be a Qdrant store
    (or, with ``create``, missing or empty). ``collection``: a fresh name for ``":memory:"``
    unless given, else the store's default.

    Raises:
        ConfigError: a bad setting, or ``target`` is a file and the store was to be created.
        StoreError: a folder that is not a Qdrant store (or, with ``create=False``, holds none).
    """
    where = os.fspath(target) if isinstance(target, os.PathLike) else target
    if not isinstance(where, str) or not where:
        raise ConfigError(f"target must be a URL, ':memory:' or a folder, got {target!r}")
    memory = where == ":memory:"
    if collection is None:
        collection = f"crag-{uuid.uuid4().hex}" if memory else DEFAULT_COLLECTION
    check_settings(collection, avgdl)
    if not memory and not where.startswith(("http://", "https://")):
        where = str(Path(where).resolve())
        check_store_folder(where, QDRANT_MARKER, create=create, read_only=False)
    return client_opener(where, api_key=api_key, collection=collection, avgdl=avgdl)


def _create_collection(client: Any, name: str, dimension: int, avgdl: float) -> None:
    """Create collection ``name`` with both named vectors, ``avgdl`` and the payload indexes."""
    from qdrant_client import models

    client.create_collection(
        name,
        vectors_config={
            DENSE: models.VectorParams(size=dimension, distance=models.Distance.COSINE)
        },
        sparse_vectors_config={SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)},
        metadata={AVGDL_KEY: avgdl, "crag_bm25_k1": K1, "crag_bm25_b": B},
    )
    with warnings.catch_warnings():  # local mode says it has no payload indexes
        warnings.simplefilter("ignore", UserWarning)
        for field in (TERMS, ID):
            client.create_payload_index(name, field, field_schema=models.PayloadSchemaType.KEYWORD)


def _point(doc: Document, vector: np.ndarray, tokens: list[str], avgdl: float) -> Any:
    """The point for ``doc``: its embedding ``vector``, BM25 weights of ``tokens``, payload."""
    from qdrant_client import models

    named: dict[str, Any] = {DENSE: vector.tolist()}
    indices, values = document_vector(tokens, avgdl)
    if indices:  # a text of stop words only has no lexical side
        named[SPARSE] = models.SparseVector(indices=indices, values=values)
    payload = {
        ID: doc.id,
        TEXT: doc.text,
        METADATA_KEY: dict(doc.metadata),
        TERMS: sorted(set(tokens)),
    }
    return models.PointStruct(id=point_id(doc.id), vector=named, payload=payload)


def _document(payload: Mapping[str, Any]) -> Document:
    return Document(payload[ID], payload[TEXT], dict(payload.get(METADATA_KEY) or {}))
