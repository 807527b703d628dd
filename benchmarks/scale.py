"""Index a synthetic corpus and time hybrid queries, ours beside plain rank_bm25 + Chroma.

    python benchmarks/scale.py --docs 100000 --json out/scale.json

Documents (30-60 words) and queries (3-6 words) are drawn deterministically from the words of
the Python standard library's docstrings with a Zipf distribution. Document embeddings are
computed once with the real model and shared by both systems (cached in ``--cache``), so
``index_seconds`` is the indexing cost beside ``embedding_seconds``; query latency always
includes embedding the query. Each system runs in its own process, so ``peak_rss_mb`` is its own.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import re
import resource
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np

SEED = 20240601
QUERIES = 200
TOP_K = 10


def vocabulary() -> list[str]:
    """Words of stdlib docstrings, most frequent first (ties alphabetical): deterministic."""
    import collections
    import importlib
    import inspect
    import pkgutil
    import sysconfig

    counts: collections.Counter[str] = collections.Counter()
    stdlib = sysconfig.get_paths()["stdlib"]  # the standard library's own folder, any Python
    names = sorted(
        m.name for m in pkgutil.iter_modules() if getattr(m.module_finder, "path", None) == stdlib
    )
    for name in names:
        if name.startswith(("_", "antigravity", "this", "idlelib", "tkinter", "turtle")):
            continue
        try:
            module = importlib.import_module(name)
        except Exception:
            continue
        for _, obj in [(name, module), *inspect.getmembers(module)]:
            doc = inspect.getdoc(obj) if callable(obj) or inspect.ismodule(obj) else None
            if doc:
                counts.update(w.lower() for w in re.findall(r"[A-Za-z]{2,}", doc))
    return [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


def corpus(n_docs: int, vocab: list[str]) -> tuple[list[str], list[str]]:
    """Deterministic Zipf documents and queries."""
    rng = np.random.default_rng(SEED)
    ranks = np.arange(1, len(vocab) + 1)
    p = 1.0 / ranks**1.07
    p /= p.sum()
    words = np.array(vocab)
    lengths = rng.integers(30, 61, size=n_docs)
    draws = rng.choice(len(vocab), size=int(lengths.sum()), p=p)
    docs, start = [], 0
    for n in lengths:
        docs.append(" ".join(words[draws[start : start + n]]))
        start += n
    # queries favour mid-frequency words (skip the 50 commonest), like real keyword queries
    q_p = p.copy()
    q_p[:50] = 0
    q_p /= q_p.sum()
    queries = [
        " ".join(words[rng.choice(len(vocab), size=rng.integers(3, 7), p=q_p)])
        for _ in range(QUERIES)
    ]
    return docs, queries


def _percentiles(seconds: list[float]) -> dict[str, float]:
    ms = np.array(seconds) * 1000
    return {
        "p50_ms": round(float(np.percentile(ms, 50)), 2),
        "p95_ms": round(float(np.percentile(ms, 95)), 2),
    }


def _peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _open(backend: str, embedder: Any) -> Any:
    from corrective_rag.store.hybrid import HybridStore

    if backend == "qdrant":
        return HybridStore.qdrant(":memory:", embedder=embedder)
    return HybridStore.in_memory(embedder=embedder)


def run_ours(docs: list[str], queries: list[str], cache: str, *rest: Any) -> None:
    """Index and query one of our stores; ``rest`` is ``([backend,] queue)``."""
    *named, out = rest
    backend = named[0] if named else "hybrid"
    from benchmarks.cache import DiskCachedEmbedder
    from corrective_rag.models.embeddings import SentenceTransformerEmbedder
    from corrective_rag.types import Document

    embedder = DiskCachedEmbedder(SentenceTransformerEmbedder(cache_size=0), cache)
    documents = [Document(f"d{i}", t) for i, t in enumerate(docs)]
    rss_before = _peak_rss_mb()
    with _open(backend, embedder) as store:
        started = time.perf_counter()
        for i in range(0, len(documents), 5000):
            store.add(documents[i : i + 5000])
        store.idf("warm")  # the lazy BM25 build counts as indexing
        index_seconds = time.perf_counter() - started
        embedder.caching = False  # queries are embedded for real
        store.retrieve("warm up", top_k=TOP_K)
        times = []
        for q in queries:
            t = time.perf_counter()
            store.retrieve(q, top_k=TOP_K)
            times.append(time.perf_counter() - t)
    out.put(
        {
            "backend": backend,
            "index_seconds": round(index_seconds, 2),
            "peak_rss_mb": _peak_rss_mb(),
            # the process before the store: Python, the model, the corpus and its vectors
            "rss_before_store_mb": rss_before,
            **_percentiles(times),
        }
    )


def run_naive(docs: list[str], queries: list[str], cache: str, out: Any) -> None:
    """rank_bm25.BM25Okapi + a Chroma collection, fused with RRF; what one writes first."""
    import chromadb
    from rank_bm25 import BM25Okapi

    from benchmarks.cache import DiskCachedEmbedder
    from corrective_rag.models.embeddings import SentenceTransformerEmbedder
    from corrective_rag.store.fusion import reciprocal_rank_fusion
    from corrective_rag.text import tokenize

    embedder = DiskCachedEmbedder(SentenceTransformerEmbedder(cache_size=0), cache)
    ids = [f"d{i}" for i in range(len(docs))]
    vectors = embedder.embed(docs)
    started = time.perf_counter()
    bm25 = BM25Okapi([tokenize(t) for t in docs])
    collection = chromadb.EphemeralClient().get_or_create_collection(
        "naive", embedding_function=None, configuration={"hnsw": {"space": "cosine"}}
    )
    for i in range(0, len(docs), 5000):
        collection.add(
            ids=ids[i : i + 5000], embeddings=vectors[i : i + 5000], documents=docs[i : i + 5000]
        )
    index_seconds = time.perf_counter() - started
    embedder.caching = False

    def query(q: str) -> list[str]:
        scores = bm25.get_scores(tokenize(q))
        lexical = [ids[i] for i in np.argsort(-scores)[:100]]
        got = collection.query(query_embeddings=embedder.embed([q]), n_results=100, include=[])
        fused = [i for i, _ in reciprocal_rank_fusion([lexical, got["ids"][0]])[:TOP_K]]
        collection.get(ids=fused, include=["documents"])
        return fused

    query("warm up")
    times = []
    for q in queries:
        t = time.perf_counter()
        query(q)
        times.append(time.perf_counter() - t)
    out.put(
        {
            "index_seconds": round(index_seconds, 2),
            "peak_rss_mb": _peak_rss_mb(),
            **_percentiles(times),
        }
    )


def embed_all(docs: list[str], cache: str, random_vectors: bool) -> float:
    from benchmarks.cache import DiskCachedEmbedder
    from corrective_rag.models.embeddings import SentenceTransformerEmbedder, text_key

    embedder = DiskCachedEmbedder(SentenceTransformerEmbedder(cache_size=0), cache)
    started = time.perf_counter()
    if random_vectors:
        # deterministic unit vectors of the model's dimension: same index and search cost,
        # without hours of document embedding on two cores (queries still use the model)
        rng = np.random.default_rng(SEED)
        vectors = rng.standard_normal((len(docs), 384)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        embedder.vectors.update({text_key(t): v for t, v in zip(docs, vectors, strict=True)})
        embedder.save()
        return time.perf_counter() - started
    for i in range(0, len(docs), 2000):
        embedder.embed(docs[i : i + 2000])
        print(f"embedded {min(i + 2000, len(docs))}/{len(docs)}", flush=True)
    embedder.save()
    return time.perf_counter() - started


def _in_process(target: Any, *args: Any) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=target, args=(*args, queue))
    proc.start()
    result = queue.get()
    proc.join()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--json", dest="json_out")
    parser.add_argument("--cache", help="embedding cache (.npz); default out/scale-<docs>.npz")
    parser.add_argument(
        "--torch-threads", type=int, help="torch intra-op threads (default: torch's own choice)"
    )
    parser.add_argument(
        "--doc-vectors",
        choices=["model", "random"],
        default="model",
        help="document vectors from the model, or deterministic random unit vectors",
    )
    parser.add_argument(
        "--backend",
        choices=["hybrid", "qdrant", "naive"],
        help="measure one store only (qdrant: HybridStore.qdrant in qdrant-client's local mode)",
    )
    args = parser.parse_args(argv)
    if args.torch_threads:
        # spawned children inherit the environment, not torch's in-process setting
        os.environ["OMP_NUM_THREADS"] = str(args.torch_threads)
    cache = args.cache or os.path.join("out", f"scale-{args.docs}-{args.doc_vectors}.npz")
    os.makedirs(os.path.dirname(os.path.abspath(cache)), exist_ok=True)
    docs, queries = corpus(args.docs, vocabulary())
    embedding_seconds = embed_all(docs, cache, args.doc_vectors == "random")
    if args.backend:
        one = (
            _in_process(run_naive, docs, queries, cache)
            if args.backend == "naive"
            else _in_process(run_ours, docs, queries, cache, args.backend)
        )
        result = {
            "docs": args.docs,
            "doc_vectors": args.doc_vectors,
            "queries": len(queries),
            "top_k": TOP_K,
            "embedding_seconds": round(embedding_seconds, 1),
            **one,
        }
        print(json.dumps(result, indent=2))
        if args.json_out:
            with open(args.json_out, "w", encoding="utf-8") as fh:
                json.dump(result, fh, indent=2)
        return 0
    ours = _in_process(run_ours, docs, queries, cache)
    naive = _in_process(run_naive, docs, queries, cache)
    result = {
        "docs": args.docs,
        "torch_threads": args.torch_threads or "default",
        "doc_vectors": args.doc_vectors,
        "queries": len(queries),
        "top_k": TOP_K,
        "embedding_seconds": round(embedding_seconds, 1),
        "note": "document embeddings computed once and shared by both systems "
        "(embedding_seconds ~0 when the cache was warm); query latency includes query embedding",
        **ours,
        "naive": naive,
        "speedup_p50": round(naive["p50_ms"] / ours["p50_ms"], 1),
    }
    print(json.dumps(result, indent=2))
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as fh:
            json.dump(result, fh, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
