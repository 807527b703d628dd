"""nDCG@10, Recall@10/100 and queries/second of BM25, dense and hybrid retrieval on a BEIR folder.

    python benchmarks/retrieval.py CISI_DIR --json out/cisi.json
    python benchmarks/retrieval.py DIR --backend qdrant --json out/cisi-qdrant.json

``--backend qdrant`` runs the same legs and fusion through ``HybridStore.qdrant`` (qdrant-client's
local mode) instead of ``HybridStore``.

Only queries with a positive qrel are counted. ``--embedding-cache FILE.npz`` keeps document
vectors between runs (the first run fills it); ``index_seconds`` then excludes embedding time,
which the JSON says.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.beir import load_collection
from benchmarks.cache import DiskCachedEmbedder
from benchmarks.metrics import ndcg_at_k, recall_at_k
from corrective_rag.models.embeddings import SentenceTransformerEmbedder
from corrective_rag.store.fusion import ConvexFusion, RRFusion
from corrective_rag.store.hybrid import HybridStore
from corrective_rag.store.search import DEFAULT_CANDIDATES

ADD_BATCH = 2000


def evaluate(
    store: Any,
    queries: dict[str, str],
    qrels: dict[str, dict[str, int]],
    leg: str | None,
) -> dict:
    ndcg10 = r10 = r100 = 0.0
    started = time.perf_counter()
    ranked_all = {}
    for qid, text in queries.items():
        hits = (
            store.retrieve(text, top_k=100)
            if leg is None
            else store.search(text, leg=leg, top_k=100)
        )
        ranked_all[qid] = [h.document.id for h in hits]
    seconds = time.perf_counter() - started
    for qid, ranked in ranked_all.items():
        ndcg10 += ndcg_at_k(ranked, qrels[qid], 10)
        r10 += recall_at_k(ranked, qrels[qid], 10)
        r100 += recall_at_k(ranked, qrels[qid], 100)
    n = len(queries)
    return {
        "ndcg@10": round(ndcg10 / n, 4),
        "recall@10": round(r10 / n, 4),
        "recall@100": round(r100 / n, 4),
        "qps": round(n / seconds, 1),
    }


def _open_store(backend: str, embedder: Any, fusion: Any, candidates: int) -> Any:
    if backend == "qdrant":
        return HybridStore.qdrant(
            ":memory:", embedder=embedder, fusion=fusion, candidates=candidates
        )
    return HybridStore.in_memory(embedder=embedder, fusion=fusion, candidates=candidates)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir")
    parser.add_argument("--json", dest="json_out")
    parser.add_argument("--fusion", choices=["rrf", "convex"], default="convex")
    parser.add_argument("--alpha", type=float, default=0.5, help="dense weight for --fusion convex")
    parser.add_argument("--rrf-k", type=int, default=60)
    parser.add_argument(
        "--dense-weight", type=float, default=1.0, help="RRF weight of dense (bm25 = 1)"
    )
    parser.add_argument("--candidates", type=int, default=DEFAULT_CANDIDATES)
    parser.add_argument("--embedding-cache", help="an .npz file reused across runs")
    parser.add_argument(
        "--backend", choices=["hybrid", "qdrant"], default="hybrid", help="store to measure"
    )
    parser.add_argument("--torch-threads", type=int, help="torch intra-op threads")
    args = parser.parse_args(argv)
    if args.torch_threads:
        import torch

        torch.set_num_threads(args.torch_threads)

    data = load_collection(args.data_dir)
    queries = data.queries
    fusion = (
        ConvexFusion(args.alpha)
        if args.fusion == "convex"
        else RRFusion(k=args.rrf_k, weights=(1.0, args.dense_weight))
    )
    # the inner model keeps no cache of its own, so every query pays its embedding
    embedder = DiskCachedEmbedder(SentenceTransformerEmbedder(cache_size=0), args.embedding_cache)
    embedder.embed(["warm up the model"])
    with _open_store(args.backend, embedder, fusion, args.candidates) as store:
        started = time.perf_counter()
        for i in range(0, len(data.documents), ADD_BATCH):
            store.add(data.documents[i : i + ADD_BATCH])
        store.idf("warm")  # BM25 builds lazily: count the build as indexing
        index_seconds = time.perf_counter() - started
        embedder.save()
        embedder.caching = False
        runs = {
            "bm25": evaluate(store, queries, data.qrels, "bm25"),
            "dense": evaluate(store, queries, data.qrels, "dense"),
            "hybrid": evaluate(store, queries, data.qrels, None),
        }
    result = {
        "collection": data.name,
        "documents": len(data.documents),
        "queries": len(queries),
        "index_seconds": round(index_seconds, 2),
        "documents_embedded": embedder.texts_embedded,
        "note": "index_seconds includes embedding only for documents_embedded texts (cache misses)",
        "config": {
            "fusion": repr(fusion),
            "candidates": args.candidates,
            "backend": args.backend,
            "bm25": store._bm25.implementation if store._bm25 is not None else "qdrant-idf",
            "torch_threads": args.torch_threads or "default",
        },
        "runs": runs,
    }
    print(
        f"{data.name} ({args.backend}): {len(data.documents)} docs, {len(queries)} queries, "
        f"index {index_seconds:.1f} s"
    )
    for name, run in runs.items():
        print(
            f"  {name:7s} nDCG@10 {run['ndcg@10']:.4f}  R@10 {run['recall@10']:.4f}  "
            f"R@100 {run['recall@100']:.4f}  {run['qps']:.1f} q/s"
        )
    if args.json_out:
        os.makedirs(os.path.dirname(os.path.abspath(args.json_out)), exist_ok=True)
        with open(args.json_out, "w", encoding="utf-8") as fh:
            json.dump(result, fh, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
