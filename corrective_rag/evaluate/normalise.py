"""Mapping a model's verdict object, whatever its quirks, onto the one verdict scale (pure).

Models write verdicts in many shapes. These functions accept:

- relevance as a bool, ``"yes"``/``"no"``, ``"true"``/``"false"``, ``1``/``0``, or a label;
- labels ``high``/``medium``/``low`` and synonyms (``relevant``, ``partially relevant``,
  ``irrelevant``, ``not relevant``, ...), in any case;
- scores and confidences as numbers or numeric strings, ``"85%"`` and ``"8/10"`` (scales the
  value declares), or on a declared 1-10 / 1-5 scale (a ``scale``, ``out_of`` or ``max_score``
  key in the verdict, which applies to the score only). A bare number above 1 with no declared
  scale is read on 0-10 (``7`` -> 0.7: the scale models fall back to when they leave 0..1), and
  a score above 10 is refused: a percentage read would turn a 0-10 ``7`` into 0.07. A bare
  confidence in (10, 100] is a percentage (a confidence cannot be out of 10 and above 10);

and fill what is missing from what is present, on the boundaries of the verdict contract
(:class:`~corrective_rag.types.Verdict`, ``types.RELEVANT_FROM`` and ``types.HIGH_FROM``):

- no score: from the label (high 0.9, medium 0.6, low 0.2: the middle of each band), else from
  ``relevant`` (0.8 / 0.2);
- no label: from the score (>= ``HIGH_FROM`` high, >= ``RELEVANT_FROM`` medium, else low);
- no ``relevant``: score >= ``RELEVANT_FROM`` (so a lone label high/medium means relevant, low
  not).

What the model said is recorded as it said it: a verdict whose ``relevant`` disagrees with its
score stays that way here, and the filter policy resolves it (not relevant is never kept).
Other defaults:

- no confidence: :data:`DEFAULT_CONFIDENCE` (0.5). We chose "undecided" rather than "sure":
  a model that never states its confidence should not pass a confidence threshold above 0.5 by
  default; policies that ignore confidence are unaffected.

A verdict with neither relevance, label nor score cannot be graded: :class:`VerdictParseError`.
A verdict whose score, confidence or declared scale is there but is no usable number (NaN,
infinity, ``"1/0"``, ``"7/1"`` or any value above its own scale, a negative one) is ungraded,
with the reason in its ``error``: it is never read as absent and filled in from ``relevant``.
What a verdict carries is bounded when it is read (``types.MAX_REASONING_CHARS`` and the other
caps of :class:`~corrective_rag.types.Verdict`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from corrective_rag.errors import VerdictParseError
from corrective_rag.types import (
    HIGH_FROM,
    MAX_MISSING_ITEMS,
    RELEVANT_FROM,
    Relevance,
    Verdict,
    missing_items,
)

__all__ = [
    "DEFAULT_CONFIDENCE",
    "LABEL_SCORES",
    "UNDECLARED_TOP",
    "normalise_verdict",
    "to_label",
    "to_relevant",
    "to_unit",
    "verdict_id",
]

DEFAULT_CONFIDENCE = 0.5
LABEL_SCORES = {Relevance.HIGH: 0.9, Relevance.MEDIUM: 0.6, Relevance.LOW: 0.2}
UNDECLARED_TOP = 10.0  # a bare number above 1 is read on 0-10; above this it is refused

_TRUE = {"true", "yes", "y", "1", "relevant", "high", "medium", "partially relevant", "partial"}
_FALSE = {"false", "no", "n", "0", "irrelevant", "not relevant", "low", "none", "not_relevant"}
_LABELS = {
    "high": Relevance.HIGH,
    "highly relevant": Relevance.HIGH,
    "very relevant": Relevance.HIGH,
    "relevant": Relevance.HIGH,
    "fully relevant": Relevance.HIGH,
    "medium": Relevance.MEDIUM,
    "moderate": Relevance.MEDIUM,
    "partial": Relevance.MEDIUM,
    "partially relevant": Relevance.MEDIUM,
    "somewhat relevant": Relevance.MEDIUM,
    "low": Relevance.LOW,
    "irrelevant": Relevance.LOW,
    "not relevant": Relevance.LOW,
    "not_relevant": Relevance.LOW,
    "none": Relevance.LOW,
}
_FRACTION = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*/\s*(\d+(?:\.\d+)?)\s*$")
_PERCENT = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*%\s*$")


def _number(value: Any) -> float | None:
    """``value`` as a float; ``None`` when it is no number (NaN and infinities are numbers)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        try:
            return float(value)
        except OverflowError:  # an int too large for a float: no scale holds it
            return math.inf
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def _finite(number: float, value: Any) -> float:
    if not math.isfinite(number):
        raise VerdictParseError(f"value {_shown(value)} is not a finite number", raw=str(value))
    return number


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def to_unit(value: Any, *, scale: float | None = None) -> float | None:
    """Map a score-like value onto 0..1, or None when it is absent or not a number.

    Args:
        value: a number, a numeric string, ``"85%"`` or ``"8/10"``.
        scale: the declared top of the scale (10 for 1-10, 5 for 1-5); None means 0..1, with
            values in (1, 10] read on 0-10.

    Raises:
        VerdictParseError: a number that fits no scale (negative, above its scale, declared
            or not, or above 10 with no declared scale), that is not finite (NaN, infinity),
            or a scale that is not above zero (``"1/0"``).
    """
    given = value
    if isinstance(value, str):
        if match := _PERCENT.match(value):
            value, scale = float(match.group(1)), 100.0
        elif match := _FRACTION.match(value):
            value, scale = float(match.group(1)), float(match.group(2))
    number = _number(value)
    if number is None:
        return None
    number = _finite(number, given)
    if scale is not None:
        if not math.isfinite(scale) or scale <= 0:
            raise VerdictParseError(f"value {_shown(given)} has no usable scale", raw=str(given))
        number = number / scale  # a declared scale is never read as another ("7/1" is 7)
    elif 1.0 < number <= UNDECLARED_TOP:
        number = number / UNDECLARED_TOP  # models that leave 0..1 mostly grade out of 10
    if not 0.0 <= number <= 1.0:
        raise VerdictParseError(f"value {_shown(given)} is outside its scale", raw=str(given))
    return number


