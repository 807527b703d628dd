"""How :class:`~corrective_rag.store.qdrant.QdrantStore` lays documents out in Qdrant.

One document is one point: id ``point_id(doc.id)``, a ``dense`` vector (cosine), a ``bm25``
sparse vector (term-frequency weights scored with the server's IDF modifier) and a payload
holding the id, the text, the metadata and the distinct terms (indexed, for :meth:`idf`).
Everything here builds or reads those values; nothing calls the server.
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from corrective_rag.protocols import Embedder
from corrective_rag.store.qdrant_where import METADATA_KEY
from corrective_rag.store.sparse_bm25 import K1, B, document_vector, query_vector
from corrective_rag.text import tokenize
from corrective_rag.types import Document

__all__ = [
    "AVGDL_KEY",
    "DENSE",
    "ID",
    "SPARSE",
    "TERMS",
    "TEXT",
    "create_collection",
    "document_of",
    "leg_requests",
    "make_point",
    "point_id",
    "recorded_avgdl",
    "reuse_or_embed",
]

DENSE, SPARSE = "dense", "bm25"
ID, TEXT, TERMS = "id", "text", "terms"
AVGDL_KEY = "crag_bm25_avgdl"  # in the collection's metadata
# Point ids must be UUIDs or integers: a document id maps to a fixed UUID in this namespace.
_NAMESPACE = uuid.UUID("6f1c2d3e-8a4b-4c5d-9e6f-7a8b9c0d1e2f")


def point_id(doc_id: str) -> str:
    """The Qdrant point id of a document id (UUID 5, the same in every process)."""
    return str(uuid.uuid5(_NAMESPACE, doc_id))


def create_collection(client: Any, name: str, dimension: int, avgdl: float) -> None:
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


def recorded_avgdl(info: Any) -> float | None:
    """The avgdl a collection's info (``get_collection``) records, if any."""
    meta = getattr(info.config, "metadata", None) or {}
    value = meta.get(AVGDL_KEY)
    return float(value) if value else None


def make_point(doc: Document, vector: np.ndarray, tokens: list[str], avgdl: float) -> Any:
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


def document_of(payload: Mapping[str, Any]) -> Document:
    """The document a point's payload holds."""
    return Document(payload[ID], payload[TEXT], dict(payload.get(METADATA_KEY) or {}))


def leg_requests(
    query: str,
    legs: Sequence[str],
    depth: int,
    flt: Any,
    embedder: Embedder,
) -> dict[str, Any]:
    """One query request per leg in ``legs`` (sparse first), each for ``depth`` points."""
    from qdrant_client import models

    requests: dict[str, Any] = {}
    if SPARSE in legs:
        indices, values = query_vector(tokenize(query))
        if indices:  # a query of stop words only matches nothing lexically
            requests[SPARSE] = models.QueryRequest(
                query=models.SparseVector(indices=indices, values=values),
                using=SPARSE,
                filter=flt,
                limit=depth,
                with_payload=[ID],
            )
    if DENSE in legs:
        vector = embedder.embed([query])[0]
        requests[DENSE] = models.QueryRequest(
            query=np.asarray(vector, dtype=np.float32).tolist(),
            using=DENSE,
            filter=flt,
            limit=depth,
            with_payload=[ID],
        )
    return requests


def reuse_or_embed(
    embedder: Embedder, docs: Sequence[Document], previous: Mapping[str, tuple[str, np.ndarray]]
) -> np.ndarray:
    """Embeddings of ``docs``, reusing the stored vector where the text is unchanged.

    ``previous`` maps a stored id to its ``(text, dense vector)``.
    """
    fresh = [d for d in docs if d.id not in previous or previous[d.id][0] != d.text]
    computed: Iterator[np.ndarray] = iter(embedder.embed([d.text for d in fresh]) if fresh else [])
    reuse = {d.id for d in docs} - {d.id for d in fresh}
    return np.vstack([previous[d.id][1] if d.id in reuse else next(computed) for d in docs]).astype(
        np.float32
    )
