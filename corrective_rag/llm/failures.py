"""How the chat client classifies a failed request: fixable by the user, by a retry, or by format.

Pure functions over a status, a body or an exception; the client decides what to do with them.
"""

from __future__ import annotations

import re

import urllib3.exceptions

from corrective_rag.errors import LLMResponseError

__all__ = [
    "is_read_timeout",
    "permanent_hint",
    "rejects_format",
    "rejects_logprobs",
    "rejects_stream",
]

# Statuses that no retry can fix, with what the user must change. OpenAI answers an unknown
# model with 404 (code model_not_found); some servers use 400 with "model ... not found".
_PERMANENT = {
    401: "wrong or missing API key: check OPENAI_API_KEY",
    403: "the API key may not use this model or endpoint: check the key and --model",
    404: "wrong URL or unknown model: check --llm-url and --model",
}
_UNKNOWN_MODEL = re.compile(r"model\W.{0,80}(not found|does not exist|unknown|not exist)", re.I)
# Words in a 4xx body that say the server does not take the requested response_format.
_REJECTION_HINTS = ("response_format", "json_schema", "json_object", "unsupported", "not support")


def permanent_hint(status: int | None, body: str = "") -> str | None:
    """What the user must fix when ``status`` (with ``body``) is a failure no retry can fix.

    401 and 403 (the key), 404 (the URL or the model), and a 400 saying the model is unknown;
    ``None`` for anything else.
    """
    if status in _PERMANENT:
        return _PERMANENT[status]
    if status == 400 and _UNKNOWN_MODEL.search(body or ""):
        return "unknown model: check --model"
    return None


def rejects_format(exc: LLMResponseError) -> bool:
    """A 4xx (not 429) whose body says the response_format / schema is not supported."""
    status = exc.status or 0
    body = exc.body.lower()
    return 400 <= status < 500 and status != 429 and any(h in body for h in _REJECTION_HINTS)


def rejects_stream(exc: LLMResponseError) -> bool:
    """A 4xx (not 429) whose body names ``stream``: the server does not take streamed replies."""
    status = exc.status or 0
    return 400 <= status < 500 and status != 429 and "stream" in exc.body.lower()


def is_read_timeout(exc: BaseException) -> bool:
    """Whether a connection error from ``requests`` is, somewhere in its chain, a read timeout."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, urllib3.exceptions.ReadTimeoutError | TimeoutError):
            return True
        nested = current.args[0] if current.args else None
        current = nested if isinstance(nested, BaseException) else current.__context__
    return False


def rejects_logprobs(exc: LLMResponseError) -> bool:
    """A 4xx (not 429) whose body names ``logprobs``: the server returns no token probabilities."""
    status = exc.status or 0
    return 400 <= status < 500 and status != 429 and "logprobs" in exc.body.lower()
