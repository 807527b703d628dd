r"""The form of untrusted text that pattern screens look at: what a reader sees, not its bytes.

A screen matching "ignore previous" is beaten by text a model reads the same but whose code
points differ: a soft hyphen or zero-width space inside a word ("Ign\u00adore"), fullwidth or
mathematical letters ("ｉｇｎｏｒｅ"), or accents ("ignóre"). :func:`screen_form` undoes those:

1. NFKC folds compatibility forms (fullwidth, ligatures, mathematical letters) into plain ones;
2. format characters (Unicode category Cf: soft hyphen, zero-width space and joiners, word
   joiner, BOM, bidirectional controls, tag characters) are dropped: they render as nothing;
3. combining marks are dropped after canonical decomposition, so accented letters become bare;
4. runs of whitespace become one space.

It is used for matching only: the text sent to a model or stored is never changed by it. What it
cannot undo: letters from another script that look alike (Cyrillic "о" for Latin "o"), words
split by ordinary spaces or punctuation, paraphrase, other languages, encodings (base64).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

__all__ = ["invisible", "screen_form"]


def invisible(ch: str) -> bool:
    """True for a character that renders as nothing: a format character (category Cf)."""
    return unicodedata.category(ch) == "Cf"


def screen_form(text: str) -> str:
    """``text`` as a pattern screen should see it (see the module docstring); never displayed."""
    if text.isascii():  # every step below leaves ASCII as it is, but the whitespace
        return " ".join(text.split())
    folded = unicodedata.normalize("NFKC", text)
    visible = _without(folded, invisible)
    bare = _without(unicodedata.normalize("NFD", visible), _combining)
    return " ".join(unicodedata.normalize("NFC", bare).split())


def _combining(ch: str) -> bool:
    return unicodedata.combining(ch) != 0


def _without(text: str, drop: Callable[[str], bool]) -> str:
    """``text`` less its characters that ``drop`` names, each distinct one looked at once.

    ASCII is never dropped (neither format nor combining), so only the others are looked at:
    the per-character generator this replaces was most of the screen's time.
    """
    chars = {ch for ch in set(_NON_ASCII.findall(text)) if drop(ch)}
    if not chars:
        return text
    return re.sub("[" + "".join(map(re.escape, sorted(chars))) + "]", "", text)


_NON_ASCII = re.compile(r"[^\x00-\x7f]")
