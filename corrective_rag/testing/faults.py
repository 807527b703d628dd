"""The faults a :class:`~corrective_rag.testing.server.ScriptedLLMServer` can apply to a request.

Each :class:`Fault` is one scripted misbehaviour for one request: an error status, a hang, a
request held until the test releases it, a body dripped or cut short, a reply that is not a
chat completion, a stream that stalls until the client hangs up. A :data:`FaultChooser` picks a
fault per request from its body, so that faults stay deterministic under parallel requests.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

# Fault, FaultChooser: their home is corrective_rag.testing
__all__: list[str] = []

# (request body, how many identical bodies arrived before) -> the fault to apply, or None
FaultChooser = Callable[[Mapping[str, Any], int], "Fault | None"]


@dataclass(frozen=True, slots=True)
class Fault:
    """One scripted misbehaviour, applied to one request. Build with the class methods."""

    kind: str
    status: int = 200
    retry_after: str | None = None
    body: str = ""
    seconds: float = 0.0
    size: int = 0
    finish_reason: str = "stop"

    @classmethod
    def rate_limited(cls, retry_after: str | None = "1") -> Fault:
        """HTTP 429, with ``Retry-After`` (seconds or an HTTP date) unless None."""
        return cls("status", 429, retry_after, '{"error": {"message": "rate limited"}}')

    @classmethod
    def error(cls, status: int = 500, body: str = "", retry_after: str | None = None) -> Fault:
        """An error status; ``{authorization}`` in ``body`` is replaced by the request's header."""
        return cls("status", status, retry_after, body or '{"error": {"message": "boom"}}')

    @classmethod
    def hang(cls, seconds: float) -> Fault:
        """Answer normally, but only after ``seconds`` (past a client's read timeout)."""
        return cls("hang", seconds=seconds)

    @classmethod
    def held(cls) -> Fault:
        """Answer normally, but only once the test calls :meth:`ScriptedLLMServer.release`."""
        return cls("held")

    @classmethod
    def drip(cls, interval: float = 2.0) -> Fault:
        """HTTP 200 with a long body sent one byte every ``interval`` seconds (never finishes)."""
        return cls("drip", seconds=interval)

    @classmethod
    def close_mid_body(cls) -> Fault:
        """Promise a body, send part of it and close the connection."""
        return cls("close")

    @classmethod
    def non_json(cls) -> Fault:
        """HTTP 200 with a body that is not JSON."""
        return cls("raw", body="<html>bad gateway</html>")

    @classmethod
    def wrong_shape(cls) -> Fault:
        """HTTP 200 with JSON that is not a chat completion."""
        return cls("raw", body='{"result": "ok"}')

    @classmethod
    def content(cls, text: str) -> Fault:
        """A well-formed completion whose assistant text is ``text``."""
        return cls("content", body=text)

    @classmethod
    def cut(cls, text: str) -> Fault:
        """A completion of ``text`` ended by the token limit (``finish_reason`` ``length``)."""
        return cls("content", body=text, finish_reason="length")

    @classmethod
    def stalled_stream(cls) -> Fault:
        """Start a streamed reply, then send nothing more until the client closes the connection.

        What a busy model looks like to a client that gave up: the test waits on
        :meth:`ScriptedLLMServer.wait_for_disconnects`, which proves that the client hung up.
        """
        return cls("stall")

    @classmethod
    def huge(cls, size: int = 10_000_000) -> Fault:
        """HTTP 200 streaming ``size`` bytes without a Content-Length."""
        return cls("huge", size=size)
