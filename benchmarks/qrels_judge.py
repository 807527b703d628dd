"""A scripted LLM that judges from the qrels: an oracle grader and rewriter behind real HTTP.

``qrels_reply(collection)`` answers corrective_rag's own grading, judge-and-propose and rewriting
requests deterministically: a document is relevant iff it is a qrel of the question. A next query
(proposed in the grading call, or made by the rewriter) is the question plus the first new
content words of a relevant document's opening (200 characters, what the rewrite prompt quotes),
or the question plus "background" when there is none: the same rule in both modes, so that the
modes differ only in the calls they make. Requests are told apart by their JSON schema's name,
so older prompt wordings are answered too. Serve it for ``benchmarks/loop.py --evaluator llm``::

    python benchmarks/qrels_judge.py DATA --latency-ms 200 --port 8765 &
    python benchmarks/loop.py DATA --evaluator llm --llm-url http://127.0.0.1:8765/v1 --model m
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.beir import Collection, load_collection
from corrective_rag.llm import prompts
from corrective_rag.models.tokens import TiktokenCounter
from corrective_rag.rewrite.guard import normalise_query
from corrective_rag.testing.server import ScriptedLLMServer
from corrective_rag.text import content_terms

EXCERPT_CHARS = 200  # what LLMRewriter quotes of a kept document
NEW_WORDS = 6  # words of a relevant document added to the question


def _schema(request: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    """The requested reply's schema name and properties ("" when none was asked for)."""
    fmt = request.get("response_format") or {}
    spec = fmt.get("json_schema") or {}
    schema = spec.get("schema") or {}
    return str(spec.get("name") or schema.get("title") or ""), schema.get("properties") or {}


def next_query(question: str, excerpts: Sequence[str], tried: Sequence[str], suffix: str) -> str:
    """The question plus new words of the first relevant excerpt not tried yet, or ``suffix``."""
    known = content_terms(question)
    seen = {normalise_query(q) for q in (question, *tried)}
    for excerpt in excerpts:
        words = [w for w in excerpt[:EXCERPT_CHARS].split() if not content_terms(w) <= known]
        candidate = " ".join([question, *words[:NEW_WORDS]])
        if words and normalise_query(candidate) not in seen:
            return candidate
    return f"{question} {suffix}"


def _tried(user: str) -> list[str]:
    tried = []
    for line in user.splitlines():
        if line.startswith('- "'):
            try:
                tried.append(str(json.loads(line[2:])))
            except ValueError:
                continue
    return tried


def qrels_reply(collection: Collection) -> Any:
    """A ``ScriptedLLMServer`` reply function judging ``collection``'s questions from its qrels."""
    truth = {text: collection.relevant(qid) for qid, text in collection.queries.items()}

    def reply(request: Mapping[str, Any]) -> str:
        messages = request.get("messages") or []
        user = next((m["content"] for m in messages if m.get("role") == "user"), "")
        first = user.split("\n", 1)[0]
        question = first.split(": ", 1)[1] if ": " in first else first
        relevant = truth.get(question, frozenset())
        docs = prompts.parse_document_blocks(user)
        name, properties = _schema(request)
        if name == "verdicts":
            verdicts = [
                {
                    "id": doc_id,
                    "relevant": doc_id in relevant,
                    "score": 0.9 if doc_id in relevant else 0.1,
                    "confidence": 0.9,
                    "reasoning": "in the qrels" if doc_id in relevant else "not in the qrels",
                    "missing": None if doc_id in relevant else "the question's answer",
                }
                for doc_id, _ in docs
            ]
            out: dict[str, Any] = {"verdicts": verdicts}
            if "next_query" in properties:
                kept = [text for doc_id, text in docs if doc_id in relevant]
                out["lacking"] = "the rest of the answer"
                out["next_query"] = next_query(question, kept, (), "background")
            return json.dumps(out)
        if name == "rewrite":
            tried = _tried(user)
            query = next_query(question, [t for _, t in docs], tried, f"background {len(tried)}")
            return json.dumps({"query": query, "rationale": "qrels judge"})
        return json.dumps({"answer": "", "cited_ids": [], "abstain": True})

    return reply


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", help="collection folder in BEIR layout")
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--usage", choices=["tiktoken", "words"], default="tiktoken")
    args = parser.parse_args(argv)
    server = ScriptedLLMServer(
        qrels_reply(load_collection(args.data)),
        latency=args.latency_ms / 1e3,
        # usage in cl100k tokens; words cost the server less time (overhead.py)
        count_tokens=TiktokenCounter().count if args.usage == "tiktoken" else None,
    )
    server.start(port=args.port)
    print(f"serving {server.base_url}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with contextlib.suppress(KeyboardInterrupt):
        stop.wait()
    server.stop()
    print(f"served {server.request_count} requests", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
