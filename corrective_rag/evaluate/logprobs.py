"""A judge's decision read from its token probabilities instead of the words it wrote.

Small models write the same verbal verdict for every document (SmolLM2-135M called every pair
relevant; Qwen2.5-Coder-0.5B all 37 graded HotpotQA documents), yet the probability they put on
``true`` against ``false`` still ranks documents. OpenAI, vLLM, llama.cpp and Ollama return it
on chat completions (``logprobs: true, top_logprobs: N``): each generated token with the most
likely tokens at its place.

:func:`value_probabilities` finds, in a JSON grading reply, the token that starts each
``"relevant"`` value and returns P(true) / (P(true) + P(false)) from its alternatives, by
document id. :func:`word_probability` does the same for a one-word yes/no reply (the pointwise
judge). What a probability means for a verdict is :mod:`corrective_rag.evaluate.scoring`'s.
Pure functions over :class:`~corrective_rag.types.TokenLogprob` tuples; what a server sends is
untrusted, so anything unexpected yields ``None`` (the verbal fields stay).
"""

from __future__ import annotations

import inspect
import json
import math
import re
from collections.abc import Sequence

from corrective_rag.types import TokenLogprob

__all__ = [
    "side_probability",
    "takes_logprobs",
    "value_probabilities",
    "word_probability",
]

# `"relevant": true` as a grading reply writes it; a `\"relevant\"` inside a string is escaped
# and not matched (the lookbehind).
_RELEVANT = re.compile(r'(?<!\\)"relevant"\s*:\s*(true|false)')
_ID = re.compile(r'"(?:id|document_id|doc_id)"\s*:\s*("(?:[^"\\]|\\.)*")')
_LEAD = " \t\r\n:,\"'"  # what a token may carry before the value's first letter


def _side(token: str, yes: str, no: str) -> str | None:
    """``"yes"`` / ``"no"`` when ``token`` starts (or is a start of) word ``yes`` / ``no``."""
    word = token.lstrip(_LEAD).lower()
    if not word:
        return None
    for name, full in (("yes", yes), ("no", no)):
        if full.startswith(word) or word.startswith(full):
            return name
    return None


def side_probability(place: TokenLogprob, yes: str, no: str) -> float | None:
    """P(``yes``) / (P(``yes``) + P(``no``)) at one token place, or None when unreadable.

    The mass of each side is summed over the place's alternatives that start its word
    (``" true"``, ``"tr"``, ``"True"``); the sampled token counts when the server left it out
    of ``top``. A side absent from ``top`` had at most the smallest listed probability (it
    would be listed otherwise): that bound is used, so one listed side never reads as certain.
    """
    seen: dict[str, float] = {}
    for token, logprob in ((place.token, place.logprob), *place.top):
        if token not in seen and math.isfinite(logprob) and logprob <= 0.0:
            seen[token] = math.exp(logprob)
    mass = {"yes": 0.0, "no": 0.0}
    for token, p in seen.items():
        side = _side(token, yes, no)
        if side is not None:
            mass[side] += p
    if mass["yes"] == 0.0 and mass["no"] == 0.0:
        return None
    floor = min(seen.values())
    p_yes = mass["yes"] or floor
    p_no = mass["no"] or floor
    return p_yes / (p_yes + p_no)


def _place(tokens: Sequence[TokenLogprob], offset: int) -> TokenLogprob | None:
    """The token whose text covers character ``offset`` of the joined reply."""
    at = 0
    for token in tokens:
        end = at + len(token.token)
        if at <= offset < end:
            return token
        at = end
    return None


def value_probabilities(text: str, tokens: Sequence[TokenLogprob]) -> dict[str, float]:
    """P(relevant is true) for each document id whose ``"relevant"`` value the tokens cover.

    The tokens must spell ``text`` (the reply as returned); otherwise nothing is read. An id
    answered more than once is read at its first answer: the evaluator keeps such an id only
    when its answers agree (small models repeat a verdict until the token limit), and the first
    is the one the model wrote right after reading the documents.
    """
    if "".join(t.token for t in tokens) != text:
        return {}
    found: dict[str, float] = {}
    for match in _RELEVANT.finditer(text):
        start = text.rfind("{", 0, match.start())
        end = text.find("}", match.end())
        ident = _ID.search(text, start + 1, end if end >= 0 else len(text))
        if start < 0 or ident is None:
            continue
        try:
            doc_id = json.loads(ident.group(1))
        except ValueError:
            continue
        place = _place(tokens, match.start(1))
        p = None if place is None else side_probability(place, "true", "false")
        if p is not None and isinstance(doc_id, str):
            found.setdefault(doc_id, p)
    return found


def word_probability(
    tokens: Sequence[TokenLogprob], yes: str = "yes", no: str = "no"
) -> float | None:
    """P(``yes``) / (P(``yes``) + P(``no``)) at the reply's first word, or None."""
    for place in tokens:
        if place.token.strip(_LEAD):
            return side_probability(place, yes, no)
    return None


def takes_logprobs(chat: object) -> bool:
    """Whether ``chat.complete`` accepts the ``logprobs`` keyword (by name or ``**kwargs``).

    :class:`~corrective_rag.protocols.ChatModel` gained the keyword after users wrote their own
    chat models; one without it is called as before, and its verdicts stay verbal.
    """
    try:
        parameters = inspect.signature(chat.complete).parameters  # type: ignore[attr-defined]
    except (AttributeError, TypeError, ValueError):
        return False
    return "logprobs" in parameters or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()
    )