def _confidence(value: Any) -> float | None:
    """A confidence on 0..1: as :func:`to_unit`, and a bare number in (10, 100] a percentage.

    Unlike a score, a confidence above 10 can only be out of 100 (how models most often state
    it, "confidence": 85); between 1 and 10 it is read on 0-10 like a score.
    """
    number = _number(value)
    if number is not None and UNDECLARED_TOP < number <= 100.0:
        return number / 100.0
    return to_unit(value)  # refuses NaN, infinities and numbers above 100


def to_relevant(value: Any) -> bool | None:
    """Read a relevance flag: bools, yes/no, true/false, 1/0 and labels; None when unknown."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    return None


def to_label(value: Any) -> Relevance | None:
    """Read a relevance label in any case or synonym; None when unknown."""
    if isinstance(value, Relevance):
        return value
    if isinstance(value, str):
        return _LABELS.get(value.strip().lower().replace("-", " "))
    return None


def _label_from_score(score: float) -> Relevance:
    if score >= HIGH_FROM:
        return Relevance.HIGH
    if score >= RELEVANT_FROM:
        return Relevance.MEDIUM
    return Relevance.LOW


def _declared_scale(item: Mapping[str, Any]) -> float | None:
    """The score's declared scale top; a declared one that is no usable top is refused."""
    for key in ("scale", "out_of", "max_score"):
        value = item.get(key)
        number = _number(value)
        if number is None:
            continue
        if not math.isfinite(number) or number <= 0:
            # caught by normalise_verdict, whose ungraded verdict keeps the whole reply
            raise VerdictParseError(f"{key} {_shown(value)} is not a scale")
        return number
    return None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def _missing(value: Any) -> tuple[str, ...]:
    """A model's "missing": a list of items, or one text listing them (see ``missing_items``)."""
    if isinstance(value, list | tuple):  # the first few only: a Verdict keeps no more
        return missing_items([str(v) for v in value[:MAX_MISSING_ITEMS] if v is not None])
    return missing_items(_text(value))


def verdict_id(item: Mapping[str, Any]) -> Any:
    """The document id a verdict object names, as the evaluator reads it (``None``: none).

    ``id``, else ``document_id``, else ``doc_id``: a key that is present wins even when a later
    one is too (``{"doc_id": "b", "id": "a"}`` names ``a``), and json keeps a repeated key's
    last value. What it names is the model's word: the caller checks it against the ids sent.
    """
    return item.get("id", item.get("document_id", item.get("doc_id")))


def normalise_verdict(document_id: str, item: Mapping[str, Any], *, raw: str = "") -> Verdict:
    """Turn one verdict object from a model into a :class:`Verdict`.

    The verdict is graded, or ungraded when a score, confidence or scale the model gave is no
    usable number (NaN, infinite, outside its scale, a ``"1/0"``): ``error`` then says which
    and why, and ``raw`` keeps the reply. Such a verdict is never graded from its other fields
    (a ``relevant`` beside a NaN score would be a guess about the model's meaning).

    Raises:
        VerdictParseError: ``item`` is not an object, or holds no relevance, label or score.
    """
    if not isinstance(item, Mapping):
        raise VerdictParseError(f"verdict for {document_id!r} is not an object", raw=raw)
    try:
        scale = _declared_scale(item)
        score = to_unit(item.get("score", item.get("relevance_score")), scale=scale)
        confidence = _confidence(item.get("confidence"))  # a declared scale is the score's
    except VerdictParseError as exc:
        return Verdict.ungraded(document_id, f"unusable number in the verdict: {exc}", raw=raw)
    label_value = item.get("label", item.get("relevance"))
    label = to_label(label_value)
    relevant = to_relevant(item.get("relevant", item.get("is_relevant")))
    if relevant is None and label is None:
        relevant = to_relevant(label_value)
    if relevant is None and label is None and score is None:
        raise VerdictParseError(
            f"verdict for {document_id!r} has no relevance, label or score", raw=raw
        )
    if score is None:
        score = LABEL_SCORES[label] if label is not None else (0.8 if relevant else 0.2)
    if label is None:
        label = _label_from_score(score)
    if relevant is None:
        relevant = score >= RELEVANT_FROM
    return Verdict(
        document_id=document_id,
        relevant=relevant,
        label=label,
        score=score,
        confidence=DEFAULT_CONFIDENCE if confidence is None else confidence,
        reasoning=_text(item.get("reasoning", item.get("reason"))) or "",
        missing=_missing(item.get("missing")),
    )
