"""Judges for the scripted server that know the check's answers: faithful, all-relevant, noisy.

Replies for :class:`~corrective_rag.testing.server.ScriptedLLMServer` (its ``reply`` argument)
that grade the built-in judge-check pairs (:data:`~corrective_rag.evaluate.check.pairs.CHECK_PAIRS`)
by their labels, so that ``corrective-rag judge-check`` and :meth:`LLMEvaluator.check` can be
tested against a real HTTP server::

    with ScriptedLLMServer(reply=all_relevant_judge) as server:
        ...  # judge-check against server.base_url fails: it calls everything relevant

A document the pairs do not know is judged irrelevant; requests other than grading are answered
by :func:`~corrective_rag.testing.replies.default_reply`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any

from corrective_rag.errors import ConfigError
from corrective_rag.evaluate.check.pairs import CHECK_PAIRS
from corrective_rag.evaluate.pointwise import POINTWISE_SYSTEM
from corrective_rag.llm import prompts
from corrective_rag.testing.replies import default_reply

__all__ = ["all_relevant_judge", "faithful_judge", "noisy_judge"]

Reply = Callable[[Mapping[str, Any]], str]

_LABELS = {pair.document.id: pair.relevant for pair in CHECK_PAIRS}


def _judge(decide: Callable[[str], bool]) -> Reply:
    """A reply that grades each document of a grading request with ``decide(document_id)``."""

    def reply(request: Mapping[str, Any]) -> str:
        messages = request.get("messages") or []
        system = next((m["content"] for m in messages if m.get("role") == "system"), "")
        user = next((m["content"] for m in messages if m.get("role") == "user"), "")
        if system == POINTWISE_SYSTEM:  # the yes/no judge: one document, one word
            blocks = prompts.parse_document_blocks(user)
            return "yes" if blocks and decide(blocks[0][0]) else "no"
        if not system.startswith(prompts.GRADER_SYSTEM[:40]):
            return default_reply(request)
        verdicts = []
        for doc_id, _ in prompts.parse_document_blocks(user):
            relevant = decide(doc_id)
            verdicts.append(
                {
                    "id": doc_id,
                    "relevant": relevant,
                    "score": 0.9 if relevant else 0.1,
                    "confidence": 0.9,
                    "reasoning": "answers the question" if relevant else "does not answer it",
                    "missing": None if relevant else "the answer",
                }
            )
        body: dict[str, Any] = {"verdicts": verdicts}
        if prompts.PROPOSE_RULE in system:
            body |= {"next_query": "more of the same"}
        return json.dumps(body)

    return reply


faithful_judge: Reply = _judge(lambda doc_id: _LABELS.get(doc_id, False))
"""Judges every pair as its label says: a model that can judge."""

all_relevant_judge: Reply = _judge(lambda doc_id: True)
"""Calls every document relevant, as the small models measured in the field did."""


def noisy_judge(share: float = 0.4) -> Reply:
    """A judge wrong on ``share`` of the known pairs (the same ones each time), right elsewhere.

    The wrong pairs are the first ``round(share * n)`` in the order of a hash of their ids, so
    the agreement is exactly ``1 - round(share * n) / n`` on the ``n`` pairs.
    """
    if not 0.0 <= share <= 1.0:
        raise ConfigError(f"share must be in 0..1, got {share!r}")
    ranked = sorted(_LABELS, key=lambda i: hashlib.blake2b(i.encode(), digest_size=8).digest())
    wrong = frozenset(ranked[: round(share * len(ranked))])
    return _judge(lambda doc_id: _LABELS.get(doc_id, False) != (doc_id in wrong))
