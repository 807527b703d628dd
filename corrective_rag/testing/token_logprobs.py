"""What a server that returns token probabilities sends: ``logprobs.content`` for a reply text.

The scripted server (:class:`~corrective_rag.testing.ScriptedLLMServer`) answers a request
asking ``logprobs: true`` with :func:`scripted_logprobs` of the reply it sends, so that the
evaluators' reading of probabilities is tested without a model, in the shapes real servers and
tokenizers produce (:class:`TokenScript`): spaced, compact or indented JSON; a ``true`` that is
a token of its own, split over two (``" tr"``, ``"ue"``), written in one token with its key
(``{"relevant": true``) or inside a larger one (``: true,``); alternatives that are the opposite
value, several spellings of each side (so that a reader must sum them), none, or only the token
itself; and OpenAI's ``bytes``, with a character's bytes split over two tokens.
"""

from __future__ import annotations

import codecs
import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

# TokenScript: its home is corrective_rag.testing
__all__ = ["lay_out", "pieces", "scripted_logprobs", "token_script"]

_TOKEN = re.compile(r"\s*[A-Za-z0-9_]+|\s*[^A-Za-z0-9_\s]|\s+")
_OPPOSITE = {"true": "false", "false": "true", "yes": "no", "no": "yes"}
_JOINED_FROM = ("{", ",")  # a "joined" value token reaches back to the verdict's { or a comma

Layout = Literal["as_sent", "spaced", "compact", "indented"]
Split = Literal["word", "halves", "joined", "inside"]
Alternatives = Literal["opposite", "spellings", "none", "self"]


@dataclass(frozen=True, slots=True)
class TokenScript:
    """How the scripted server writes a reply and its token probabilities.

    Attributes:
        written: probability put on each ``true``/``false``/``yes``/``no`` the reply wrote;
            its opposite gets the rest (0.2 is a model that disagrees with its own words).
        layout: a JSON reply re-written ``spaced`` (``", "``, ``": "``), ``compact`` (no
            spaces), ``indented`` (two spaces, as llama.cpp writes under a grammar) or
            ``as_sent``.
        split: a decision word as one token (``word``: ``" true"``), over two (``halves``:
            ``" tr"``, ``"ue"``), in one token with what precedes it back to the verdict's
            ``{`` or a comma (``joined``: ``{"id": "a", "relevant": true``), or with the
            characters around it (``inside``: ``": true,"``).
        alternatives: ``opposite`` (the written token and the same token with the opposite
            word), ``spellings`` (each side's mass spread over two spellings, with and without
            the space before the word: a reader that does not sum them is off), ``none``
            (``top_logprobs: []``) or ``self`` (only the token itself).
        split_characters: each token holding a character outside ASCII is sent as two, the
            character's bytes split between them (OpenAI's ``bytes``; each token's string shows
            its own bytes escaped).
    """

    written: float = 0.8
    layout: Layout = "as_sent"
    split: Split = "word"
    alternatives: Alternatives = "opposite"
    split_characters: bool = False

    def __post_init__(self) -> None:
        if not 0.0 < self.written < 1.0:
            raise ValueError(f"written must be in (0, 1), got {self.written!r}")
        for name, allowed in (
            ("layout", ("as_sent", "spaced", "compact", "indented")),
            ("split", ("word", "halves", "joined", "inside")),
            ("alternatives", ("opposite", "spellings", "none", "self")),
        ):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")


def token_script(mode: str | TokenScript | None) -> TokenScript | None:
    """The script for a server's ``logprobs`` argument (None: no token probabilities).

    ``"agree"`` puts 0.8 on what is written, ``"disagree"`` 0.2; a :class:`TokenScript` is
    taken as it is.

    Raises:
        ValueError: anything else.
    """
    if mode is None or isinstance(mode, TokenScript):
        return mode
    if mode == "agree":
        return TokenScript(written=0.8)
    if mode == "disagree":
        return TokenScript(written=0.2)
    raise ValueError(f"logprobs must be None, 'agree', 'disagree' or a TokenScript, got {mode!r}")


def lay_out(text: str, script: TokenScript | None) -> str:
    """``text`` re-written in the script's JSON layout (a reply that is no JSON object as is)."""
    if script is None or script.layout == "as_sent":
        return text
    try:
        value = json.loads(text)
    except ValueError:
        return text
    if not isinstance(value, dict):
        return text
    if script.layout == "compact":
        return json.dumps(value, separators=(",", ":"))
    if script.layout == "indented":
        return json.dumps(value, indent=2)
    return json.dumps(value)


