"""What hostile replies cost the client: peak memory under a gzip bomb, CPU for the worst replies.

Against :class:`~corrective_rag.testing.HostileLLMServer` on 127.0.0.1, each measurement in a
fresh child process so that one peak never hides another:

- ``gzip_bomb``: peak RSS above the child's baseline while ``OpenAIChatClient`` reads a
  close-delimited event stream under two gzip layers inflating to ``--size`` bytes (it must stop
  at the 4 MB cap), beside ``requests``' own ``iter_content(chunk_size=None)`` reading the same
  stream (``--bare-size``, smaller by default: it inflates whole);
- ``expensive``: CPU seconds to read the worst 4 MB replies: the lenient JSON search over
  unclosed ``{"":``, over nested long arrays and over braces; an event stream of tiny events;
  and a whole ``LLMEvaluator.evaluate`` (client, parse, the per-document re-asks) against an
  ``expensive_json`` server in a process of its own, beside the naive search (a full decode at
  every ``{``) over ``--naive-size`` bytes.

Prints one JSON line per measurement and, with ``--json OUT``, writes them all.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ASK = [{"role": "user", "content": "Is the sky blue?"}]
MB = 1 << 20


def _rss_mb() -> float:
    """The current resident set size in MiB (from /proc)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _gzip_bomb(size: int, bare: bool) -> dict[str, Any]:
    import requests

    from corrective_rag.errors import LLMResponseError
    from corrective_rag.llm.client import OpenAIChatClient
    from corrective_rag.testing import HostileLLMServer

    with HostileLLMServer("gzip_bomb", size=size) as server:
        baseline = _rss_mb()
        started = time.process_time()
        outcome = "read whole"
        if bare:
            url = f"{server.base_url}/chat/completions"
            with requests.post(url, json={"messages": ASK}, stream=True, timeout=600) as reply:
                held = sum(len(chunk) for chunk in reply.iter_content(chunk_size=None))
            outcome = f"{held / MB:.0f} MiB inflated"
        else:
            try:
                OpenAIChatClient(server.base_url, "hostile", timeout=600).complete(ASK)
            except LLMResponseError as exc:
                outcome = str(exc)
        cpu = time.process_time() - started
    return {
        "reader": "requests iter_content(None)" if bare else "OpenAIChatClient",
        "inflates_to_mib": size // MB,
        "wire_bytes": len(server.bomb()),
        "peak_rss_above_baseline_mib": round(_peak_mb() - baseline, 1),
        "cpu_seconds": round(cpu, 3),
        "outcome": outcome,
    }


