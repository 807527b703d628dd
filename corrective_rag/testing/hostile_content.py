"""Hostile content for the :class:`~corrective_rag.testing.server.ScriptedLLMServer`.

Replies that are well-formed HTTP and well-formed JSON but carry what no honest server sends:
usage counts that are not counts (a 400-digit integer, a negative number, a string), and text
with terminal escapes and bidirectional controls. Each is a
:class:`~corrective_rag.testing.faults.Fault` to enqueue on the server, so a user can test their
own wiring against the same replies::

    server.enqueue(absurd_usage(10**400))
"""

from __future__ import annotations

import json

from corrective_rag.testing.faults import Fault

__all__ = ["CONTROL_QUERY", "absurd_usage"]

# A rewrite a hostile model might send: clears a terminal, then flips the rest right to left.
CONTROL_QUERY = "\x1b[2Jdeepcopy\u202e list"


def absurd_usage(count: object, text: str = "hello there", model: str = "scripted") -> Fault:
    """A chat completion of ``text`` whose ``usage`` reports ``count`` for every token field.

    ``count`` goes out as JSON as given: ``10**400`` as 400 digits, ``"12"`` as a string.
    """
    completion = {
        "id": "chatcmpl-absurd",
        "object": "chat.completion",
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": count, "completion_tokens": count, "total_tokens": count},
    }
    return Fault("raw", body=json.dumps(completion))
