"""How long one client's call takes while another client has a backlog on the same MCP server.

Starts ``corrective-rag mcp --http`` on a small store with a scripted LLM server (every reply
after ``--latency`` seconds), then, with the official SDK's client in its default mode:

- ``alone``: client B's one search, timed, with nothing else on the server;
- ``beside_backlog``: client A sends ``--backlog`` searches at once; once A's first LLM request
  has arrived, B sends its one search, timed the same way.

Each for every ``--max-calls`` given. ``--code DIR`` serves the package found in DIR instead of
this tree's (e.g. an older checkout, to compare its queue). Prints one JSON line per setting
and, with ``--json OUT``, writes them all::

    python benchmarks/mcp_fairness.py --max-calls 1 2 4 --json fairness.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

QUESTION = "what is the airspeed velocity of an unladen swallow in furlongs per fortnight?"
TOPICS = [
    "bisect keeps a list sorted by inserting with binary search",
    "heapq implements a priority queue as a binary heap on a list",
    "itertools chains, groups and slices iterators lazily",
    "functools caches results with lru_cache and partial applies arguments",
    "pathlib joins, globs and resolves filesystem paths as objects",
    "json encodes and decodes JavaScript Object Notation documents",
    "csv reads and writes comma separated rows with dialects",
    "sqlite3 runs SQL statements against a database in one file",
]


def _store(folder: Path) -> Path:
    from corrective_rag.cli.main import main

    docs = folder / "docs"
    docs.mkdir()
    for number, text in enumerate(TOPICS):
        (docs / f"topic{number}.txt").write_text(text + ".", encoding="utf-8")
    main(["index", str(docs), "--store", str(folder / "store"), "--no-progress"])
    return folder / "store"


def _serve(code: Path, store: Path, llm_url: str, max_calls: int, backlog: int) -> Any:
    env = {**os.environ, "PYTHONPATH": str(code)}
    args = ["mcp", "--store", str(store), "--http", "127.0.0.1:0", "--llm-url", llm_url]
    args += ["--model", "scripted", "--max-calls", str(max_calls)]
    usage = subprocess.run(
        [sys.executable, "-m", "corrective_rag", "mcp", "--help"],
        capture_output=True,
        text=True,
        env=env,
        cwd=code,
        check=True,
    ).stdout
    if "--max-waiting" in usage:  # room for the whole backlog: measure the order, not refusals
        args += ["--max-waiting", str(4 * backlog)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "corrective_rag", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=code,
    )
    assert proc.stderr is not None
    line = proc.stderr.readline()
    if "serving" not in line:
        proc.kill()
        raise SystemExit(f"the server did not start: {line}")
    return proc, line.rsplit(" ", 1)[1].strip()


async def _timed(client: Any, question: str) -> float:
    started = time.perf_counter()
    result = await client.call_tool("search", {"question": question})
    if result.is_error:
        raise SystemExit(f"a search failed: {result.content[0].text}")
    return time.perf_counter() - started


def _measure(url: str, llm: Any, backlog: int) -> dict[str, Any]:
    import asyncio

    from mcp import Client

    async def go() -> dict[str, Any]:
        async with (
            Client(url, read_timeout_seconds=600) as a,
            Client(url, read_timeout_seconds=600) as b,
        ):
            await _timed(b, QUESTION)  # the store opened and the model loaded: not timed
            alone = await _timed(b, QUESTION)
            a_times: list[float] = []
            before = llm.request_count

            async def a_call(i: int) -> None:
                a_times.append(await _timed(a, f"{QUESTION} ({i})"))

            backlog_calls = [asyncio.ensure_future(a_call(i)) for i in range(backlog)]
            await asyncio.to_thread(llm.wait_for_requests, before + 1, 600)
            beside = await _timed(b, QUESTION)
            await asyncio.gather(*backlog_calls)
            return {
                "alone_s": round(alone, 2),
                "beside_backlog_s": round(beside, 2),
                "ratio": round(beside / alone, 2),
                "backlog_mean_s": round(sum(a_times) / len(a_times), 2),
            }

    result: dict[str, Any] = asyncio.run(go())
    return result


def main(argv: list[str] | None = None) -> int:
    from corrective_rag.testing import ScriptedLLMServer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-calls", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--backlog", type=int, default=6, help="client A's searches at once")
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per LLM reply")
    parser.add_argument("--code", type=Path, default=ROOT, help="the package's folder to serve")
    parser.add_argument("--json", type=Path, default=None, help="write the rows here")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as folder, ScriptedLLMServer(latency=args.latency) as llm:
        store = _store(Path(folder))
        for max_calls in args.max_calls:
            proc, url = _serve(args.code, store, llm.base_url, max_calls, args.backlog)
            try:
                row = {"max_calls": max_calls, "backlog": args.backlog, "latency": args.latency}
                row |= {"code": str(args.code), **_measure(url, llm, args.backlog)}
            finally:
                proc.kill()
                proc.wait()
            print(json.dumps(row), flush=True)
            rows.append(row)
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
