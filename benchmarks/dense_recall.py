"""How much of the exact cosine top k the dense leg's chroma index finds, and how stable it is.

    python benchmarks/dense_recall.py DIR [--depth 100] [--queries 300] [--json OUT]

Embeds the corpus of a BEIR folder (cached between runs in the benchmarks' embedding cache),
builds a chroma collection twice with the store's HNSW settings and twice with chromadb's own
defaults, and reports for each: the share of the exact top 10 and top ``--depth`` (numpy cosine
over the same vectors) that the index returns (``--depth`` is what the store asks each leg for,
100 by default), how many queries' top 10 and top ``--depth`` differ between the two builds of
the same vectors, and the seconds to insert and to query. Queries are the folder's queries
(first ``--queries`` of them).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from typing import Any

import numpy as np
import numpy.typing as npt

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.beir import load_collection
from benchmarks.cache import DiskCachedEmbedder, default_cache_path
from corrective_rag.models.embeddings import SentenceTransformerEmbedder
from corrective_rag.store.chroma_open import HNSW
from corrective_rag.store.search import DEFAULT_CANDIDATES

ADD_BATCH = 2000
SETTINGS = {"store": dict(HNSW), "chromadb defaults": {"space": "cosine"}}


def build_and_query(
    hnsw: dict[str, Any], vectors: npt.NDArray[np.float32], queries: npt.NDArray[np.float32], k: int
) -> tuple[list[list[int]], float, float]:
    """Each query's ``k`` nearest ids in a fresh in-memory collection; insert and query seconds."""
    import chromadb

    client = chromadb.EphemeralClient()
    name = f"recall-{uuid.uuid4().hex[:12]}"
    configuration: Any = {"hnsw": hnsw}
    collection = client.create_collection(
        name, embedding_function=None, configuration=configuration
    )
    try:
        started = time.perf_counter()
        for start in range(0, len(vectors), ADD_BATCH):
            chunk = vectors[start : start + ADD_BATCH]
            ids = [str(i) for i in range(start, start + len(chunk))]
            collection.add(ids=ids, embeddings=chunk)
        inserted = time.perf_counter() - started
        started = time.perf_counter()
        found = collection.query(query_embeddings=queries, n_results=k, include=[])
        queried = time.perf_counter() - started
    finally:
        client.delete_collection(name)
    return [[int(i) for i in row] for row in found["ids"]], inserted, queried


def overlap(found: list[list[int]], exact: list[list[int]], k: int) -> float:
    """Mean share of each query's exact top ``k`` found in its returned top ``k``."""
    return float(
        np.mean([len(set(f[:k]) & set(e[:k])) / k for f, e in zip(found, exact, strict=True)])
    )


def differing(a: list[list[int]], b: list[list[int]], k: int) -> int:
    """Queries whose top ``k`` sets differ between two builds."""
    return sum(set(x[:k]) != set(y[:k]) for x, y in zip(a, b, strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", help="collection folder in BEIR layout")
    parser.add_argument("--depth", type=int, default=DEFAULT_CANDIDATES)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    collection = load_collection(args.data)
    model = SentenceTransformerEmbedder()
    embedder = DiskCachedEmbedder(model, default_cache_path(model))
    vectors = embedder.embed([d.text for d in collection.documents])
    texts = list(collection.queries.values())[: args.queries]
    queries = embedder.embed(texts)
    depth = min(args.depth, len(vectors))
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    cosines = (queries / np.linalg.norm(queries, axis=1, keepdims=True)) @ unit.T
    exact = [list(np.argsort(-row, kind="stable")[:depth]) for row in cosines]
    out: dict[str, Any] = {
        "collection": collection.name,
        "documents": len(vectors),
        "queries": len(texts),
        "depth": depth,
        "settings": {},
    }
    print(f"{collection.name}: {len(vectors)} documents, {len(texts)} queries, depth {depth}")
    for label, hnsw in SETTINGS.items():
        first, inserted, queried = build_and_query(hnsw, vectors, queries, depth)
        second, _, _ = build_and_query(hnsw, vectors, queries, depth)
        row = {
            "hnsw": hnsw,
            "recall@10": round(overlap(first, exact, 10), 4),
            f"recall@{depth}": round(overlap(first, exact, depth), 4),
            "builds_differ@10": differing(first, second, 10),
            f"builds_differ@{depth}": differing(first, second, depth),
            "insert_seconds": round(inserted, 2),
            "query_ms": round(1000 * queried / len(texts), 2),
        }
        out["settings"][label] = row
        print(
            f"  {label:18} recall@10 {row['recall@10']:.4f}  recall@{depth} "
            f"{row[f'recall@{depth}']:.4f}  queries whose top 10 / top {depth} differ between "
            f"two builds {row['builds_differ@10']} / {row[f'builds_differ@{depth}']}  "
            f"insert {row['insert_seconds']} s  query {row['query_ms']} ms"
        )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(out, fh, indent=2)


if __name__ == "__main__":
    main()
