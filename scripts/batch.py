"""Run a queries JSONL file through the corrective loop: the same as ``corrective-rag batch``.

python scripts/batch.py QUERIES.jsonl --out RESULTS.jsonl --store DIR [--concurrency N]
"""

import sys

from corrective_rag.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["batch", *sys.argv[1:]]))
