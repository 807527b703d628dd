r"""Checks shared by every entry point: user text (queries, ids, documents) and integer settings.

Python strings can hold what no file, HTTP body or database can store: lone surrogates (from
``json.loads('"\\ud800"')`` or from command-line bytes that were not UTF-8, which Python decodes
with ``surrogateescape``). Such text fails much later, deep inside chromadb, a tokenizer or the
results writer, so it is refused where it enters, with an :class:`InputError` naming the thing.

Query text (a question, a rewrite, a web query) is refused too when it holds control characters
that only a terminal or a text renderer acts on: C0 controls but tab and line breaks (ESC starts
terminal escapes: ``"\x1b[2J"`` clears the screen), DEL, C1 controls (``"\x9b"`` is a CSI too)
and the bidirectional controls that make text read in another order than it is searched
(``"\u202e"``, Trojan Source). No search needs them; a model that sends them is not searched.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Literal, TypeGuard, overload

from corrective_rag.errors import ConfigError, CorrectiveRAGError, InputError

# MAX_EXACT_INT, MAX_QUERY_BYTES, check_int, check_query, control_at, inexact_int, is_blank,
# is_int, is_number, surrogate_at: their home is corrective_rag.inputs
__all__: list[str] = []

MAX_QUERY_BYTES = 1_048_576  # 1 MiB: a question beyond this is a pasted file, not a query
# The largest integer a 64-bit float holds with every integer below it: chromadb and Qdrant
# compare metadata numbers as floats, where 2**53 + 1 reads as 2**53, while Python compares
# exactly. Metadata and filters hold integers within +-2**53 only, so every store agrees.
MAX_EXACT_INT = 2**53
# C0 but tab, line feed, vertical tab, form feed, carriage return (whitespace a pasted question
# may hold); DEL and C1; the bidirectional marks, embeddings, overrides and isolates.
_CONTROLS = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def control_at(text: str) -> int | None:
    """Index of the first terminal or bidirectional control character in ``text``, or ``None``.

    See the module docstring for the characters; tab and line breaks are not among them.
    """
    found = _CONTROLS.search(text)
    return None if found is None else found.start()


def surrogate_at(text: str) -> int | None:
    """Index of the first lone surrogate in ``text`` (not encodable as UTF-8), or ``None``."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return int(exc.start)
    return None


# Unicode's Default_Ignorable_Code_Point characters that are not format characters (Cf):
# rendered as nothing, like U+200B, though Python's str.strip() keeps them all.
_IGNORABLE = (
    (0x034F, 0x034F),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0xE0000, 0xE0FFF),
)


def _invisible(char: str) -> bool:
    if char.isspace() or unicodedata.category(char) == "Cf":
        return True
    code = ord(char)
    return any(low <= code <= high for low, high in _IGNORABLE)


def is_blank(text: str) -> bool:
    """True when ``text`` shows nothing: only whitespace and invisible characters.

    Invisible: format characters (zero-width space and joiners, U+FEFF, direction marks) and
    Unicode's other default-ignorable code points (variation selectors, Hangul fillers).
    """
    return all(_invisible(char) for char in text)


def check_query(value: object, *, what: str = "question", max_bytes: int = MAX_QUERY_BYTES) -> str:
    """Return ``value`` if it is usable query text, else raise :class:`InputError`.

    Usable: a ``str`` (not bytes), not blank (see :func:`is_blank`), no NUL character, valid
    Unicode (no lone surrogate), no terminal or bidirectional control (:func:`control_at`), at
    most ``max_bytes`` bytes as UTF-8.
    """
    if not isinstance(value, str):
        raise InputError(f"{what} must be a string, got {type(value).__name__}")
    if is_blank(value):
        raise InputError(f"{what} is empty or only whitespace and invisible characters")
    if "\x00" in value:
        raise InputError(f"{what} contains NUL characters")
    position = surrogate_at(value)
    if position is not None:
        raise InputError(
            f"{what} is not valid Unicode text (lone surrogate at character {position}; "
            "was it read from bytes that are not UTF-8?)"
        )
    position = control_at(value)
    if position is not None:
        raise InputError(
            f"{what} contains the control character U+{ord(value[position]):04X} at character "
            f"{position} (terminal escapes, C1 and bidirectional controls are refused)"
        )
    if len(value.encode("utf-8")) > max_bytes:
        raise InputError(f"{what} longer than {max_bytes} bytes")
    return value


def is_int(value: object) -> TypeGuard[int]:
    """True for an ``int`` that is not a ``bool`` (``True`` is an int to Python, not to us)."""
    return isinstance(value, int) and not isinstance(value, bool)


def inexact_int(value: object) -> bool:
    """True for an ``int`` (not a ``bool``) past :data:`MAX_EXACT_INT` either way."""
    return is_int(value) and not -MAX_EXACT_INT <= value <= MAX_EXACT_INT


def is_number(value: object) -> TypeGuard[int | float]:
    """True for an ``int`` or ``float`` that is not a ``bool`` (NaN and infinities included)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


@overload
def check_int(
    value: object,
    name: str,
    *,
    minimum: int | None = ...,
    maximum: int | None = ...,
    optional: Literal[False] = ...,
    error: type[CorrectiveRAGError] = ...,
) -> int: ...
@overload
def check_int(
    value: object,
    name: str,
    *,
    minimum: int | None = ...,
    maximum: int | None = ...,
    optional: Literal[True],
    error: type[CorrectiveRAGError] = ...,
) -> int | None: ...
def check_int(
    value: object,
    name: str,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    optional: bool = False,
    error: type[CorrectiveRAGError] = ConfigError,
) -> int | None:
    """Return ``value`` if it is an int (not a bool) within the bounds, else raise ``error``.

    Args:
        value: what the caller was given.
        name: how the message names it ("top_k", "budget max_llm_calls").
        minimum: the smallest value allowed, if any.
        maximum: the largest value allowed, if any.
        optional: ``None`` is allowed too (and returned).
        error: the exception raised: :class:`ConfigError` for settings (the default),
            :class:`InputError` for data read from a file.

    Raises:
        CorrectiveRAGError: ``error``, with a message like "top_k must be an int in 1..1000, got 0".
    """
    if optional and value is None:
        return None
    if (
        not is_int(value)
        or (minimum is not None and value < minimum)
        or (maximum is not None and value > maximum)
    ):
        if minimum is not None and maximum is not None:
            wanted = f"an int in {minimum}..{maximum}"
        elif minimum is not None:
            wanted = f"an int >= {minimum}"
        elif maximum is not None:
            wanted = f"an int <= {maximum}"
        else:
            wanted = "an int"
        if optional:
            wanted += " or None"
        raise error(f"{name} must be {wanted}, got {value!r}")
    return value
