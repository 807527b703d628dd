r"""Text shown on a terminal: control characters escaped, widths measured in terminal columns.

Documents, questions and model output are untrusted text. Printed raw, an ANSI or OSC escape
sequence in them can clear the screen, retitle the window or hide lines, and a right-to-left
override can make a line read differently from what it holds, and an invisible format character
(a soft hyphen, a zero-width space) hides what a word really is. :func:`printable` is the one
place that escapes them: every control character (C0, DEL, C1), every bidirectional control and
every other format character (Unicode Cf) becomes a visible ``\xNN`` / ``\uNNNN`` escape, a
backslash stays as it is. Applying it twice changes
nothing more, so a table escaped cell by cell can safely be escaped again as a whole. JSON
outputs never go through it: they keep the exact text.

:func:`display_width` counts terminal columns (East Asian wide and fullwidth characters take
two, combining marks and zero-width characters none), so tables of mixed scripts line up.
"""

from __future__ import annotations

import unicodedata

from corrective_rag.errors import CUT_LINE, cut_text

__all__ = ["cut", "display_width", "json_safe", "pad", "printable"]

# Bidirectional embeddings, overrides and isolates (Unicode TR9): invisible, yet they reorder
# what follows them on screen ("Trojan Source", CVE-2021-42574).
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_ZERO_WIDTH = frozenset("\u200b\u200c\u200d\u2060\ufeff")


def _escape(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _unsafe(ch: str) -> bool:
    code = ord(ch)
    if code < 0x20 or 0x7F <= code < 0xA0 or ch in _BIDI or 0xD800 <= code < 0xE000:
        return True
    # Format characters (soft hyphen, zero-width space and joiners, word joiner, tags) render as
    # nothing, so text that hides words from a reader ("Ign\u00adore") is shown as it is.
    return code >= 0xA0 and unicodedata.category(ch) == "Cf"


def printable(text: str, *, keep_newlines: bool = False) -> str:
    r"""``text`` with every control character shown as an escape (``\x1b``, ``\u202e``).

    Args:
        text: any string, lone surrogates included.
        keep_newlines: keep ``\n`` as a line break (for multi-line output); tabs and carriage
            returns are escaped either way.
    """
    if not any(_unsafe(ch) for ch in text):
        return text
    return "".join(
        ch if not _unsafe(ch) or (keep_newlines and ch == "\n") else _escape(ch) for ch in text
    )


def json_safe(text: str) -> str:
    r"""JSON text with the control characters ``json.dumps`` leaves raw written as ``\uNNNN``.

    ``json.dumps(..., ensure_ascii=False)`` escapes C0 controls but leaves DEL, C1 controls,
    bidirectional controls and lone surrogates raw. Inside JSON strings (the only place they can
    be) the ``\uNNNN`` form decodes to the same text, so the JSON keeps the exact text while
    the terminal sees only printable characters. Line breaks between JSON tokens are kept.
    """
    if not any(_unsafe(ch) for ch in text):
        return text
    return "".join(f"\\u{ord(ch):04x}" if _unsafe(ch) and ch != "\n" else ch for ch in text)


def _char_width(ch: str) -> int:
    if ch in _ZERO_WIDTH or unicodedata.combining(ch):
        return 0
    if unicodedata.category(ch) in ("Mn", "Me"):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def display_width(text: str) -> int:
    """How many terminal columns ``text`` takes (after :func:`printable`, one per escape char)."""
    return sum(_char_width(ch) for ch in printable(text))


# cut reads at most this many characters of its text per column asked for, plus SCAN_EXTRA:
# an escape shows one character in up to 6 columns, so a column never needs more than one
# character, save runs of spaces and marks of no width; a line cut short there still ends "…".
SCAN_PER_COLUMN = 4
SCAN_EXTRA = 256


def cut(text: str, width: int) -> str:
    """``text`` on one line, escaped, cut to at most ``width`` columns with a trailing ``…``.

    Only a prefix of ``text`` is read (``SCAN_PER_COLUMN * width + SCAN_EXTRA`` characters), so
    the cost follows ``width``, not the text: a 100 MB question is listed as fast as a short one.
    The cut itself is :func:`~corrective_rag.errors.cut_text`'s, in columns.
    """
    head = text[: SCAN_PER_COLUMN * max(width, 0) + SCAN_EXTRA]
    line = printable(" ".join(head.split()))
    # a text longer than its head is cut even where the head's line fits
    length = len(line) + 1 if len(head) < len(text) else None
    return cut_text(line, width, CUT_LINE, width=_char_width, length=length)


def pad(text: str, width: int, *, right: bool = False) -> str:
    """``text`` padded with spaces to ``width`` columns, on the left when ``right`` is True."""
    fill = " " * max(0, width - display_width(text))
    return fill + text if right else text + fill
