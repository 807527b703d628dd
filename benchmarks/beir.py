"""Load a BEIR folder (corpus.jsonl, queries.jsonl, qrels/<split>.tsv) for every benchmark.

Documents are read with the package's own loader, exactly as ``corrective-rag index`` reads a
BEIR corpus (``title + "\\n" + text``, never split), so the retrieval and loop benchmarks measure
the index a user builds.
"""

from __future__ import annotations

import csv
import json
import os
from dataclasses import dataclass

from corrective_rag.store.loaders import load_documents
from corrective_rag.types import Document


@dataclass(frozen=True, slots=True)
class Collection:
    """A BEIR collection: documents, the queries with a positive qrel (file order), graded qrels."""

    name: str
    documents: tuple[Document, ...]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]

    def relevant(self, query_id: str) -> frozenset[str]:
        """Ids of the documents judged relevant (grade > 0) to ``query_id``."""
        return frozenset(d for d, grade in self.qrels.get(query_id, {}).items() if grade > 0)


def load_collection(folder: str, split: str = "test") -> Collection:
    """Read a BEIR folder; keep only the queries that have at least one positive qrel."""
    documents = load_documents(
        os.path.join(folder, "corpus.jsonl"), chunk_tokens=None, skip_empty=True
    )
    qrels: dict[str, dict[str, int]] = {}
    with open(os.path.join(folder, "qrels", f"{split}.tsv"), encoding="utf-8") as fh:
        reader = csv.reader(fh, delimiter="\t")
        header = next(reader)
        if header[0] != "query-id":  # headerless file: the first row is data
            qrels.setdefault(header[0], {})[header[1]] = int(header[2])
        for row in reader:
            if row:
                qrels.setdefault(row[0], {})[row[1]] = int(row[2])
    queries: dict[str, str] = {}
    with open(os.path.join(folder, "queries.jsonl"), encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                obj = json.loads(line)
                qid = str(obj["_id"])
                if any(grade > 0 for grade in qrels.get(qid, {}).values()):
                    queries[qid] = obj["text"]
    name = os.path.basename(os.path.normpath(folder))
    return Collection(
        name, tuple(documents), queries, {q: g for q, g in qrels.items() if q in queries}
    )
