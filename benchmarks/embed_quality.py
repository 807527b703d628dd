"""Retrieval quality of the ONNX embedder against torch: nDCG@10 of the dense leg and the hybrid.

    python benchmarks/embed_quality.py /path/to/cacm /path/to/cisi --json out/embed-quality.json

For each BEIR folder, the same documents and queries are embedded by the torch
``SentenceTransformerEmbedder`` and by ``OnnxEmbedder`` at each ``--precision``, indexed into an
in-memory ``HybridStore`` each, and searched with every judged query. A precision passes when
both nDCG@10 figures are within ``--tolerance`` (0.005) of torch's; the cosine between the two
models' vectors of each document is reported too. Vectors are kept in ``.npz`` files under the
temp folder, so a rerun embeds nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.beir import load_collection
from benchmarks.cache import CACHE_DIR, DiskCachedEmbedder
from benchmarks.index_speed import write_json
from benchmarks.retrieval import evaluate
from corrective_rag.models.embeddings import SentenceTransformerEmbedder
from corrective_rag.models.onnx_embedder import OnnxEmbedder
from corrective_rag.store.hybrid import HybridStore


def _measure(data: Any, embedder: DiskCachedEmbedder) -> dict[str, Any]:
    with HybridStore.in_memory(embedder=embedder) as store:
        store.add(data.documents)
        embedder.embed(list(data.queries.values()))
        embedder.save()
        return {
            "dense_ndcg@10": evaluate(store, data.queries, data.qrels, "dense")["ndcg@10"],
            "hybrid_ndcg@10": evaluate(store, data.queries, data.qrels, None)["ndcg@10"],
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", help="BEIR folders (CACM, CISI)")
    parser.add_argument("--precision", action="append", choices=["int8", "float32"])
    parser.add_argument("--tolerance", type=float, default=0.005)
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args(argv)
    precisions = args.precision or ["int8"]
    results: dict[str, Any] = {"tolerance": args.tolerance, "collections": {}}
    passed: dict[str, bool] = {}
    for folder in args.folders:
        data = load_collection(folder)
        texts = [d.text for d in data.documents]
        tag = os.path.basename(os.path.normpath(folder))
        torch_cached = DiskCachedEmbedder(
            SentenceTransformerEmbedder(cache_size=0), CACHE_DIR / f"quality-torch-{tag}.npz"
        )
        runs = {"torch": _measure(data, torch_cached)}
        reference = torch_cached.embed(texts)
        cosines = {}
        for precision in precisions:
            onnx = OnnxEmbedder(precision=precision, cache_size=0)
            # keyed by the export's file name, which changes with its recipe: a cache made
            # by an older int8 recipe would otherwise be read as this one's vectors
            cached = DiskCachedEmbedder(
                onnx, CACHE_DIR / f"quality-{onnx.onnx_path().stem}-{tag}.npz"
            )
            runs[f"onnx-{precision}"] = _measure(data, cached)
            cos = np.sum(cached.embed(texts) * reference, axis=1)
            cosines[f"onnx-{precision}"] = {
                "min": round(float(cos.min()), 4),
                "mean": round(float(cos.mean()), 4),
            }
        results["collections"][data.name] = {
            "documents": len(texts),
            "queries": len(data.queries),
            "runs": runs,
            "document_cosine_vs_torch": cosines,
        }
        print(f"{data.name}: {len(texts)} docs, {len(data.queries)} queries")
        for name, run in runs.items():
            delta = {k: round(v - runs["torch"][k], 4) for k, v in run.items()}
            passed[name] = passed.get(name, True) and all(
                abs(d) <= args.tolerance for d in delta.values()
            )
            print(f"  {name:13s} {run}  delta vs torch {delta}  cos {cosines.get(name, '')}")
    results["within_tolerance"] = passed
    print(f"within {args.tolerance} of torch on every collection: {passed}")
    write_json(args.json_out, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
