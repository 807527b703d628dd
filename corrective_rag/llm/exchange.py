"""One HTTP exchange run in a worker thread, so that its caller can stop waiting at any time.

The caller waits on :attr:`Exchange.done`; when it gives up (Ctrl-C, a deadline) it calls
:meth:`Exchange.abandon` (:mod:`corrective_rag.calls.abandon`), which shuts the socket down so
the worker's blocked read ends at once.
"""

from __future__ import annotations

import threading

import requests

from corrective_rag.calls.abandon import Abandonable
from corrective_rag.errors import LLMResponseError

__all__ = ["Exchange", "read_capped"]

_CHUNK = 64 * 1024


class Exchange(Abandonable):
    """One request's outcome, filled in by its worker thread (see :class:`Abandonable`)."""

    def __init__(self) -> None:
        super().__init__()
        self.done = threading.Event()
        self.response: requests.Response | None = None
        self.body = b""
        self.error: BaseException | None = None


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
