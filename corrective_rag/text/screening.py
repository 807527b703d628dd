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

import unicodedata

__all__ = ["invisible", "screen_form"]


def invisible(ch: str) -> bool:
    """True for a character that renders as nothing: a format character (category Cf)."""
    return unicodedata.category(ch) == "Cf"


def screen_form(text: str) -> str:
    """``text`` as a pattern screen should see it (see the module docstring); never displayed."""
    folded = unicodedata.normalize("NFKC", text)
    visible = "".join(ch for ch in folded if not invisible(ch))
    bare = "".join(
        ch for ch in unicodedata.normalize("NFD", visible) if not unicodedata.combining(ch)
    )
    return " ".join(unicodedata.normalize("NFC", bare).split())
