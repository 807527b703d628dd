"""CPU seconds to read token probabilities from one long grading reply (issue 46: was quadratic).

Builds a grading reply of ``--verdicts`` verdicts (30,000 by default: about 4 MB of JSON, as a
server could send) with its tokens, each ``relevant`` value a token of its own and its
alternatives listed, and times :func:`~corrective_rag.evaluate.logprobs.value_probabilities` on
it with ``time.process_time`` (best of ``--repeat``), beside a fixed pure-Python loop
(``sum(range(10**7))``, about 0.1 s on a quiet core) that says how busy the machine was. The
earlier reader took 10.3 s of CPU for such a reply (issue 46); the mark is 0.5 s. Prints one
JSON line; ``--json OUT`` writes it.

    python benchmarks/logprob_reader.py
    python benchmarks/logprob_reader.py --verdicts 60000 --compact
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from corrective_rag.types import TokenLogprob

_PIECE = 24  # characters per token between values: a long reply's tokens, roughly


def long_reply(verdicts: int, *, compact: bool = False) -> tuple[str, list[TokenLogprob], dict]:
    """A grading reply of ``verdicts`` verdicts, its tokens, and each id's true P(true).

    Verdict ``i`` writes ``relevant`` true for even ``i``; the probability put on what it wrote
    varies with ``i`` (0.55..0.95), its opposite gets the rest, spread over two spellings.
    """
    items = []
    for i in range(verdicts):
        items.append(
            {
                "id": f"d{i:06d}",
                "relevant": i % 2 == 0,
                "score": round((i % 100) / 100, 2),
                "confidence": 0.9,
                "reasoning": f"shares {i % 100}% of the question's terms",
                "missing": None,
            }
        )
    separators = (",", ":") if compact else (", ", ": ")
    text = json.dumps({"verdicts": items}, separators=separators)
    tokens: list[TokenLogprob] = []
    expected: dict[str, float] = {}
    key = '"relevant":' if compact else '"relevant": '
    at = 0
    for i, item in enumerate(items):
        value_at = text.index(key, at) + len(key)
        _pieces(text[at:value_at], tokens)
        word = "true" if item["relevant"] else "false"
        other = "false" if item["relevant"] else "true"
        p = 0.55 + 0.4 * (i % 11) / 10
        top = (
            (word, math.log(p)),
            (" " + other, math.log((1 - p) / 2)),
            (other, math.log((1 - p) / 2)),
        )
        tokens.append(TokenLogprob(word, math.log(p), top))
        expected[str(item["id"])] = p if item["relevant"] else 1 - p
        at = value_at + len(word)
    _pieces(text[at:], tokens)
    return text, tokens, expected


def _pieces(text: str, tokens: list[TokenLogprob]) -> None:
    for start in range(0, len(text), _PIECE):
        piece = text[start : start + _PIECE]
        tokens.append(TokenLogprob(piece, -0.01, ((piece, -0.01), ("x", -5.0))))


def measure(verdicts: int, *, compact: bool, repeat: int) -> dict[str, Any]:
    from corrective_rag.evaluate.logprobs import value_probabilities

    text, tokens, expected = long_reply(verdicts, compact=compact)
    best = math.inf
    found: dict[str, float] = {}
    for _ in range(repeat):
        started = time.process_time()
        found = value_probabilities(text, tokens)
        best = min(best, time.process_time() - started)
    wrong = sum(1 for k, p in expected.items() if abs(found.get(k, -1.0) - p) > 1e-9)
    started = time.process_time()
    sum(range(10**7))  # a fixed pure-Python loop: ~0.1 s on a quiet core, to read the figure by
    reference = time.process_time() - started
    return {
        "bench": "logprob_reader",
        "verdicts": verdicts,
        "reply_mb": round(len(text.encode()) / 1e6, 2),
        "tokens": len(tokens),
        "layout": "compact" if compact else "spaced",
        "cpu_seconds": round(best, 3),
        "reference_loop_cpu_seconds": round(reference, 3),
        "read": len(found),
        "wrong": wrong,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--verdicts", type=int, default=30_000)
    parser.add_argument("--compact", action="store_true", help="compact JSON (no spaces)")
    parser.add_argument("--repeat", type=int, default=5, help="the best of this many")
    parser.add_argument("--json", type=Path, help="write the result here")
    args = parser.parse_args(argv)
    result = measure(args.verdicts, compact=args.compact, repeat=args.repeat)
    print(json.dumps(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0 if result["wrong"] == 0 and result["read"] == args.verdicts else 1


if __name__ == "__main__":
    raise SystemExit(main())
