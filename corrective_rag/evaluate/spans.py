r"""Where each verdict's ``relevant`` value is in a grading reply, as the evaluator reads it.

A verdict's token probability is read at the token that writes its ``relevant`` value, so the
reader must find the very value the evaluator's parser keeps, for the very document the parser
gives it to. :func:`relevant_values` walks the reply once with the parser's own rules:

- the object is the one :func:`~corrective_rag.llm.jsonparse.find_json_object` finds (code
  fences and prose around it as the lenient parser skips them); its verdicts are the array under
  its last ``"verdicts"`` key (json keeps a repeated key's last value), else the complete items
  of a reply cut short (:func:`~corrective_rag.llm.jsonparse.complete_items_at`), else a lone
  bare verdict object;
- a verdict's value is its last top-level ``relevant`` key (``is_relevant`` when it has none);
  a ``"relevant"`` inside a string or a nested object is not the verdict's;
- its document is :func:`~corrective_rag.evaluate.normalise.verdict_id` of the object, the one
  id sent when it names none and one was sent, and only an id that was sent.

Linear in the reply: the verdicts are decoded by json's C scanner once more, and their keys found
in one regular-expression pass; verdicts holding objects of their own or ``\u`` escapes are
walked key by key.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import Any, NamedTuple

from corrective_rag.errors import VerdictParseError
from corrective_rag.evaluate.normalise import verdict_id
from corrective_rag.llm.jsonparse import complete_items_at, find_json_object

__all__ = ["RelevantValue", "relevant_values"]

_SPACE = re.compile(r"[ \t\n\r]*")  # JSON's whitespace, nothing more
_COLON = re.compile(r"[ \t\n\r]*:[ \t\n\r]*")
_NEXT_PAIR = re.compile(r"[ \t\n\r]*([,}])[ \t\n\r]*")  # after an object's value
_NEXT_ITEM = re.compile(r"[ \t\n\r]*([,\]])[ \t\n\r]*")  # after an array's element
_VALUE_KEYS = re.compile(r'"(relevant|is_relevant)"[ \t\n\r]*:[ \t\n\r]*')
# the C scanner json.loads uses: the same values, the same ends
_SCAN = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


class _Unreadable(Exception):
    """The text is not the JSON the parser decoded (cannot happen on a decoded span)."""


class RelevantValue(NamedTuple):
    """One verdict's ``relevant`` value as the parser reads it.

    Attributes:
        document_id: the document the parser gives the verdict to.
        offset: where the value's first character (the ``t`` of ``true``) is in the reply.
        value: the boolean written there.
    """

    document_id: str
    offset: int
    value: bool


class _Verdicts(NamedTuple):
    """The verdict objects the parser reads, and where they are written."""

    items: list[Any]
    start: int  # the text from start to end holds them (and commas and spaces between)
    end: int
    starts: list[int] | None  # where each opens; None: in the array at ``start``, to walk


def relevant_values(text: str, ids: Sequence[str] | None = None) -> list[RelevantValue]:
    """The ``relevant`` values of the verdicts the evaluator's parser reads in ``text``, in order.

    Args:
        text: the grading reply as returned.
        ids: the document ids the call sent (the parser keeps only those, and gives a lone
            verdict without an id to the one id sent); ``None``: any string id is kept, and a
            verdict without one is skipped.

    A verdict whose ``relevant`` is no JSON boolean (a string, a number, absent) has no value
    here. An id answered more than once is listed as many times.
    """
    if not isinstance(text, str):
        return []
    sent = None if ids is None else list(ids)
    try:
        return _values(text, sent)
    except (_Unreadable, RecursionError, ValueError):
        return []  # not the JSON the parser read: read nothing rather than guess


def _values(text: str, sent: list[str] | None) -> list[RelevantValue]:
    verdicts = _verdicts(text, sent)
    if verdicts is None:
        return []
    offsets = _counted(text, verdicts)
    if offsets is None:
        offsets = _walked(text, verdicts)
    only = None if sent is None else set(sent)
    out: list[RelevantValue] = []
    for index, item in enumerate(verdicts.items):
        offset = offsets[index]
        if offset is None:
            continue
        doc_id = verdict_id(item)
        if doc_id is None and sent is not None and len(sent) == 1:
            doc_id = sent[0]
        if not isinstance(doc_id, str) or (only is not None and doc_id not in only):
            continue
        value = item["relevant" if "relevant" in item else "is_relevant"]
        if type(value) is bool:
            out.append(RelevantValue(doc_id, offset, value))
    return out


def _verdicts(text: str, sent: list[str] | None) -> _Verdicts | None:
    """The verdict objects the parser reads (``LLMEvaluator._items``), or None."""
    top = _top(text)
    listed = None if top is None else top[0].get("verdicts")
    if listed is not None:
        value, value_start, value_end = listed
        if type(value) is not list:
            return None  # the parser refuses a reply whose "verdicts" is no list
        return _Verdicts(value, value_start, value_end, None)
    salvaged = complete_items_at(text, "verdicts")
    if salvaged:
        starts = [start for _, start, _ in salvaged]
        return _Verdicts([v for v, _, _ in salvaged], starts[0], salvaged[-1][2], starts)
    if top is None or not any(k in top[0] for k in ("relevant", "score", "label")):
        return None
    if sent is not None and len(sent) != 1:
        return None  # the parser reads a bare verdict only from a call for one document
    obj = {key: value for key, (value, _, _) in top[0].items()}
    return _Verdicts([obj], top[1], top[2], [top[1]])


def _top(text: str) -> tuple[dict[str, tuple[Any, int, int]], int, int] | None:
    """The object the parser reads, as ``(last pair of each key, start, end)``, or None.

    Found by the parser's own search (:func:`~corrective_rag.llm.jsonparse.find_json_object`),
    then walked for where each key's last value is.
    """
    try:
        _, start, end = find_json_object(text, strict=False)
    except VerdictParseError:
        return None
    return _object(text, start), start, end


def _object(text: str, start: int) -> dict[str, tuple[Any, int, int]]:
    """Each key's last ``(value, value_start, value_end)`` in the object at ``start``."""
    return {name: (value, first, end) for name, value, first, end in _pairs(text, start)}


