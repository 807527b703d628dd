"""A response body read under a size cap, for every client that reads one (LLM and web alike).

The cap is checked against ``Content-Length`` before a byte is read and again as chunks arrive,
so a server that lies about the length, or sends none, holds at most one chunk past the cap.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import requests

__all__ = ["read_capped"]

_CHUNK = 64 * 1024


def read_capped(
    response: requests.Response, limit: int, too_big: Callable[[str], Exception]
) -> bytes:
    """The body of a streamed ``response``, never holding more than ``limit`` bytes of it.

    Args:
        response: a response opened with ``stream=True``.
        limit: the most bytes the body may have.
        too_big: the error to raise, made from a message such as ``"body exceeds the
            1024-byte limit"`` (each client says whose body it was and raises its own kind).
    """
    declared = response.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_big(f"body of {declared} bytes exceeds the {limit}-byte limit")
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_content(_CHUNK):
        size += len(chunk)
        if size > limit:
            raise too_big(f"body exceeds the {limit}-byte limit")
        chunks.append(chunk)
    return b"".join(chunks)
