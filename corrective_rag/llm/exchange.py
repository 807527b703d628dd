"""One HTTP exchange run in a worker thread, so that its caller can stop waiting at any time.

The caller waits on :attr:`Exchange.done`; when it gives up (Ctrl-C, a deadline) it calls
:meth:`Exchange.abandon`, which shuts the socket down so the worker's blocked read ends at once.
"""

from __future__ import annotations

import contextlib
import socket
import threading

import requests

from corrective_rag.errors import LLMResponseError

__all__ = ["Exchange", "read_capped"]

_CHUNK = 64 * 1024


class Exchange:
    """One request's outcome, filled in by its worker thread."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.response: requests.Response | None = None
        self.body = b""
        self.error: BaseException | None = None
        self._live: requests.Response | None = None
        self._abandoned = False
        self._lock = threading.Lock()

    def attach(self, response: requests.Response) -> None:
        """Record the open response, so that an abandoning caller can cut its socket."""
        with self._lock:
            self._live = response
            abandoned = self._abandoned
        if abandoned:
            _shutdown(response)

    def abandon(self) -> None:
        """The caller stopped waiting: cut the socket so the worker stops reading at once."""
        with self._lock:
            self._abandoned = True
            live = self._live
        if live is not None:
            _shutdown(live)


def read_capped(response: requests.Response, limit: int) -> bytes:
    """The response body, never holding more than ``limit`` bytes of it in memory."""
    declared = response.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > limit:
        raise LLMResponseError(
            f"response body of {declared} bytes exceeds the {limit}-byte limit",
            status=response.status_code,
        )
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_content(_CHUNK):
        size += len(chunk)
        if size > limit:
            raise LLMResponseError(
                f"response body exceeds the {limit}-byte limit", status=response.status_code
            )
        chunks.append(chunk)
    return b"".join(chunks)


def _shutdown(response: requests.Response) -> None:
    """Shut the response's socket down, which wakes a read blocked on it in another thread."""
    connection = getattr(response.raw, "connection", None)
    sock = getattr(connection, "sock", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