def _naive_first_object(text: str) -> dict[str, Any] | None:
    """The search before the fix: a full decode tried at every ``{``."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except (json.JSONDecodeError, RecursionError):
            value = None
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    return None


def _cpu(work: Callable[[], object]) -> float:
    started = time.process_time()
    with contextlib.suppress(Exception):  # every hostile reply is expected to fail: its cost counts
        work()
    return round(time.process_time() - started, 3)


def _expensive(naive_size: int) -> list[dict[str, Any]]:
    from corrective_rag.evaluate.llm import LLMEvaluator
    from corrective_rag.llm.client import OpenAIChatClient
    from corrective_rag.llm.jsonparse import parse_json_object
    from corrective_rag.llm.stream import collect_events
    from corrective_rag.types import Document

    texts = {
        'unclosed {"": (4 MB)': '{"":' * 1_000_000,
        "nested long arrays (4 MB)": "".join('{"":[' + "0," * 50_000 for _ in range(40)),
        "braces (4 MB)": "{" * 4_000_000,
    }
    rows = []
    for name, text in texts.items():
        cpu = _cpu(lambda t=text: parse_json_object(t, strict=False))  # type: ignore[misc]
        rows.append({"case": f"lenient parse: {name}", "cpu_seconds": cpu})
    tiny = b"data: {}\n" * 444_000
    chunks = [tiny[i : i + 65536] for i in range(0, len(tiny), 65536)]
    cpu = _cpu(lambda: collect_events(chunks, 4_000_000))
    rows.append({"case": "event stream of 444,000 `data: {}` (4 MB)", "cpu_seconds": cpu})
    naive = '{"":' * (naive_size // 4)
    cpu = _cpu(lambda: _naive_first_object(naive))
    case = f'naive search (a decode at every {{), unclosed {{"": ({naive_size // 1000} KB)'
    rows.append({"case": case, "cpu_seconds": cpu})
    for stream in (False, True):
        # The largest reply under the 4 MB cap: JSON escapes `{"":` as 6 bytes of body; a
        # stream's events carry 16 characters each in about 130 bytes. The server runs in a
        # process of its own, so that its CPU is not counted as the client's.
        repeat = 600_000 if not stream else 50_000
        with _server_process("expensive_json", repeat) as (base_url, requests_made):
            chat = OpenAIChatClient(base_url, "hostile", timeout=600, stream=stream)
            judge = LLMEvaluator(chat, propose=True)
            docs = [Document(id=f"d{i}", text=f"The sky is blue ({i}).") for i in range(4)]
            judge.evaluate("Is the sky blue?", docs[:1])  # warm up: token counter, prompts
            before = requests_made()
            cpu = _cpu(lambda j=judge, d=docs: j.evaluate("Why is the sky blue?", d))  # type: ignore[misc]
            calls = requests_made() - before
        case = f"LLMEvaluator.evaluate of 4 documents, every reply {repeat * 4 // 1000} KB"
        case += f' of unclosed {{"": (stream={stream}, {calls} calls)'
        rows.append({"case": case, "cpu_seconds": cpu})
    return rows


@contextlib.contextmanager
def _server_process(mode: str, repeat: int) -> Iterator[tuple[str, Callable[[], int]]]:
    """A HostileLLMServer in a child process: its URL, and a count of the requests it got."""
    command = [sys.executable, __file__, "--serve", mode, "--repeat", str(repeat)]
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdin is not None and child.stdout is not None
    base_url = child.stdout.readline().strip()

    def requests_made() -> int:
        child.stdin.write("count\n")  # type: ignore[union-attr]
        child.stdin.flush()  # type: ignore[union-attr]
        return int(child.stdout.readline())  # type: ignore[union-attr]

    try:
        yield base_url, requests_made
    finally:
        child.stdin.close()
        child.wait(timeout=60)


def _serve(mode: str, repeat: int) -> None:
    """Serve one hostile mode; print the URL, then a request count per line read from stdin."""
    from corrective_rag.testing import HostileLLMServer

    with HostileLLMServer(mode, repeat=repeat) as server:
        print(server.base_url, flush=True)
        for _ in sys.stdin:
            print(server.request_count, flush=True)


def _child(what: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    if what == "gzip_bomb":
        return [_gzip_bomb(args.size, bare=False)]
    if what == "gzip_bomb_bare":
        return [_gzip_bomb(args.bare_size, bare=True)]
    return _expensive(args.naive_size)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1 << 30, help="bomb's inflated bytes")
    parser.add_argument("--bare-size", type=int, default=256 * MB, help="for the bare reader")
    parser.add_argument("--naive-size", type=int, default=200_000, help="for the naive search")
    parser.add_argument("--json", type=Path, default=None, metavar="OUT")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--serve", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--repeat", type=int, default=100_000, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        _serve(args.serve, args.repeat)
        return 0
    if args.child:
        print(json.dumps(_child(args.child, args)))
        return 0
    rows: list[dict[str, Any]] = []
    for what in ("gzip_bomb", "gzip_bomb_bare", "expensive"):
        command = [sys.executable, __file__, "--child", what, "--size", str(args.size)]
        command += ["--bare-size", str(args.bare_size), "--naive-size", str(args.naive_size)]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"{what} failed:\n{done.stderr}")
        for row in json.loads(done.stdout.splitlines()[-1]):
            print(json.dumps(row), flush=True)
            rows.append(row)
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
