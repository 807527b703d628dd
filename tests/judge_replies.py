"""Grading replies with token probabilities chosen per document, served by a real HTTP server.

The scripted server's own probabilities are one pair (0.8 against 0.2) for every value; the
judge tests need a model that writes graded verdicts and puts any probability on each
``true``/``false`` it writes (a confident model: 0.99; a judge whose probabilities rank the
documents: a different one per document), and thresholds fitted at other values than 0.5. A
:func:`graded_judge` is a fault chooser for :class:`~corrective_rag.testing.ScriptedLLMServer`:
it answers each grading request (JSON verdicts, or the pointwise yes/no question) with a whole
chat completion whose ``logprobs.content`` spells the reply, and leaves every other request to
the server's own replies.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from corrective_rag.evaluate.pointwise import POINTWISE_SYSTEM
from corrective_rag.llm import prompts
from corrective_rag.testing import Fault


@dataclass(frozen=True)
class Written:
    """What the model writes for one document, and the probability it puts on ``true``.

    ``p_true``: P(true) at the value token (``None``: no alternatives listed, unreadable).
    """

    relevant: bool
    score: float
    confidence: float
    p_true: float | None


Judge = Callable[[str, str], Written]  # (question, document id) -> what is written


def _token(text: str, logprob: float = 0.0, top: list[tuple[str, float]] | None = None) -> dict:
    listed = [(text, logprob)] if top is None else top
    return {
        "token": text,
        "logprob": logprob,
        "top_logprobs": [{"token": t, "logprob": lp} for t, lp in listed],
    }


def _value(word: str, p_true: float | None) -> dict:
    """The ``true``/``false`` token with its alternative, carrying ``p_true``."""
    if p_true is None:
        return _token(word, 0.0, [])
    other = "false" if word == "true" else "true"
    mine = p_true if word == "true" else 1.0 - p_true
    mine = min(max(mine, 1e-12), 1.0)
    rest = min(max(1.0 - mine, 1e-12), 1.0)
    return _token(word, math.log(mine), [(word, math.log(mine)), (other, math.log(rest))])


def _completion(pieces: list[dict]) -> str:
    text = "".join(p["token"] for p in pieces)
    return json.dumps(
        {
            "id": "chatcmpl-judge",
            "object": "chat.completion",
            "model": "judge",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                    "logprobs": {"content": pieces},
                }
            ],
            "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
        }
    )


def _question(user: str) -> str:
    first = user.split("\n", 1)[0]
    return first.removeprefix("Question:").strip()


def graded_reply(request: Mapping[str, Any], judge: Judge) -> str | None:
    """The completion answering a grading request with ``judge``'s verdicts, or None."""
    messages = request.get("messages") or []
    system = next((m["content"] for m in messages if m.get("role") == "system"), "")
    user = next((m["content"] for m in messages if m.get("role") == "user"), "")
    blocks = prompts.parse_document_blocks(user)
    if system == POINTWISE_SYSTEM and blocks:
        said = judge(_question(user), blocks[0][0])
        word = "yes" if said.relevant else "no"
        if said.p_true is None:
            return _completion([_token(word, 0.0, [])])
        p_word = said.p_true if said.relevant else 1.0 - said.p_true
        p_word = min(max(p_word, 1e-12), 1.0)
        other = "no" if said.relevant else "yes"
        rest = min(max(1.0 - p_word, 1e-12), 1.0)
        top = [(word, math.log(p_word)), (other, math.log(rest))]
        return _completion([_token(word, math.log(p_word), top)])
    if not system.startswith(prompts.GRADER_SYSTEM[:40]) or not blocks:
        return None
    question = _question(user)
    pieces = [_token('{"verdicts": [')]
    for n, (doc_id, _) in enumerate(blocks):
        said = judge(question, doc_id)
        head = ", " if n else ""
        pieces.append(_token(f'{head}{{"id": {json.dumps(doc_id)}, "relevant": '))
        pieces.append(_value("true" if said.relevant else "false", said.p_true))
        rest = {
            "score": said.score,
            "confidence": said.confidence,
            "reasoning": "answers it" if said.relevant else "does not answer it",
            "missing": None if said.relevant else "the answer",
        }
        pieces.append(_token(", " + json.dumps(rest)[1:]))
    tail = "]"
    if prompts.PROPOSE_RULE in system:
        tail += ', "next_query": "largest Jupiter moon Ganymede diameter"'
    pieces.append(_token(tail + "}"))
    return _completion(pieces)


def graded_judge(judge: Judge) -> Callable[[Mapping[str, Any], int], Fault | None]:
    """A fault chooser answering grading requests with ``judge`` (the rest as scripted)."""

    def choose(request: Mapping[str, Any], _: int) -> Fault | None:
        body = graded_reply(request, judge)
        return None if body is None else Fault("raw", body=body)

    return choose


def spread(doc_id: str, low: float, high: float) -> float:
    """A probability in [low, high] fixed by the document id (the same in every run)."""
    fraction = int(hashlib.sha256(doc_id.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return low + (high - low) * fraction


def ranking_judge(
    labels: Mapping[str, bool],
    *,
    relevant: tuple[float, float] = (0.55, 0.95),
    irrelevant: tuple[float, float] = (0.05, 0.65),
    written: Written = Written(True, 0.6, 0.6, None),
) -> Judge:
    """A model that writes the same verdict for every document (``written``: relevant, medium,
    0.6/0.6) while the probability it puts on ``true`` ranks them: drawn from ``relevant`` for a
    relevant document and ``irrelevant`` for the others (overlapping: no threshold is perfect).
    A document ``labels`` does not know is irrelevant."""

    def judge(question: str, doc_id: str) -> Written:
        low, high = relevant if labels.get(doc_id, False) else irrelevant
        return Written(
            written.relevant, written.score, written.confidence, spread(doc_id, low, high)
        )

    return judge
