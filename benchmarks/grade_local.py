"""A local GGUF as judge: each question's BM25 top k graded by ``LLMEvaluator(propose=True)``.

As the loop's first iteration would grade them, without embedding the corpus (minutes on a busy
CPU): agreement of graded verdicts with the qrels, ungraded share, calls and seconds per
question, and whether the proposal repeats the question or copies a sentence. One JSON line per
question, then the totals::

    python benchmarks/grade_local.py DATA_DIR MODEL.gguf --limit 10 --k 4
"""

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from rank_bm25 import BM25Okapi

from benchmarks.beir import load_collection
from corrective_rag.calls import call_settings
from corrective_rag.evaluate.llm import LLMEvaluator
from corrective_rag.llm.client import OpenAIChatClient
from corrective_rag.llm.local_server import LocalLlamaServer
from corrective_rag.rewrite.guard import is_copied_sentence, repeats
from corrective_rag.text import tokenize

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("data")
parser.add_argument("gguf")
parser.add_argument("--limit", type=int, default=10)
parser.add_argument("--k", type=int, default=4)
args = parser.parse_args()
gguf, limit, k = args.gguf, args.limit, args.k
col = load_collection(args.data)
docs = list(col.documents)
bm25 = BM25Okapi([tokenize(d.text) for d in docs])
rows: list[dict[str, Any]] = []
with LocalLlamaServer(gguf) as server:
    timeouts, retries = call_settings(600, local=True)
    chat = OpenAIChatClient(
        server.base_url, "local", timeouts=timeouts, retries=retries, max_concurrency=1
    )
    ev = LLMEvaluator(chat, propose=True, max_workers=1, context_tokens=server.slot_context)
    for qid, question in list(col.queries.items())[:limit]:
        truth = col.relevant(qid)
        scores = bm25.get_scores(tokenize(question))
        top = [docs[i] for i in sorted(range(len(docs)), key=lambda i: -scores[i])[:k]]
        t = time.perf_counter()
        e = ev.evaluate(question, top)
        s = time.perf_counter() - t
        graded = [v for v in e.verdicts if v.graded]
        proposed = e.proposal.query if e.proposal else None
        row = {
            "query": qid,
            "seconds": round(s, 1),
            "llm_calls": e.usage.llm_calls,
            "failed_calls": e.usage.failed_calls,
            "judged": len(e.verdicts),
            "ungraded": len(e.verdicts) - len(graded),
            "agreeing": sum(v.relevant == (v.document_id in truth) for v in graded),
            "said_relevant": sum(bool(v.relevant) for v in graded),
            "truly_relevant_judged": sum(d.id in truth for d in top),
            "completion_tokens": e.usage.completion_tokens,
            "proposal": proposed,
            "proposal_repeats_question": proposed is not None and repeats(proposed, question, []),
            "proposal_copied": proposed is not None
            and is_copied_sentence(proposed, [d.text for d in top]),
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
n = len(rows)
judged = sum(r["judged"] for r in rows)
graded = judged - sum(r["ungraded"] for r in rows)
print(
    json.dumps(
        {
            "questions": n,
            "k": k,
            "agreement": round(sum(r["agreeing"] for r in rows) / max(graded, 1), 3),
            "ungraded_share": round(1 - graded / max(judged, 1), 3),
            "calls_per_question": round(sum(r["llm_calls"] for r in rows) / n, 2),
            "seconds_per_question": round(sum(r["seconds"] for r in rows) / n, 1),
        }
    ),
    flush=True,
)
