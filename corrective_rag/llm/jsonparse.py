"""Reading one JSON object out of a model's reply, strictly or leniently (chosen explicitly).

Strict: the reply, stripped of surrounding whitespace, must be exactly one JSON object.
Lenient: code fences and prose around the object are dropped; the first decodable top-level
``{...}`` wins. Either way a failure raises :class:`VerdictParseError` carrying the raw text, so a
caller can record it as an ungraded verdict rather than guess.

A reply cut short (the model hit its token limit mid-string) is no JSON at all;
:func:`complete_items` still reads the complete objects at the head of its array, so that a
caller keeps what the model finished and asks again only for the rest.
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

from corrective_rag.errors import VerdictParseError

__all__ = ["complete_items", "complete_items_at", "find_json_object", "parse_json_object"]

_SPACE_OR_COMMA = re.compile(r"[\s,]*")
# What a lenient search may read, as a multiple of the reply's length (plus a little for short
# replies). A decode tried at every `{` reads on until it fails: a reply of `{"":` repeated
# (cheap to send) made that quadratic, 20 s of CPU for 600 KB. Each try is charged what the
# decoder read, so the search stays linear in the reply; a reply that exhausts it holds no
# object a model meant to send and is unparseable like any other.
_SEARCH_BUDGET = 2
_SEARCH_SLACK = 64 * 1024
_OPENING = re.compile(r'\{\s*["}]')
_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)
_MAX_FENCES = 8  # fenced blocks searched first; past them, the whole reply is searched


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


class _Budget:
    """Characters the decoder may still read in one lenient search (see ``_SEARCH_BUDGET``)."""

    def __init__(self, length: int) -> None:
        self.left = _SEARCH_BUDGET * length + _SEARCH_SLACK


def _first_object(text: str, budget: _Budget) -> tuple[dict[str, Any], int, int] | None:
    """The first ``{`` of ``text`` that decodes to an object, with its span, while ``budget`` lasts.

    Only a ``{`` that can open an object (``{"`` or ``{}``) is tried. A failed try costs what
    the decoder read and as much again: its error finds its line and column from the start.
    """
    decoder = json.JSONDecoder()
    for opening in _OPENING.finditer(text):
        if budget.left <= 0:
            return None
        start = opening.start()
        try:
            value, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError as exc:
            budget.left -= 2 * exc.pos - start + 1
        except RecursionError:  # nested past the interpreter's limit: how far it read is unknown
            budget.left -= len(text) - start
        else:
            budget.left -= end - start
            if isinstance(value, dict):
                return value, start, end
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
    return find_json_object(text, strict=strict)[0]


def find_json_object(text: str, *, strict: bool) -> tuple[dict[str, Any], int, int]:
    """The object :func:`parse_json_object` reads, and where it is: ``(object, start, end)``.

    ``text[start:end]`` is the object's JSON text (``text[start] == "{"``), so that a reader of
    the reply's tokens finds the very object the parser chose.

    Raises:
        VerdictParseError: as :func:`parse_json_object`.
    """
    if not isinstance(text, str):
        raise VerdictParseError(f"reply must be a string, got {type(text).__name__}", raw="")
    stripped = text.strip()
    lead = len(text) - len(text.lstrip())
    if strict:
        return _strict(stripped), lead, lead + len(stripped)
    try:
        return _strict(stripped), lead, lead + len(stripped)
    except VerdictParseError:
        pass
    budget = _Budget(len(stripped))  # shared by the fenced blocks and the whole reply
    for fence in itertools.islice(_FENCE.finditer(stripped), _MAX_FENCES):
        found = _first_object(fence.group(1), budget)
        if found is not None:
            shift = lead + fence.start(1)
            return found[0], shift + found[1], shift + found[2]
    found = _first_object(stripped, budget)
    if found is None:
        raise VerdictParseError("no JSON object found in reply", raw=text)
    return found[0], lead + found[1], lead + found[2]


def complete_items(text: str, key: str) -> list[dict[str, Any]]:
    """The complete objects at the head of the array under ``key`` in ``text``, even if cut.

    Lenient by nature: for a reply that is not valid JSON because it stops part-way (a token
    limit), e.g. ``{"verdicts": [{...}, {...}, {"id": "d2", "reasoning": "unfini``, this returns
    the two finished objects. A reply without ``"key": [`` (or a leading ``[``) gives ``[]``;
    reading stops at the first item that is not a complete object.
    """
    return [item for item, _, _ in complete_items_at(text, key)]


def complete_items_at(text: str, key: str) -> list[tuple[dict[str, Any], int, int]]:
    """The objects :func:`complete_items` reads, each with its span: ``(object, start, end)``."""
    if not isinstance(text, str):
        return []
    found = re.search(rf'"{re.escape(key)}"\s*:\s*\[', text)
    if found is not None:
        pos = found.end()
    elif text.lstrip().startswith("["):
        pos = text.index("[") + 1
    else:
        return []
    decoder = json.JSONDecoder()
    items: list[tuple[dict[str, Any], int, int]] = []
    while True:
        gap = _SPACE_OR_COMMA.match(text, pos)
        pos = gap.end() if gap else pos
        if pos >= len(text) or text[pos] != "{":
            return items
        start = pos
        try:
            value, pos = decoder.raw_decode(text, pos)
        except (json.JSONDecodeError, RecursionError):
            return items
        if isinstance(value, dict):
            items.append((value, start, pos))
