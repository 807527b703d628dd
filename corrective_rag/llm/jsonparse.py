"""Reading one JSON object out of a model's reply, strictly or leniently (chosen explicitly).

Strict: the reply, stripped of surrounding whitespace, must be exactly one JSON object.
Lenient: code fences and prose around the object are dropped; the first decodable top-level
``{...}`` wins. Either way a failure raises :class:`VerdictParseError` carrying the raw text, so a
caller can record it as an ungraded verdict rather than guess.
"""

from __future__ import annotations

import json
import re
from typing import Any

from corrective_rag.errors import VerdictParseError

__all__ = ["parse_json_object"]

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


def _strict(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise VerdictParseError(f"reply is not valid JSON: {exc}", raw=text) from exc
    if not isinstance(value, dict):
        raise VerdictParseError(
            f"reply is JSON but not an object (got {type(value).__name__})", raw=text
        )
    return value


def _first_object(text: str) -> dict[str, Any] | None:
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except (json.JSONDecodeError, RecursionError):
            value = None
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    return None


def parse_json_object(text: str, *, strict: bool) -> dict[str, Any]:
    """Return the JSON object in ``text``.

    Args:
        text: the model's reply.
        strict: ``True`` accepts only a reply that is exactly one JSON object (whitespace
            around it allowed); ``False`` also accepts one object wrapped in code fences or prose.

    Raises:
        VerdictParseError: no JSON object could be read; ``raw`` holds ``text``.
    """
    if not isinstance(text, str):
        raise VerdictParseError(f"reply must be a string, got {type(text).__name__}", raw="")
    if strict:
        return _strict(text.strip())
    stripped = text.strip()
    try:
        return _strict(stripped)
    except VerdictParseError:
        pass
    for block in _FENCE.findall(stripped):
        found = _first_object(block)
        if found is not None:
            return found
    found = _first_object(stripped)
    if found is None:
        raise VerdictParseError("no JSON object found in reply", raw=text)
    return found
