"""The CLI's up-front probe of an LLM server ends on time and says what it saw."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from corrective_rag.cli.wiring import check_reachable
from corrective_rag.errors import LLMTransportError

Handler = Callable[[socket.socket, threading.Event], None]


@contextmanager
def _raw_server(
    handle: Callable[[socket.socket, threading.Event], None],
) -> Iterator[tuple[str, threading.Event]]:
    """A TCP server on 127.0.0.1 whose one connection is handled by ``handle``.

    Yields the base URL and an event set once the client has gone (its socket read EOF or
    failed), so a test can wait on the hang-up instead of the clock.
    """
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    gone = threading.Event()
    stop = threading.Event()

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)  # the request
            handle(conn, stop)
            conn.settimeout(30)
            try:
                while conn.recv(1):
                    pass
            except OSError:
                pass
            gone.set()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1", gone
    finally:
        stop.set()
        listener.close()


def _silent(conn: socket.socket, stop: threading.Event) -> None:
    stop.wait(60)  # accepts, reads the request, answers nothing


def _dripped_headers(conn: socket.socket, stop: threading.Event) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\n")
    while not stop.wait(0.5):  # one header byte at a time, never ending the headers
        try:
            conn.sendall(b"X")
        except OSError:
            return


def _dripped_body(conn: socket.socket, stop: threading.Event) -> None:
    conn.sendall(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
    )
    while not stop.wait(0.2):  # a body that never ends
        try:
            conn.sendall(b" ")
        except OSError:
            return


@pytest.mark.parametrize("handle", [_silent, _dripped_headers], ids=["silent", "dripped-headers"])
def test_a_server_that_accepts_but_never_answers_is_reported_as_silent(handle) -> None:
    """One deadline covers the whole probe: a silent or dripping server is an error, not a hang."""
    silent = "accepted the connection but sent no answer"
    with _raw_server(handle) as (url, _), pytest.raises(LLMTransportError, match=silent):
        check_reachable(url)


def test_the_body_is_never_read() -> None:
    """A status line is an answer: a server dripping its body forever does not hold the probe."""
    with _raw_server(_dripped_body) as (url, gone):
        check_reachable(url)
        assert gone.wait(30)  # the probe hung up instead of reading the body


def test_nothing_listening_is_reported_as_unreachable() -> None:
    """A refused connection says nothing answers at that address."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again before the probe: nothing listens there
    with pytest.raises(LLMTransportError, match="nothing answers there"):
        check_reachable(f"http://127.0.0.1:{port}/v1")
