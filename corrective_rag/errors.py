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

This module also holds :func:`cut_text`, the one way the package cuts a text to a limit (an
error's body, a verdict's reasoning, a span attribute, a terminal cell, a page field), with
its named policies (``CUT_*``): it sits here, in the lowest layer, because the errors cut
the bodies they carry and every other layer may import it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

# CorrectiveRAGError: its home is corrective_rag
__all__ = [
    "CUT_BARE",
    "CUT_LINE",
    "CUT_MESSAGE",
    "CUT_SPAN",
    "CUT_STORED",
    "BusyError",
    "Cancelled",
    "ConfigError",
    "CutPolicy",
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
    "cut_text",
]

_BODY_LIMIT = 500  # enough to show a server's error message, short enough for a log line


@dataclass(frozen=True, slots=True)
class CutPolicy:
    """How :func:`cut_text` marks a text it cut: one of the ``CUT_*`` policies.

    Attributes:
        marker: added to a cut text; ``{length}`` is the whole text's length in characters,
            ``{limit}`` the limit.
        within: the marker counts toward the limit, so the result is never longer than it (a
            stored field, a span attribute, a terminal cell); ``False``: the limit bounds the
            text kept and the marker follows it (a message that says where it was cut).
    """

    marker: str
    within: bool = True


# A verdict's reasoning, a ``missing`` item, a raw reply: stored, so never past the limit.
CUT_STORED = CutPolicy(" [... cut: {length:,} characters]")
# A span attribute (docs/tracing.md#bounds names this marker).
CUT_SPAN = CutPolicy("…[cut: {length} chars]")
# A field whose cut is said elsewhere (an MCP tool's ``truncated`` flag): no marker.
CUT_BARE = CutPolicy("")
# One terminal line (measured in columns by the caller's ``width``).
CUT_LINE = CutPolicy("…")
# A message or a page field: the first ``limit`` characters, then how long the text was.
CUT_MESSAGE = CutPolicy("… (cut at {limit:,} of {length:,} characters)", within=False)


def cut_text(
    text: str,
    limit: int,
    policy: CutPolicy = CUT_MESSAGE,
    *,
    width: Callable[[str], int] | None = None,
    length: int | None = None,
) -> str:
    """``text`` whole when it fits in ``limit``; else its start and ``policy``'s marker.

    The one rule for every policy: a text within the limit comes back unchanged. A ``within``
    policy never returns more than ``limit`` (so cutting its result again changes nothing); when
    the marker itself does not fit (``limit`` shorter than the marker), the text's first
    ``limit`` characters come back without it. A negative limit is read as 0.

    Args:
        text: the text, or only its start when ``length`` says it is longer (a caller that
            read a bounded prefix of a huge text).
        limit: the bound, in characters, or in the units of ``width``.
        policy: how the cut is marked (``CUT_STORED``, ``CUT_SPAN``, ``CUT_BARE``,
            ``CUT_LINE``, ``CUT_MESSAGE``).
        width: the size of one character (terminal columns); ``None``: each counts one.
        length: the whole text's length when ``text`` is only its start; it is then cut even
            if the start fits.
    """
    limit = max(limit, 0)
    whole = len(text) if length is None else max(length, len(text))
    head = _within(text, limit, width)
    if whole == len(text) and len(head) == len(text):
        return text
    mark = policy.marker.format(length=whole, limit=limit)
    if not policy.within:
        return head + mark
    room = limit - (len(mark) if width is None else sum(map(width, mark)))
    if room < 0:
        return head
    return _within(text, room, width) + mark


def _within(text: str, room: int, width: Callable[[str], int] | None) -> str:
    """The longest start of ``text`` whose size is at most ``room``."""
    if width is None:
        return text[:room]
    used = 0
    for i, ch in enumerate(text):
        used += width(ch)
        if used > room:
            return text[:i]
    return text


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
        self.body: str = cut_text(body, _BODY_LIMIT)
        super().__init__(_with_status(message, status, self.body))


class SearchError(CorrectiveRAGError):
    """A web-search API gave no usable answer (after its retries, within its deadline).

    Attributes:
        status: HTTP status code, or ``None`` when there was no usable HTTP exchange.
        body: the response body, shortened; never contains request headers or keys.
    """

    def __init__(self, message: str, *, status: int | None = None, body: str = "") -> None:
        self.status = status
        self.body: str = cut_text(body, _BODY_LIMIT)
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
        self.raw: str = cut_text(raw, 2000)
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
