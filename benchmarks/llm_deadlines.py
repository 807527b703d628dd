"""How long the real command takes to end when the LLM server misbehaves, and after Ctrl-C.

Runs ``python3 -m corrective_rag`` as a user would, against servers on 127.0.0.1, over a tiny
store built here (no data folder needed), with default settings unless told otherwise:

* ``never-answers``: a TCP server that accepts connections and never sends a byte;
* ``holds-chat``: the scripted server answers ``/models`` but holds every chat request;
* ``ctrl-c run`` / ``ctrl-c batch``: SIGINT once the server holds a request; seconds from the
  signal to the exit;
* ``judge-check``: plain, ``--compare`` and ``--pairs`` against a server that drips every reply,
  with ``--deadline 5 --timeout 2``: seconds to the exit and its one line.

    python benchmarks/llm_deadlines.py --json OUT.json [--only ctrl-c|judge-check]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

DOCS = [
    ("bees", "Honey bees make honey from flower nectar they collect in the hive."),
    ("volcano", "Volcanoes erupt molten lava and ash when magma pressure rises."),
    ("tides", "Tides follow the pull of the Moon and the Sun on the oceans."),
    ("bread", "Bread dough rises because yeast ferments sugar into gas."),
    ("violin", "Violins have four strings tuned in fifths and are played with a bow."),
    ("glacier", "Glaciers carve valleys as compacted ice slowly flows downhill."),
]
QUESTION = "How do bees make honey?"


def _env() -> dict[str, str]:
    root = str(Path(__file__).resolve().parents[1])
    return dict(os.environ, PYTHONPATH=root, HF_HUB_OFFLINE="1")


def _store(tmp: Path) -> Path:
    from corrective_rag.store.hybrid import HybridStore
    from corrective_rag.types import Document

    path = tmp / "store"
    with HybridStore.open(path) as store:
        store.add([Document(i, t) for i, t in DOCS])
    return path


def _silent_server() -> tuple[socket.socket, str]:
    """Accept connections, read nothing, answer nothing."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            held.append(conn)

    threading.Thread(target=accept, daemon=True).start()
    return sock, f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


def _run_to_end(command: list[str]) -> dict:
    started = time.monotonic()
    proc = subprocess.run(command, env=_env(), capture_output=True, text=True, check=False)
    last = (proc.stderr.strip().splitlines() or [""])[-1]
    return {
        "seconds": round(time.monotonic() - started, 1),
        "exit_code": proc.returncode,
        "last_stderr_line": last[:300],
    }


def _command(store: Path, url: str, *args: str) -> list[str]:
    return [
        sys.executable, "-m", "corrective_rag", *args, "--store", str(store),
        "--llm-url", url, "--model", "m",
    ]  # fmt: skip


def never_answers(store: Path) -> dict:
    sock, url = _silent_server()
    try:
        return _run_to_end(_command(store, url, "run", QUESTION))
    finally:
        sock.close()


def holds_chat(store: Path) -> dict:
    from corrective_rag.testing import Fault, ScriptedLLMServer

    with ScriptedLLMServer(faults=lambda request, n: Fault.held()) as server:
        out = _run_to_end(_command(store, server.base_url, "run", QUESTION))
        out["chat_requests"] = server.request_count
    return out


def _ctrl_c(command: list[str], server: object, requests: int) -> dict:
    proc = subprocess.Popen(command, env=_env(), stderr=subprocess.PIPE, text=True)
    if not server.wait_for_requests(requests, timeout=600):  # type: ignore[attr-defined]
        proc.kill()
        raise RuntimeError("the command sent no LLM request")
    signalled = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate()
    return {
        "seconds_from_sigint_to_exit": round(time.monotonic() - signalled, 2),
        "exit_code": proc.returncode,
        "last_stderr_line": (stderr.strip().splitlines() or [""])[-1][:300],
    }


def ctrl_c_run(store: Path) -> dict:
    from corrective_rag.testing import Fault, ScriptedLLMServer

    with ScriptedLLMServer(faults=lambda request, n: Fault.held()) as server:
        return _ctrl_c(_command(store, server.base_url, "run", QUESTION), server, 1)


def ctrl_c_batch(store: Path, tmp: Path) -> dict:
    from corrective_rag.runs.records.results import read_results
    from corrective_rag.testing import Fault, ScriptedLLMServer

    queries = tmp / "q.jsonl"
    queries.write_text(
        "".join(json.dumps({"id": f"q{i}", "query": f"{QUESTION} {i}"}) + "\n" for i in range(8))
    )
    out = tmp / "r.jsonl"
    with ScriptedLLMServer(faults=lambda request, n: Fault.held()) as server:
        command = _command(
            store, server.base_url, "batch", str(queries), "--out", str(out), "--no-progress"
        )
        result = _ctrl_c(command, server, 4)
    lines = read_results(out)
    result["lines_written"] = len(lines)
    result["interrupted_lines"] = sum(not r.ok for r in lines)
    return result


def judge_check_drip(tmp: Path) -> dict:
    from corrective_rag.evaluate.check.pairs import CHECK_PAIRS
    from corrective_rag.testing import HostileLLMServer

    pairs = tmp / "pairs.jsonl"
    pairs.write_text(
        "".join(
            json.dumps({"question": p.question, "text": p.document.text, "relevant": p.relevant})
            + "\n"
            for p in CHECK_PAIRS
        )
    )
    written = ["--calibration", str(tmp / "profile.json")]
    modes = {
        "plain": [],
        "compare": ["--compare", *written],
        "pairs": ["--pairs", str(pairs), *written],
    }
    out = {}
    with HostileLLMServer("drip", interval=0.2) as server:
        for name, more in modes.items():
            command = [
                sys.executable, "-m", "corrective_rag", "judge-check", "--llm-url",
                server.base_url, "--model", "m", "--deadline", "5", "--timeout", "2", *more,
            ]  # fmt: skip
            out[name] = _run_to_end(command)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", metavar="OUT", help="write the figures as JSON")
    parser.add_argument("--only", choices=["deadlines", "ctrl-c", "judge-check"], default=None)
    args = parser.parse_args()
    figures: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp_text:
        tmp = Path(tmp_text)
        store = _store(tmp)
        if args.only in (None, "deadlines"):
            figures["never_answers_run"] = never_answers(store)
            figures["holds_chat_run"] = holds_chat(store)
        if args.only in (None, "ctrl-c"):
            figures["ctrl_c_run"] = ctrl_c_run(store)
            figures["ctrl_c_batch"] = ctrl_c_batch(store, tmp)
        if args.only in (None, "judge-check"):
            figures["judge_check_drip"] = judge_check_drip(tmp)
    text = json.dumps(figures, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
