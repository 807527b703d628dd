"""One HTTP exchange run in a worker thread, so that its caller can stop waiting at any time.

The caller waits on :attr:`Exchange.done`; when it gives up (Ctrl-C, a deadline) it calls
:meth:`Exchange.abandon` (:mod:`corrective_rag.calls.abandon`), which shuts the socket down so
the worker's blocked read ends at once. A streamed reply is complete at ``data: [DONE]``;
:func:`finish_stream` reads the little a server sends after it, so that the connection goes
back to the pool instead of being closed (one TCP and TLS handshake fewer per call).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

import requests
import urllib3.exceptions

from corrective_rag.calls.abandon import Abandonable, response_socket

__all__ = ["Exchange", "finish_stream", "stream_chunks"]

_CHUNK = 64 * 1024
# What may follow a streamed reply's `data: [DONE]` before the connection is given up instead of
# kept: servers end the body right after it (a chunked body's last, empty chunk: 5 bytes), so
# these bounds are only met by a server that keeps streaming or holds the body open.
_AFTER_DONE_BYTES = 64 * 1024
_AFTER_DONE_SECONDS = 1.0


class Exchange(Abandonable):
    """One request's outcome, filled in by its worker thread (see :class:`Abandonable`)."""

    def __init__(self) -> None:
        super().__init__()
        self.done: threading.Event = threading.Event()
        self.response: requests.Response | None = None
        self.body = b""
        self.error: BaseException | None = None


def stream_chunks(response: requests.Response, step: int = _CHUNK) -> Iterator[bytes]:
    """A streamed body as it arrives, decoded, in pieces of at most ``step`` bytes.

    ``iter_content(chunk_size=None)`` hands over whatever one read decodes to: a few kilobytes
    under two gzip layers inflate to a gigabyte in one piece. ``iter_content(step)`` is bounded
    but waits for ``step`` bytes of a body that is not chunked, which a stream may take minutes
    to send. This reads a chunked body chunk by chunk and any other body as soon as bytes come
    (``read1``), both decoded at most ``step`` bytes at a time; urllib3's errors become the
    ``requests`` errors ``iter_content`` raises.
    """
    raw = response.raw
    if not isinstance(raw, urllib3.HTTPResponse):  # an adapter's own body (tests, mocks)
        yield from response.iter_content(step)
        return
    try:
        if raw.chunked and raw.supports_chunked_reads():
            yield from raw.read_chunked(step, decode_content=True)
            return
        while chunk := raw.read1(step, decode_content=True):
            yield chunk
    except urllib3.exceptions.ProtocolError as exc:
        raise requests.exceptions.ChunkedEncodingError(exc) from exc
    except urllib3.exceptions.DecodeError as exc:
        raise requests.exceptions.ContentDecodingError(exc) from exc
    except urllib3.exceptions.ReadTimeoutError as exc:
        raise requests.exceptions.ConnectionError(exc) from exc
    except urllib3.exceptions.SSLError as exc:
        raise requests.exceptions.SSLError(exc) from exc


def finish_stream(response: requests.Response, rest: Iterator[bytes], end: float) -> bool:
    """Read the rest of a streamed body whose reply is complete; True when it ended in bounds.

    ``requests`` hands a connection back to its pool only once the body has been read to its
    end; closing a response read part way closes the connection. What follows ``[DONE]`` is read
    for at most ``_AFTER_DONE_SECONDS`` in all (never past ``end``) and ``_AFTER_DONE_BYTES``,
    with the socket's read timeout lowered for the while and restored after. The caller closes
    ``response`` either way: that keeps the connection when the body ended here, and closes it
    when it did not.
    """
    stop = min(end, time.monotonic() + _AFTER_DONE_SECONDS)
    sock = response_socket(response)
    before = sock.gettimeout() if sock is not None else None
    size = 0
    try:
        with contextlib.suppress(OSError):
            if sock is not None:
                sock.settimeout(max(0.001, stop - time.monotonic()))
        for chunk in rest:
            size += len(chunk)
            if size > _AFTER_DONE_BYTES or time.monotonic() >= stop:
                return False
        return True
    except (requests.RequestException, OSError):
        return False  # the server cut or held the connection after a complete reply
    finally:
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.settimeout(before)