def _counted(text: str, verdicts: _Verdicts) -> list[int | None] | None:
    r"""Each verdict's value offset by counting keys in one pass, or None where that is unsure.

    Sure when the verdicts hold no object of their own (as many ``{`` as verdicts, all objects)
    and no ``\u`` escape (a key is then spelled as decoded), and each verdict with the key has
    it written once: the k-th ``"relevant":`` whose quote is not escaped is the k-th such
    verdict's (a quote inside a string is escaped; a string value is never followed by ``:``).
    """
    items, start, end = verdicts.items, verdicts.start, verdicts.end
    if not all(type(item) is dict for item in items):
        return None
    if text.count("{", start, end) != len(items) or "\\u" in text[start:end]:
        return None
    found: dict[str, list[int]] = {"relevant": [], "is_relevant": []}
    for match in _VALUE_KEYS.finditer(text, start, end):
        if text[match.start() - 1] == "\\":
            return None  # an escaped quote: a string's text, rare enough to walk
        found[match.group(1)].append(match.end())
    plain, other = found["relevant"], found["is_relevant"]
    if len(plain) != sum("relevant" in i for i in items):
        return None
    if len(other) != sum("is_relevant" in i for i in items):
        return None
    plain.reverse()
    other.reverse()
    offsets: list[int | None] = []
    for item in items:
        offset = plain.pop() if "relevant" in item else None
        if "is_relevant" in item:
            taken = other.pop()
            offset = taken if offset is None else offset
        offsets.append(offset)
    return offsets


def _walked(text: str, verdicts: _Verdicts) -> list[int | None]:
    """Each verdict's value offset by walking its keys one by one (any JSON)."""
    starts = verdicts.starts
    if starts is None:
        starts = _elements(text, verdicts.start)
    offsets: list[int | None] = []
    for index, item in enumerate(verdicts.items):
        last = None
        if type(item) is dict:
            key = "relevant" if "relevant" in item else "is_relevant"
            for name, _, value_start, _ in _pairs(text, starts[index]):
                if name == key:
                    last = value_start
        offsets.append(last)
    return offsets


def _pairs(text: str, start: int) -> Iterator[tuple[str, Any, int, int]]:
    """``(key, value, value_start, value_end)`` of the object at ``start``, in order.

    Keys are read by json's own string scanner (strict: no raw control characters) and values
    by its value scanner, with JSON's separators and whitespace: what this walks, json decodes.
    """
    pos = _SPACE.match(text, start + 1).end()  # type: ignore[union-attr]
    if text.startswith("}", pos):
        return
    while True:
        if not text.startswith('"', pos):
            raise _Unreadable
        name, pos = scanstring(text, pos + 1)  # strict, as json.loads
        colon = _COLON.match(text, pos)
        if colon is None:
            raise _Unreadable
        value, end = _scan(text, colon.end())
        yield name, value, colon.end(), end
        after = _NEXT_PAIR.match(text, end)
        if after is None:
            raise _Unreadable
        if after.group(1) == "}":
            return
        pos = after.end()


def _elements(text: str, start: int) -> list[int]:
    """Where each element of the array at ``start`` opens (the array holds one or more)."""
    out: list[int] = []
    pos = _SPACE.match(text, start + 1).end()  # type: ignore[union-attr]
    while True:
        out.append(pos)
        _, end = _scan(text, pos)
        after = _NEXT_ITEM.match(text, end)
        if after is None:
            raise _Unreadable
        if after.group(1) == "]":
            return out
        pos = after.end()


def _scan(text: str, at: int) -> tuple[Any, int]:
    """The JSON value at ``at`` and where it ends (json's own scanner)."""
    try:
        return _SCAN(text, at)
    except StopIteration:  # no value there (a generator must not let StopIteration out)
        raise _Unreadable from None