def scripted_logprobs(
    text: str, mode: str | TokenScript | None, request: Mapping[str, Any]
) -> list[dict[str, Any]] | None:
    """The ``logprobs.content`` list for ``text`` under ``mode``, or None when not asked for.

    Tokens are words, single punctuation marks and runs of space (each with the space before
    it), regrouped around each decision word as the script's ``split`` says; the tokens spell
    ``text``. A decision word's place carries the script's alternatives, other tokens are
    certain (log probability 0, themselves listed). ``top_logprobs`` alternatives at most, as
    a server sends them.
    """
    script = token_script(mode)
    if script is None or request.get("logprobs") is not True:
        return None
    top_n = request.get("top_logprobs")
    top_n = top_n if isinstance(top_n, int) and not isinstance(top_n, bool) else 0
    out: list[dict[str, Any]] = []
    for place in _regrouped(_TOKEN.findall(text), script.split):
        token = place.token
        if not place.word:
            entries, mine = [(token, 0.0)], 0.0
        else:
            entries, mine = _alternatives(place, script)
        top = sorted(entries, key=lambda e: -e[1])[:top_n]
        if script.alternatives == "none":
            top = []
        elif script.alternatives == "self":
            top = [(token, mine)][:top_n]
        out.extend(_entries(token, mine, top, split=script.split_characters))
    return out


@dataclass(frozen=True, slots=True)
class _Place:
    """A token, and where in it a decision word (or its written start) is."""

    token: str
    at: int = 0
    length: int = 0
    word: str = ""  # as written, whole; "" for a token that writes no decision

    def with_word(self, word: str) -> str:
        """The token with ``word`` (cut as the written one is) in place of the written one."""
        if self.word[:1].isupper():
            word = word.capitalize()
        cut = word if self.length == len(self.word) else word[: self.length]
        return self.token[: self.at] + cut + self.token[self.at + self.length :]

    def spaced(self, token: str) -> str:
        """``token`` (laid out as this one) with the space before the word added or taken away."""
        if self.at > 0 and token[self.at - 1] == " ":
            return token[: self.at - 1] + token[self.at :]
        return token[: self.at] + " " + token[self.at :]


def _regrouped(tokens: list[str], split: Split) -> list[_Place]:
    """The tokens with each decision word grouped as ``split`` says."""
    out: list[_Place] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        word = token.strip()
        if word.lower() not in _OPPOSITE:
            out.append(_Place(token))
            i += 1
            continue
        lead = len(token) - len(token.lstrip())
        if split == "halves" and len(word) > 2:
            out.append(_Place(token[: lead + 2], lead, 2, word))
            out.append(_Place(token[lead + 2 :]))
        elif split == "joined":
            back = len(out)
            while back > 0 and out[back - 1].token.strip() not in _JOINED_FROM:
                back -= 1
            before = "".join(p.token for p in out[max(back - 1, 0) :])
            del out[max(back - 1, 0) :]
            out.append(_Place(before + token, len(before) + lead, len(word), word))
        elif split == "inside" and out and i + 1 < len(tokens):
            before = out.pop().token
            merged = before + token + tokens[i + 1]
            out.append(_Place(merged, len(before) + lead, len(word), word))
            i += 1
        else:
            out.append(_Place(token, lead, len(word), word))
        i += 1
    return out


def _alternatives(place: _Place, script: TokenScript) -> tuple[list[tuple[str, float]], float]:
    """The listed ``(token, logprob)`` at a decision word's place, and the sampled token's own."""
    token = place.token
    other = place.with_word(_OPPOSITE[place.word.lower()])
    p, q = script.written, 1.0 - script.written
    if script.alternatives != "spellings":
        return [(token, math.log(p)), (other, math.log(q))], math.log(p)
    mine = math.log(0.6 * p)
    return [
        (token, mine),
        (place.spaced(token), math.log(0.4 * p)),
        (other, math.log(0.5 * q)),
        (place.spaced(other), math.log(0.5 * q)),
    ], mine


def _entries(
    token: str, logprob: float, top: list[tuple[str, float]], *, split: bool
) -> list[dict[str, Any]]:
    """The token's entries: one, or two halves of its bytes when it holds a wide character."""
    raw = token.encode()
    wide = next((i for i, c in enumerate(token) if ord(c) > 127), None)
    listed = [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in top]
    if not split or wide is None:
        return [{"token": token, "logprob": logprob, "bytes": list(raw), "top_logprobs": listed}]
    cut = len(token[:wide].encode()) + 1  # inside the character's bytes
    halves = raw[:cut], raw[cut:]
    return [
        {
            "token": half.decode("utf-8", "backslashreplace"),
            "logprob": logprob if n == 0 else 0.0,
            "bytes": list(half),
            "top_logprobs": listed if n == 0 else [],
        }
        for n, half in enumerate(halves)
    ]


def pieces(tokens: Sequence[Mapping[str, Any]]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """``(content, token)`` for streaming each token: the text its bytes complete.

    A character split over two tokens is streamed with the second, as OpenAI streams it.
    """
    decoder = codecs.getincrementaldecoder("utf-8")()
    for token in tokens:
        yield decoder.decode(bytes(token["bytes"])), token
