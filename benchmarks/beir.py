"""Load a BEIR folder (corpus.jsonl, queries.jsonl, qrels/test.tsv) for every benchmark."""

from __future__ import annotations

import csv
import json
import os
from dataclasses import dataclass

from corrective_rag.store.loaders import load_documents
from corrective_rag.types import Document


@dataclass(frozen=True, slots=True)
class Beir:
    """A BEIR collection: documents (title + text, whole), queries and graded qrels."""

    name: str
    corpus: list[Document]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]

    def judged_queries(self) -> dict[str, str]:
        """Queries with at least one positive qrel, in file order (the ones metrics count)."""
        return {
            qid: text
            for qid, text in self.queries.items()
            if any(g > 0 for g in self.qrels.get(qid, {}).values())
        }


def load_beir(folder: str, split: str = "test") -> Beir:
    """Read a BEIR folder; documents are indexed as ``title + "\\n" + text``, never split."""
    corpus = load_documents(
        os.path.join(folder, "corpus.jsonl"), chunk_tokens=None, skip_empty=True
    )
    queries: dict[str, str] = {}
    with open(os.path.join(folder, "queries.jsonl"), encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                obj = json.loads(line)
                queries[str(obj["_id"])] = obj["text"]
    qrels: dict[str, dict[str, int]] = {}
    with open(os.path.join(folder, "qrels", f"{split}.tsv"), encoding="utf-8") as fh:
        reader = csv.reader(fh, delimiter="\t")
        header = next(reader)
        if header[0] != "query-id":  # headerless file: the first row is data
            qrels.setdefault(header[0], {})[header[1]] = int(header[2])
        for row in reader:
            if row:
                qrels.setdefault(row[0], {})[row[1]] = int(row[2])
    name = os.path.basename(os.path.normpath(folder))
    return Beir(name, corpus, queries, qrels)
