"""A judge's decision read from its token probabilities instead of the words it wrote.

Small models write the same verbal verdict for every document (SmolLM2-135M called every pair
relevant; Qwen2.5-Coder-0.5B all 37 graded HotpotQA documents), yet the probability they put on
``true`` against ``false`` still ranks documents. OpenAI, vLLM, llama.cpp and Ollama return it
on chat completions (``logprobs: true, top_logprobs: N``): each generated token with the most
likely tokens at its place.

:func:`value_probabilities` reads, for each verdict the evaluator's parser keeps in a JSON
grading reply (:func:`~corrective_rag.evaluate.spans.relevant_values`: the same object, the same
id rule, the last of a repeated key), P(true) / (P(true) + P(false)) at the token that writes its
``relevant`` value, found by character offset. :func:`word_probability` does the same for a
one-word yes/no reply (the pointwise judge). What a probability means for a verdict is
:mod:`corrective_rag.evaluate.scoring`'s.

What a server sends is untrusted, and a probability is read only where it is sound; otherwise
there is none and the verdict keeps what the model wrote (never a made-up 0.5):

- the tokens must spell the reply (or hold it once, whole: a server that strips a fence or a
  thinking block from the content), so the token at a value's offset writes that value;
- every log probability listed at the place is a number <= 0 (no NaN, no infinity);
- at least one alternative besides the sampled token is listed (``top_logprobs: []``, or only
  the token itself, says nothing about the other side);
- each side's mass is summed over the alternatives that write it (``" true"``, ``"true"``,
  ``"tr"``); a token that writes more than the value (``"relevant":true`` in one token, or
  ``:true,``) is read at the value, and an alternative counts only when it writes the same text
  before it (whitespace aside); a side absent from the list had at most the smallest listed
  probability (it would be listed otherwise), so one listed side never reads as certain.

Pure functions over :class:`~corrective_rag.types.TokenLogprob` tuples, linear in the reply.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Sequence

from corrective_rag.evaluate.spans import RelevantValue, relevant_values
from corrective_rag.types import TokenLogprob

__all__ = [
    "side_probability",
    "takes_logprobs",
    "value_probabilities",
    "word_probability",
]

_SPACE = " \t\r\n"  # JSON's whitespace
_LEAD = " \t\r\n:,\"'"  # what a one-word reply may write before its word
_BOOLEAN = ("true", "false")  # a JSON value as written: no other case, no quotes


def _after(token: str, before: str) -> str | None:
    """What ``token`` writes after ``before`` (whitespace aside in both), or None if it differs."""
    at = 0
    for char in before:
        if char in _SPACE:
            continue
        while at < len(token) and token[at] in _SPACE:
            at += 1
        if at >= len(token) or token[at] != char:
            return None
        at += 1
    return token[at:]


@functools.lru_cache(maxsize=4096)
def _side(rest: str, words: tuple[str, str]) -> int | None:
    """0 or 1 when ``rest`` starts word ``words[i]`` (or is a start of it), else None."""
    if not rest:
        return None
    for side, word in enumerate(words):
        if word.startswith(rest):
            return side
        if rest.startswith(word) and not rest[len(word) : len(word) + 1].isalnum():
            return side
    return None


def _probability(
    place: TokenLogprob, words: tuple[str, str], before: str = "", *, word: bool = False
) -> float | None:
    """P(``words[0]``) / (P(``words[0]``) + P(``words[1]``)) at ``place``, or None (unsound).

    Unsound: a listed log probability that is NaN, infinite or above 0, or no alternative
    listed besides the sampled token (whose own entry counts when ``top`` omits it). A token
    counts for a side when it writes ``before``, then (past spaces) a start of that side's word.
    ``word``: a one-word reply's word, case aside, past spaces, quotes and a colon.
    """
    lead = _LEAD if word else _SPACE
    listed = {place.token: place.logprob}
    for token, logprob in place.top:
        if token not in listed:
            listed[token] = logprob
    if len(listed) < 2:
        return None
    mass = [0.0, 0.0]
    for token, logprob in listed.items():
        if not -math.inf < logprob <= 0.0:  # NaN fails every comparison
            return None
        rest = _after(token, before)
        if rest is None:
            continue
        rest = rest.lstrip(lead)
        side = _side(rest.lower() if word else rest, words)
        if side is not None:
            mass[side] += math.exp(logprob)
    yes, no = mass
    if yes == 0.0 and no == 0.0:
        return None
    floor = math.exp(min(listed.values()))
    yes, no = yes or floor, no or floor
    return yes / (yes + no)


def side_probability(place: TokenLogprob, yes: str, no: str) -> float | None:
    """P(``yes``) / (P(``yes``) + P(``no``)) at one token place, or None when unsound.

    The word mode of :func:`word_probability`: tokens are read in lower case (``yes`` and
    ``no`` are given so), after spaces, quotes and a colon.
    """
    return _probability(place, (yes, no), word=True)


class _Places:
    """The tokens laid over the reply: which token writes the characters at given offsets."""

    def __init__(self, text: str, tokens: Sequence[TokenLogprob]) -> None:
        import numpy as np  # loaded here: importing the package loads no numpy

        self.tokens = tokens
        texts = [t.token for t in tokens]
        self.joined = "".join(texts)
        lengths = np.fromiter(map(len, texts), dtype=np.int64)
        self.ends = np.cumsum(lengths)
        self.lengths = lengths
        # The reply inside the tokens' text: all of it, or held once whole (a server that strips
        # a fence or a thinking block from the content); anything else is not read.
        first = self.joined.find(text)
        once = first >= 0 and text not in self.joined[first + 1 :]
        self.shift: int | None = first if once else None

    def probabilities(self, values: Sequence[RelevantValue]) -> list[float | None]:
        """P(true) at the token that writes each value's first character, or None (unsound).

        ``self.shift`` is not None (the caller checks).
        """
        import numpy as np

        at = np.fromiter((v.offset for v in values), dtype=np.int64)
        at += self.shift or 0
        # the first token ending after the character is the one that writes it (an empty
        # token there ends where it starts and is passed over)
        index = np.searchsorted(self.ends, at, side="right")
        starts = (self.ends[index] - self.lengths[index]).tolist()
        places, offsets = index.tolist(), at.tolist()
        return [
            _probability(self.tokens[i], _BOOLEAN, self.joined[starts[k] : offsets[k]])
            for k, i in enumerate(places)
        ]


def value_probabilities(
    text: str, tokens: Sequence[TokenLogprob], *, ids: Sequence[str] | None = None
) -> dict[str, float]:
    """P(relevant is true), by document id, for each verdict whose value is soundly readable.

    The verdicts are those the evaluator's parser keeps from ``text`` (with ``ids``, the ids the
    call sent: see :func:`~corrective_rag.evaluate.spans.relevant_values`); an id answered more
    than once is read at its first answer only (the evaluator keeps such an id only when its
    answers agree). An id missing from the result keeps its verbal verdict.
    """
    if not tokens or not isinstance(text, str):
        return {}
    places = _Places(text, tokens)
    if places.shift is None:
        return {}
    answered: set[str] = set()
    first = []
    for value in relevant_values(text, ids):
        if value.document_id not in answered:
            answered.add(value.document_id)
            first.append(value)
    read = places.probabilities(first)
    found: dict[str, float] = {}
    for k, value in enumerate(first):
        p = read[k]
        if p is not None:
            found[value.document_id] = p
    return found


def word_probability(
    tokens: Sequence[TokenLogprob], yes: str = "yes", no: str = "no"
) -> float | None:
    """P(``yes``) / (P(``yes``) + P(``no``)) at the reply's first word, or None when unsound.

    The first token that writes more than spaces, quotes and punctuation is read, case aside;
    the soundness rules are :func:`value_probabilities`'.
    """
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
