"""Load a BEIR-layout collection (corpus.jsonl, queries.jsonl, qrels/test.tsv) as package types."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

from corrective_rag.types import Document


@dataclass(frozen=True, slots=True)
class Collection:
    """A test collection: documents, the queries that have a positive qrel, and their qrels."""

    name: str
    documents: tuple[Document, ...]
    queries: dict[str, str]
    qrels: dict[str, frozenset[str]]


def document_text(title: str, text: str) -> str:
    """Title and body as one text, without repeating a title the body already starts with."""
    title, text = title.strip(), text.strip()
    if not title:
        return text
    if not text:
        return title
    if text.lower().startswith(title.lower()):
        return text
    return f"{title}. {text}"


def load_collection(folder: str | Path) -> Collection:
    """Read ``folder`` in BEIR layout; keep only queries with at least one positive qrel."""
    root = Path(folder)
    documents = []
    with (root / "corpus.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            text = document_text(row.get("title", ""), row.get("text", ""))
            if not text:
                continue
            meta = {"title": row["title"]} if row.get("title") else {}
            documents.append(Document(str(row["_id"]), text, meta))
    qrels: dict[str, set[str]] = {}
    with (root / "qrels" / "test.tsv").open(encoding="utf-8") as fh:
        reader = csv.reader(fh, delimiter="\t")
        next(reader)
        for qid, did, score in reader:
            if int(score) > 0:
                qrels.setdefault(qid, set()).add(did)
    queries = {}
    with (root / "queries.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            if str(row["_id"]) in qrels:
                queries[str(row["_id"])] = row["text"]
    known = {d.id for d in documents}
    return Collection(
        root.name,
        tuple(documents),
        queries,
        {q: frozenset(ids & known) for q, ids in qrels.items() if q in queries},
    )
