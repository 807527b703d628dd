"""What a server that returns token probabilities sends: ``logprobs.content`` for a reply text.

The scripted server (:class:`~corrective_rag.testing.ScriptedLLMServer`) answers a request
asking ``logprobs: true`` with :func:`scripted_logprobs` of the reply it sends, so that the
evaluators' reading of probabilities is tested without a model: probabilities that agree with
the verbal answer, or that contradict it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["scripted_logprobs"]

_TOKEN = re.compile(r"\s*[A-Za-z0-9_]+|\s*[^A-Za-z0-9_\s]|\s+")
_OPPOSITE = {"true": "false", "false": "true", "yes": "no", "no": "yes"}
_LIKELY = math.log(0.8)
_UNLIKELY = math.log(0.2)


def scripted_logprobs(
    text: str, mode: str | None, request: Mapping[str, Any]
) -> list[dict[str, Any]] | None:
    """The ``logprobs.content`` list for ``text`` under ``mode``, or None when not asked for.

    Tokens are words, single punctuation marks and runs of space (each with the space before
    it); a word that is ``true``/``false``/``yes``/``no`` gets its opposite as the alternative,
    0.8 against 0.2 (``"agree"``) or 0.2 against 0.8 (``"disagree"``); other tokens are
    certain. ``top_logprobs`` alternatives at most, as a server sends them.
    """
    if mode is None or request.get("logprobs") is not True:
        return None
    top_n = request.get("top_logprobs")
    top_n = top_n if isinstance(top_n, int) and not isinstance(top_n, bool) else 0
    out: list[dict[str, Any]] = []
    for match in _TOKEN.finditer(text):
        token = match.group(0)
        word = token.strip()
        opposite = _OPPOSITE.get(word.lower())
        if opposite is None:
            mine, top = 0.0, [(token, 0.0)]
        else:
            mine = _LIKELY if mode == "agree" else _UNLIKELY
            other = _UNLIKELY if mode == "agree" else _LIKELY
            top = sorted(
                [(token, mine), (token.replace(word, opposite), other)], key=lambda t: -t[1]
            )
        entry = {
            "token": token,
            "logprob": mine,
            "top_logprobs": [{"token": t, "logprob": lp} for t, lp in top[:top_n]],
        }
        out.append(entry)
    return out
