"""A scripted LLM that judges from the qrels: an oracle grader and rewriter behind real HTTP.

``qrels_reply(collection)`` answers corrective_rag's own grading, judge-and-propose and rewriting
requests deterministically: a document is relevant iff it is a qrel of the question. A next query
(proposed in the grading call, or made by the rewriter) is the question plus the first new
content words of a relevant document's opening (200 characters, what the rewrite prompt quotes),
or the question plus "background" when there is none: the same rule in both modes, so that the
modes differ only in the calls they make. ``--proposer repeat`` proposes the question plus a
fixed hint instead, every time: a model whose rewrites add nothing. Requests are told apart by
their JSON schema's name, so older prompt wordings are answered too.

Verdict noise (``--false-negative R``, ``--false-positive R``) flips a fixed share of the
relevant pairs to not relevant and of the irrelevant pairs to relevant, chosen by a hash of
(query id, document id) (:func:`flipped`), so a rerun flips the same pairs and every arm of a
benchmark sees the same wrong verdicts; the noisy verdicts keep the judge's usual confidence,
as an overconfident model's would. Serve it for ``benchmarks/loop.py --evaluator llm`` (or let
``loop.py --qrels-judge`` serve it in process)::

    python benchmarks/qrels_judge.py DATA --latency-ms 200 --port 8765 &
    python benchmarks/loop.py DATA --evaluator llm --llm-url http://127.0.0.1:8765/v1 --model m
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
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
from corrective_rag.testing import ScriptedLLMServer
from corrective_rag.text import content_terms

EXCERPT_CHARS = 200  # what LLMRewriter quotes of a kept document
NEW_WORDS = 6  # words of a relevant document added to the question
REPEAT_HINT = "background"  # the repeating proposer's fixed hint
PROPOSERS = ("rule", "repeat")


def flipped(query_id: str, doc_id: str, rate: float, kind: str) -> bool:
    """Whether the pair's verdict is flipped at ``rate``: a fixed hash, the same every run.

    ``kind`` ("fn" or "fp") salts the hash so the two noise kinds pick independently.
    """
    if rate <= 0.0:
        return False
    digest = hashlib.sha256(f"{kind}\x00{query_id}\x00{doc_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < rate


def noisy_relevant(
    query_id: str, doc_id: str, truth: frozenset[str], false_negative: float, false_positive: float
) -> bool:
    """The judge's verdict on one pair: the qrels, with the pair flipped where the hash says."""
    if doc_id in truth:
        return not flipped(query_id, doc_id, false_negative, "fn")
    return flipped(query_id, doc_id, false_positive, "fp")


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
        candidate = _within_cap(question, words[:NEW_WORDS])
        if words and normalise_query(candidate) not in seen:
            return candidate
    return _within_cap(question, [suffix])


def _within_cap(question: str, new: Sequence[str]) -> str:
    """The question plus ``new`` words, as a judge held to the schema's query cap writes it.

    A server enforcing the schema stops a query at ``prompts.QUERY_CHARS``: a long question
    goes after the new words (which a search needs most) and loses its last words, never half
    of one.
    """
    candidate = " ".join([question, *new])
    if len(candidate) <= prompts.QUERY_CHARS:
        return candidate
    kept: list[str] = []
    for word in [*new, *question.split()]:
        if len(" ".join([*kept, word])) > prompts.QUERY_CHARS:
            break
        kept.append(word)
    return " ".join(kept)


def _tried(user: str) -> list[str]:
    tried = []
    for line in user.splitlines():
        if line.startswith('- "'):
            try:
                tried.append(str(json.loads(line[2:])))
            except ValueError:
                continue
    return tried


def qrels_reply(
    collection: Collection,
    *,
    false_negative: float = 0.0,
    false_positive: float = 0.0,
    proposer: str = "rule",
) -> Any:
    """A ``ScriptedLLMServer`` reply function judging ``collection``'s questions from its qrels.

    ``false_negative`` / ``false_positive``: shares of relevant / irrelevant pairs judged wrong
    (:func:`flipped`); ``proposer``: ``rule`` (new words of a relevant document) or ``repeat``
    (the question plus a fixed hint).
    """
    if proposer not in PROPOSERS:
        raise ValueError(f"proposer must be one of {PROPOSERS}, got {proposer!r}")
    ids = {text: qid for qid, text in collection.queries.items()}

    def judged(question: str) -> frozenset[str]:
        qid = ids.get(question)
        return collection.relevant(qid) if qid is not None else frozenset()

    def says(question: str, doc_id: str) -> bool:
        qid = ids.get(question, "")
        truth = judged(question)
        return noisy_relevant(qid, doc_id, truth, false_negative, false_positive)

    def reply(request: Mapping[str, Any]) -> str:
        messages = request.get("messages") or []
        user = next((m["content"] for m in messages if m.get("role") == "user"), "")
        first = user.split("\n", 1)[0]
        question = first.split(": ", 1)[1] if ": " in first else first
        docs = prompts.parse_document_blocks(user)
        relevant = {doc_id for doc_id, _ in docs if says(question, doc_id)}
        name, properties = _schema(request)
        if name == "verdicts":
            verdicts = [
                {
                    "id": doc_id,
                    "relevant": doc_id in relevant,
                    "score": 0.9 if doc_id in relevant else 0.1,
                    "confidence": 0.9,
                    "reasoning": "in the qrels" if doc_id in relevant else "not in the qrels",
                    "missing": None,  # relevant: nothing known missing; irrelevant: null
                }
                for doc_id, _ in docs
            ]
            # as a server enforcing the schema would: only the keys a verdict's schema lists
            shape = (properties.get("verdicts") or {}).get("items", {}).get("properties")
            if shape:
                verdicts = [{k: v for k, v in item.items() if k in shape} for item in verdicts]
            out: dict[str, Any] = {"verdicts": verdicts}
            if "next_query" in properties:
                kept = [text for doc_id, text in docs if doc_id in relevant]
                if proposer == "repeat":
                    out["next_query"] = f"{question} {REPEAT_HINT}"
                else:
                    out["next_query"] = next_query(question, kept, (), "background")
            return json.dumps(out)
        if name == "rewrite":
            tried = _tried(user)
            if proposer == "repeat":
                query = f"{question} {REPEAT_HINT}"
            else:
                query = next_query(
                    question, [t for _, t in docs], tried, f"background {len(tried)}"
                )
            return json.dumps({"query": query, "rationale": "qrels judge"})
        return json.dumps({"answer": "", "cited_ids": [], "abstain": True})

    return reply


def add_noise_flags(parser: argparse.ArgumentParser) -> None:
    """``--false-negative``, ``--false-positive`` and ``--proposer``, shared with loop.py."""
    parser.add_argument(
        "--false-negative", type=float, default=0.0, help="share of relevant pairs judged not"
    )
    parser.add_argument(
        "--false-positive", type=float, default=0.0, help="share of irrelevant pairs judged so"
    )
    parser.add_argument(
        "--proposer",
        choices=PROPOSERS,
        default="rule",
        help="next queries: new words of a relevant document, or the question plus a fixed hint",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", help="collection folder in BEIR layout")
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--usage", choices=["tiktoken", "words"], default="tiktoken")
    add_noise_flags(parser)
    args = parser.parse_args(argv)
    reply = qrels_reply(
        load_collection(args.data),
        false_negative=args.false_negative,
        false_positive=args.false_positive,
        proposer=args.proposer,
    )
    server = ScriptedLLMServer(
        reply,
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
