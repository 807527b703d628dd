"""Incremental writes to a persistent store: index N documents in batches, time and bytes written.

Each batch is one ``HybridStore.add`` (one committed write). The embedder is a cheap,
deterministic hashing embedder (64 dimensions, tokens hashed into buckets), not the real model:
this measures the store's own write path (chromadb and the BM25 side), not embedding. Bytes
written are the process's ``write_bytes`` (Linux ``/proc/self/io``: chromadb and BM25 together)
and, separately, the BM25 side's files (log growth plus each snapshot rewrite).

    python benchmarks/store_writes.py --docs 100000 --batch 1000 --json OUT.json
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import random
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

DIM = 64
VOCAB = [f"w{i}" for i in range(5000)]


class HashEmbedder:
    """Bag of hashed tokens, L2-normalised: deterministic and ~free."""

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        for row, text in enumerate(texts):
            for token in text.split():
                digest = hashlib.blake2b(token.encode(), digest_size=4).digest()
                out[row, int.from_bytes(digest, "big") % DIM] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return (out / np.where(norms == 0, 1.0, norms)).astype(np.float32)


def _written() -> int:
    with open("/proc/self/io", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("write_bytes:"):
                return int(line.split()[1])
    return 0


class _BM25Bytes:
    """Bytes written to the BM25 files, from their sizes and identities after each batch."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.seen: dict[str, tuple[int, int, int]] = {}
        self.total = 0

    def update(self) -> None:
        for path in glob.glob(os.path.join(self.directory, "bm25-*")):
            st = os.stat(path)
            key = (st.st_ino, st.st_mtime_ns, st.st_size)
            old = self.seen.get(path)
            if old == key:
                continue
            if path.endswith(".log") and old is not None and old[0] == st.st_ino:
                grew = st.st_size - old[2]
                self.total += grew if grew >= 0 else st.st_size
            else:  # a new file or a rewritten snapshot
                self.total += st.st_size
            self.seen[path] = key


def run(n_docs: int, batch: int, seed: int) -> dict:
    from corrective_rag.store.hybrid import HybridStore
    from corrective_rag.types import Document

    rng = random.Random(seed)
    seconds: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "store")
        store = HybridStore.open(path, embedder=HashEmbedder())
        bm25 = _BM25Bytes(path)
        start_bytes = _written()
        start = time.perf_counter()
        with store:
            for b in range(0, n_docs, batch):
                docs = [
                    Document(f"d{i}", " ".join(rng.choices(VOCAB, k=rng.randint(10, 40))))
                    for i in range(b, min(b + batch, n_docs))
                ]
                t0 = time.perf_counter()
                store.add(docs)
                seconds.append(time.perf_counter() - t0)
                bm25.update()
        total = time.perf_counter() - start
        written = _written() - start_bytes
        files = {p.name: p.stat().st_size for p in Path(path).glob("bm25-*")}
    tenth = max(1, len(seconds) // 10)
    return {
        "benchmark": "store_writes",
        "embedder": "hash (64-d), not the real model",
        "docs": n_docs,
        "batch": batch,
        "total_seconds": round(total, 1),
        "bytes_written_total": written,
        "bytes_written_bm25": bm25.total,
        "bm25_files_at_end": files,
        "first_tenth_mean_batch_seconds": round(sum(seconds[:tenth]) / tenth, 3),
        "last_tenth_mean_batch_seconds": round(sum(seconds[-tenth:]) / tenth, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", metavar="OUT.json")
    args = parser.parse_args()
    from corrective_rag.cli.main import configure_logging

    configure_logging(verbose=False)
    report = run(args.docs, args.batch, args.seed)
    print(json.dumps(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
