"""Peak memory of chunking one large text file: chunking streams, so it must not grow with size.

Writes a synthetic text file of ``--mb`` megabytes (varied English-like sentences), then cuts it
into the default chunks (the embedding model's tokenizer, 256 tokens with 32 of overlap) through
``iter_documents``, counting chunks without keeping them. Reports the process's peak RSS.

    python benchmarks/loader_memory.py --mb 50 --json OUT.json
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import tempfile
import time
from pathlib import Path

WORDS = [
    *("river", "mountain", "glacier", "volcano", "theory", "protein", "enzyme", "market"),
    *("policy", "language", "network", "signal", "energy", "crystal", "orbit", "planet"),
    *("algorithm", "museum", "harbour", "festival", "engine", "lattice"),
]


def _write(path: Path, megabytes: int, seed: int) -> int:
    rng = random.Random(seed)
    target = megabytes * 1_000_000
    written = 0
    with path.open("w", encoding="utf-8") as fh:
        while written < target:
            para = " ".join(
                " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 18))).capitalize() + "."
                for _ in range(rng.randint(3, 8))
            )
            fh.write(para + "\n\n")
            written += len(para) + 2
    return path.stat().st_size


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: kilobytes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=50, help="size of the text file in MB")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", metavar="OUT.json")
    args = parser.parse_args()

    from corrective_rag.models.tokenizer import ModelTokenizer
    from corrective_rag.store.loaders import DEFAULT_CHUNK_TOKENS, DEFAULT_OVERLAP, iter_documents

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.txt"
        size = _write(path, args.mb, args.seed)
        tokenizer = ModelTokenizer()
        tokenizer.count("warm up")  # load the tokenizer before the baseline
        baseline = _peak_mb()
        start = time.perf_counter()
        chunks = chars = 0
        for doc in iter_documents(path, counter=tokenizer):
            chunks += 1
            chars += len(doc.text)
        seconds = time.perf_counter() - start
    report = {
        "file_mb": round(size / 1e6, 1),
        "chunk_tokens": DEFAULT_CHUNK_TOKENS,
        "overlap": DEFAULT_OVERLAP,
        "chunks": chunks,
        "seconds": round(seconds, 1),
        "baseline_rss_mb": round(baseline, 1),
        "peak_rss_mb": round(_peak_mb(), 1),
    }
    print(json.dumps(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
