"""Responses a worker thread reads, which the waiting caller can cut off when it gives up.

A read blocked on a socket ends only when the socket does: when the caller stops waiting (a
deadline, Ctrl-C) it shuts the sockets of the responses the worker registered, so the worker
returns at once instead of reading on for nobody. Shared by the LLM client's exchanges and the
web client's transfers.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Any

__all__ = ["Abandonable", "response_socket", "shutdown"]


class Abandonable:
    """Open responses a worker registers (:meth:`attach`) and its caller cuts (:meth:`abandon`)."""

    def __init__(self) -> None:
        self._live: list[Any] = []
        self._abandoned = False
        self._lock = threading.Lock()

    def attach(self, response: Any) -> None:
        """Record an open response, so that an abandoning caller can cut its socket."""
        with self._lock:
            self._live.append(response)
            abandoned = self._abandoned
        if abandoned:
            shutdown(response)

    def abandon(self) -> None:
        """The caller stopped waiting: cut the sockets so the worker stops reading at once."""
        with self._lock:
            self._abandoned = True
            live = list(self._live)
        for response in live:
            shutdown(response)


def response_socket(response: Any) -> socket.socket | None:
    """The socket a ``requests`` response reads from (None once its body is closed).

    A kept-alive connection holds its socket; a body delimited by the connection's close (no
    ``Content-Length``, not chunked) does not: ``http.client`` lets go of the connection's socket
    at once and the body's file object alone reads on from it, so it is looked up there too.
    """
    raw = getattr(response, "raw", None)
    sock = getattr(getattr(raw, "connection", None), "sock", None)
    if isinstance(sock, socket.socket):
        return sock
    # urllib3 response -> http.client.HTTPResponse -> BufferedReader -> SocketIO -> socket
    body = getattr(getattr(raw, "_fp", None), "fp", None)
    sock = getattr(getattr(body, "raw", None), "_sock", None)
    return sock if isinstance(sock, socket.socket) else None


def shutdown(response: Any) -> None:
    """Shut a ``requests`` response's socket down, which wakes a read blocked on it elsewhere."""
    sock = response_socket(response)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
