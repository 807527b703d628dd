"""Write a BEIR collection's labelled pairs as ``judge-check --pairs`` reads them (JSON lines).

    python benchmarks/pairs_file.py DATA/hotpotqa-dev500-distractor --questions 40 \\
        --out hotpot-pairs.jsonl
    corrective-rag judge-check --pairs hotpot-pairs.jsonl --train

For each of the first ``--questions`` questions with a relevant document: its relevant
documents (up to ``--positives``, by id) and BM25's ``--negatives`` best-ranked non-relevant
ones, each as ``{"question", "id", "title", "text", "relevant"}`` (the title as the corpus
gives it, apart from the text). These are the pairs issue 47 describes and
``benchmarks/judge_logprobs.labelled_pairs`` builds; ``--skip`` starts further into the
questions (another set of questions of the same collection).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from corrective_rag.text import tokenize  # noqa: E402


def _corpus(folder: Path) -> dict[str, tuple[str, str]]:
    """id -> (title, text) of a BEIR corpus.jsonl."""
    out = {}
    with (folder / "corpus.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                row = json.loads(line)
                out[str(row["_id"])] = (str(row.get("title") or ""), str(row.get("text") or ""))
    return out


def main(argv: list[str] | None = None) -> int:
    from rank_bm25 import BM25Okapi

    from benchmarks.beir import load_collection

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", help="a BEIR folder")
    parser.add_argument("--questions", type=int, default=40)
    parser.add_argument("--skip", type=int, default=0, help="questions to pass over first")
    parser.add_argument("--positives", type=int, default=3)
    parser.add_argument("--negatives", type=int, default=3)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    folder = Path(args.data)
    collection = load_collection(str(folder))
    raw = _corpus(folder)
    ids = [d.id for d in collection.documents]
    bm25 = BM25Okapi([tokenize(d.text) for d in collection.documents])
    rows, asked = [], 0
    for qid, question in list(collection.queries.items())[args.skip :]:
        truth = collection.relevant(qid)
        good = [d for d in sorted(truth) if d in raw][: args.positives]
        if not good:
            continue
        scores = bm25.get_scores(tokenize(question))
        ranked = sorted(range(len(ids)), key=lambda i: -scores[i])
        bad = [ids[i] for i in ranked if ids[i] not in truth][: args.negatives]
        for doc_id, relevant in [(d, True) for d in good] + [(d, False) for d in bad]:
            title, text = raw[doc_id]
            if not text.strip():  # a record that is a title alone (CACM has many)
                title, text = "", title
            if not text.strip():
                continue
            row = {"question": question, "id": doc_id, "text": text, "relevant": relevant}
            if title.strip():
                row["title"] = title
            rows.append(row)
        asked += 1
        if asked == args.questions:
            break
    with open(args.out, "w", encoding="utf-8") as out:
        out.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    print(f"{args.out}: {len(rows)} pairs of {asked} questions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
