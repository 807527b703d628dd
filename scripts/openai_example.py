"""End to end against any OpenAI-compatible server: index a folder, run the loop, print an answer.

What the command line does not do: the LLM judges, rewrites *and answers* (with citations and a
support check), under a call budget, and the script prints the answer and the iteration table.

    python scripts/openai_example.py FOLDER "your question" \
        --base-url http://127.0.0.1:8080/v1 --model MODEL [--api-key KEY]

``--base-url``, ``--model`` and ``--api-key`` default to ``OPENAI_BASE_URL``, ``OPENAI_MODEL``
and ``OPENAI_API_KEY``. FOLDER holds .txt, .md or .jsonl files; they are indexed in memory.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

import structlog

from corrective_rag import (
    Budget,
    CorrectiveRAGError,
    CorrectiveRAGOrchestrator,
    HybridStore,
    LLMEvaluator,
    LLMGenerator,
    LLMRewriter,
    OpenAIChatClient,
    load_documents,
)
from corrective_rag.runs import render_table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", help="a folder of .txt, .md or .jsonl files")
    parser.add_argument("question")
    parser.add_argument("--base-url", default=os.environ.get("OPENAI_BASE_URL"))
    parser.add_argument("--model", default=os.environ.get("OPENAI_MODEL"))
    parser.add_argument("--api-key", default=os.environ.get("OPENAI_API_KEY"))
    parser.add_argument("--max-llm-calls", type=int, default=20, help="budget for the whole run")
    args = parser.parse_args(argv)
    if not args.base_url or not args.model:
        parser.error("give --base-url and --model (or set OPENAI_BASE_URL and OPENAI_MODEL)")
    # warnings and errors to stderr; stdout carries only the table and the answer
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )
    try:
        documents = load_documents(args.folder)
        chat = OpenAIChatClient(args.base_url, args.model, api_key=args.api_key)
        with HybridStore.in_memory() as store:
            store.add(documents)
            orchestrator = CorrectiveRAGOrchestrator(
                store,
                LLMEvaluator(chat),
                LLMRewriter(chat),
                generator=LLMGenerator(chat),
                budget=Budget(max_llm_calls=args.max_llm_calls),
            )
            result = orchestrator.run(args.question)
    except CorrectiveRAGError as exc:
        print(f"openai_example: error: {exc}", file=sys.stderr)
        return 1
    print(render_table(result))
    answer = result.answer
    if answer is None or answer.abstained:
        print("answer: none (the documents do not answer the question)")
    else:
        print(f"answer: {answer.text}")
        print(f"cited: {', '.join(answer.cited_ids)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
