"""Shared parts of the fault tests: a chroma server that can be stopped and restarted, and a
fast deterministic embedder for child processes that index thousands of documents.

Also importable from child processes: put this folder on PYTHONPATH.
"""

from __future__ import annotations

import hashlib
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from corrective_rag.text import tokenize

DIM = 256


class HashEmbedder:
    """Bag-of-words vectors by hashing tokens: exact, fast, the same in every process."""

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        for row, text in enumerate(texts):
            for token in tokenize(text):
                digest = hashlib.blake2b(token.encode(), digest_size=4).digest()
                out[row, int.from_bytes(digest, "big") % DIM] += 1.0
            norm = float(np.linalg.norm(out[row]))
            out[row] = out[row] / norm if norm else out[row]
        return out


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ChromaServer:
    """``chroma run`` on 127.0.0.1 over one data folder, stoppable and restartable on one port."""

    def __init__(self, path: Path) -> None:
        chroma = shutil.which("chroma")
        if chroma is None:
            raise RuntimeError("the chroma command (from chromadb) is not on PATH")
        self.command = [chroma, "run", "--path", str(path), "--host", "127.0.0.1"]
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [*self.command, "--port", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        url = f"http://127.0.0.1:{self.port}/api/v2/heartbeat"
        while True:
            try:
                with urllib.request.urlopen(url, timeout=1) as response:
                    if response.status == 200:
                        return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"chroma did not start (exit {self.proc.poll()})") from None
                time.sleep(0.1)

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None
