"""Keep secrets (an API key) out of everything the package records, prints, logs or searches.

One rule, applied at two kinds of places: the LLM client passes every text it returns (reply
text, model name, error bodies) through :func:`redact`, so a server that echoes the key in a
normal reply cannot carry it into a verdict, a rewrite that is searched, an answer or a results
file; the command line passes every log event, every line it prints and every result it writes
through the same function, so the key is hidden whatever its source (a document, a question).

Every occurrence of a secret becomes :data:`MASK`. Secrets shorter than :data:`MIN_SECRET_LENGTH`
are placeholders such as ``none`` or ``EMPTY`` that local servers accept, not secrets: replacing
them would mangle ordinary words, so they are left alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["MASK", "MIN_SECRET_LENGTH", "redact", "redact_tree", "secrets_of"]

MASK = "***"
# Real API keys are 20+ characters; 8 keeps short test keys hidden while sparing placeholders
# like "none", "EMPTY" or "local" that would otherwise be masked inside ordinary words.
MIN_SECRET_LENGTH = 8


def secrets_of(candidates: Iterable[str | None]) -> tuple[str, ...]:
    """The candidates worth hiding: strings of at least ``MIN_SECRET_LENGTH``, longest first."""
    found = {c for c in candidates if isinstance(c, str) and len(c) >= MIN_SECRET_LENGTH}
    return tuple(sorted(found, key=len, reverse=True))


def redact(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` with every occurrence of each secret replaced by :data:`MASK`."""
    for secret in secrets_of(secrets):
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def redact_tree(value: Any, secrets: Iterable[str | None]) -> Any:
    """A copy of a JSON-like value (dicts, lists, tuples, strings) with secrets redacted.

    Dict keys are redacted too; other values (numbers, None, objects) are returned as they are.
    """
    keys = secrets_of(secrets)
    if not keys:
        return value

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            return redact(v, keys)
        if isinstance(v, dict):
            return {walk(k): walk(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return type(v)(walk(x) for x in v)
        return v

    return walk(value)
