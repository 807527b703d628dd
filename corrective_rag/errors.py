"""The package's one exception tree.

Every error the package raises on purpose derives from :class:`CorrectiveRAGError`, so a caller
can catch everything of ours with one ``except`` and still tell the kinds apart::

    CorrectiveRAGError
    ├── ConfigError            bad constructor or call arguments (also a ValueError)
    ├── InputError             bad user data: queries, documents, files, JSONL (also a ValueError)
    ├── StoreError             the hybrid store failed or is inconsistent
    │   ├── DuplicateIdError       ids repeated within one write call
    │   ├── FilterTooLargeError    a metadata filter past the store's bounds (also an InputError)
    │   ├── StoreConsistencyError  BM25 and dense sides disagree and could not be repaired
    │   └── StoreLockedError       another writer holds a persistent store
    ├── LLMError               an OpenAI-compatible endpoint failed
    │   ├── LLMTransportError      no usable HTTP exchange (connection refused, reset, ...)
    │   │   └── LLMTimeoutError        connect or read timeout
    │   └── LLMResponseError       the server answered with an error status or an unusable body
    ├── SearchError            a web-search API or page fetch failed (status and body kept)
    │   └── SearchSkippedError     not sent: the provider asked to wait and the wait is not over
    ├── VerdictParseError      a model's reply could not be read as a verdict (keeps the raw text)
    ├── BusyError              a server has no room for another call now (try again later)
    └── Cancelled              the caller cancelled (Ctrl-C) while a call was in flight

Hitting a cap (iterations, budget) is not an error: it is a ``StopReason`` on the result.
"""

from __future__ import annotations

# CorrectiveRAGError: its home is corrective_rag
__all__ = [
    "BusyError",
    "Cancelled",
    "ConfigError",
    "DuplicateIdError",
    "FilterTooLargeError",
    "InputError",
    "LLMError",
    "LLMResponseError",
    "LLMTimeoutError",
    "LLMTransportError",
    "SearchError",
    "SearchSkippedError",
    "StoreConsistencyError",
    "StoreError",
    "StoreLockedError",
    "VerdictParseError",
]

_BODY_LIMIT = 500  # enough to show a server's error message, short enough for a log line


def shorten(text: str, limit: int = _BODY_LIMIT) -> str:
    """Return ``text`` cut to ``limit`` characters, marking the cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [{len(text) - limit} more characters]"


def _with_status(message: str, status: int | None, body: str) -> str:
    detail = f" (HTTP {status})" if status is not None else ""
    return f"{message}{detail}: {body}" if body else f"{message}{detail}"


class CorrectiveRAGError(Exception):
    """Base of every error raised on purpose by corrective_rag."""


class ConfigError(CorrectiveRAGError, ValueError):
    """An argument or setting is out of range or inconsistent."""


class InputError(CorrectiveRAGError, ValueError):
    """User data (a query, a document, a file, a JSONL line) cannot be used."""


class StoreError(CorrectiveRAGError):
    """The hybrid store could not complete an operation."""


class DuplicateIdError(StoreError, InputError):
    """The same document id appears more than once in one write call."""

    def __init__(self, ids: list[str]) -> None:
        self.ids: list[str] = sorted(set(ids))
        shown = ", ".join(repr(i) for i in self.ids[:10])
        more = f" and {len(self.ids) - 10} more" if len(self.ids) > 10 else ""
        super().__init__(f"duplicate document ids in one call: {shown}{more}")


class FilterTooLargeError(StoreError, InputError):
    """A metadata filter holds more values, terms or nesting than a store reads (refused first)."""


class StoreConsistencyError(StoreError):
    """The BM25 and dense sides of a store disagree and were not repaired."""


class StoreLockedError(StoreError):
    """Another process holds the write lock of a persistent store."""


class LLMError(CorrectiveRAGError):
    """An LLM endpoint could not give a usable answer."""


class LLMTransportError(LLMError):
    """The HTTP exchange itself failed (connection refused, reset, broken body)."""


class LLMTimeoutError(LLMTransportError):
    """The endpoint did not connect or answer within the timeout."""


class LLMResponseError(LLMError):
    """The endpoint answered with an error status or a body we cannot use.

    Attributes:
        status: HTTP status code, or ``None`` when the status was fine but the body was not.
        body: the response body, shortened; never contains request headers or keys.
    """

    def __init__(self, message: str, *, status: int | None = None, body: str = "") -> None:
        self.status = status
        self.body: str = shorten(body)
        super().__init__(_with_status(message, status, self.body))


class SearchError(CorrectiveRAGError):
    """A web-search API gave no usable answer (after its retries, within its deadline).

    Attributes:
        status: HTTP status code, or ``None`` when there was no usable HTTP exchange.
        body: the response body, shortened; never contains request headers or keys.
    """

    def __init__(self, message: str, *, status: int | None = None, body: str = "") -> None:
        self.status = status
        self.body: str = shorten(body)
        super().__init__(_with_status(message, status, self.body))


class SearchSkippedError(SearchError):
    """A search not sent: its provider asked to wait (``Retry-After``) and that time is not over.

    Attributes:
        retry_after: seconds left of the wait the provider asked for.
    """

    def __init__(self, message: str, *, retry_after: float) -> None:
        self.retry_after = retry_after
        super().__init__(message)


class VerdictParseError(CorrectiveRAGError):
    """A model reply could not be parsed into verdicts.

    Attributes:
        raw: the reply text as received (shortened).
    """

    def __init__(self, message: str, *, raw: str = "") -> None:
        self.raw: str = shorten(raw, 2000)
        super().__init__(message)


class BusyError(CorrectiveRAGError):
    """A server refused a call at once because as many calls as it lets wait are waiting.

    Not a failure of the call: nothing ran; the same call later may be served.
    """


class Cancelled(CorrectiveRAGError):
    """An in-flight call was cancelled (Ctrl-C, or a cancel event set by the caller).

    Deliberately not an :class:`LLMError`: a cancelled call is not a failed one, so nothing
    records it as an ungraded verdict or a failed rewrite; it ends the run.
    """
