"""What the MCP server's tests share: a real store, and the server in a process of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def index_store(folder: Path, files: Mapping[str, str]) -> Path:
    """A real store of ``files`` (name to text), made by ``corrective-rag index`` in ``folder``."""
    from corrective_rag.cli.main import main

    docs = folder / "docs"
    docs.mkdir()
    for name, text in files.items():
        (docs / name).write_text(text, encoding="utf-8")
    assert 0 == main(["index", str(docs), "--store", str(folder / "store"), "--no-progress"])
    return folder / "store"


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a child process that imports this tree's package first (no MCP
    token but one given in ``extra``)."""
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    env.pop("CORRECTIVE_RAG_MCP_TOKEN", None)
    return {**env, **extra}


def serve_http(
    store: Path, *extra: str, env: Mapping[str, str] | None = None
) -> tuple[subprocess.Popen[str], str]:
    """``corrective-rag mcp --http 127.0.0.1:0`` on the store (``env``: more variables); the
    process and its URL."""
    args = ["mcp", "--store", str(store), "--http", "127.0.0.1:0", *extra]
    proc = subprocess.Popen(
        [sys.executable, "-m", "corrective_rag", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(**(env or {})),
    )
    assert proc.stderr is not None
    line = proc.stderr.readline()  # the marker line, written once the socket is bound
    assert line.startswith("corrective-rag mcp: serving http://127.0.0.1:"), line
    return proc, line.rsplit(" ", 1)[1].strip()
