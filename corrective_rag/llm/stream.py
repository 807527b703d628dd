"""A streamed chat completion (server-sent events) read into one completion body, bounded.

The client asks for ``stream: true`` so that it can close the connection at a deadline or on
cancellation and a server that stops on disconnect (llama.cpp, vLLM) stops generating; it still
wants one reply. :func:`collect_events` reads the ``data:`` lines of the stream, joins the
deltas' text and keeps the finish reason, the model and the usage of the last chunk
(``stream_options.include_usage``), and returns the equivalent non-streamed body, so that one
reader (:func:`corrective_rag.llm.reply.read_reply`) handles both. Pure over byte chunks.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from corrective_rag.errors import LLMResponseError, LLMTransportError

__all__ = ["EVENT_STREAM", "MAX_EVENTS", "collect_events", "is_event_stream"]

EVENT_STREAM = "text/event-stream"
_DONE = b"[DONE]"
# A `data:` line; blank separators, `: keep-alive` comments and event:/id: fields are skipped
# by the regular expression, not one by one in Python.
_DATA = re.compile(rb"^[^\S\n]*data:(.*)$", re.MULTILINE)
# Most `data:` events one reply may carry. A server sends one per token, each a hundred bytes
# or more, so the byte limit alone keeps honest streams far below this; events of a few bytes
# (`data: {}` four hundred thousand times in 4 MB) would cost seconds of CPU to decode.
MAX_EVENTS = 65_536


def is_event_stream(content_type: str | None) -> bool:
    """Whether a response's ``Content-Type`` says server-sent events (else one JSON body)."""
    return (content_type or "").split(";", 1)[0].strip().lower() == EVENT_STREAM


def collect_events(chunks: Iterable[bytes], limit: int) -> bytes:
    """The chat completion body equivalent to the event stream in ``chunks``.

    Args:
        chunks: the response body as it arrives, in pieces of any size.
        limit: most bytes read from the stream in all.

    Raises:
        LLMResponseError: the stream exceeds ``limit``, carries an error event or an event that
            is not a chat completion chunk.
        LLMTransportError: the stream ended before ``data: [DONE]`` and before any finish
            reason (the connection was cut mid-reply).
    """
    parts: list[str] = []
    state: dict[str, Any] = {
        "finish_reason": None,
        "model": None,
        "usage": None,
        "done": False,
        "id": None,
    }
    size = events = 0
    pending: list[bytes] = []  # the start of a line not ended yet, kept in pieces: never rejoined
    for chunk in chunks:
        size += len(chunk)
        if size > limit:
            raise LLMResponseError(f"event stream exceeds the {limit}-byte limit")
        cut = chunk.rfind(b"\n")
        if cut < 0:
            pending.append(chunk)
            continue
        lines = b"".join([*pending, chunk[:cut]]) if pending else chunk[:cut]
        pending = [chunk[cut + 1 :]]
        for found in _DATA.finditer(lines):
            events += 1
            if events > MAX_EVENTS:
                raise LLMResponseError(f"event stream carries more than {MAX_EVENTS} events")
            _event(found.group(1), parts, state)
            if state["done"]:
                return _body(parts, state)
    for found in _DATA.finditer(b"".join(pending)):
        _event(found.group(1), parts, state)
    if not state["done"] and state["finish_reason"] is None:
        raise LLMTransportError("event stream ended before the reply was complete")
    return _body(parts, state)


def _event(data: bytes, parts: list[str], state: dict[str, Any]) -> None:
    """Fold the ``data`` of one ``data:`` line into ``parts`` and ``state``."""
    data = data.strip()
    if data == _DONE:
        state["done"] = True
        return
    try:
        event = json.loads(data)
    except ValueError:
        raise LLMResponseError(
            "event stream carries data that is not JSON", body=data[:500].decode("utf-8", "replace")
        ) from None
    if not isinstance(event, dict):
        raise LLMResponseError("event stream carries data that is not an object")
    if "error" in event:
        raise LLMResponseError("event stream carries an error", body=json.dumps(event)[:2000])
    if isinstance(event.get("model"), str):
        state["model"] = event["model"]
    if isinstance(event.get("id"), str) and state["id"] is None:
        state["id"] = event["id"]  # every chunk repeats the completion's id
    if isinstance(event.get("usage"), dict):
        state["usage"] = event["usage"]
    choices = event.get("choices")
    if not isinstance(choices, list) or not choices:
        return  # the usage-only last chunk
    choice = choices[0]
    if not isinstance(choice, dict):
        raise LLMResponseError("event stream chunk has a malformed choice")
    delta = choice.get("delta") or {}
    text = delta.get("content") if isinstance(delta, dict) else None
    if isinstance(text, str):
        parts.append(text)
    logprobs = choice.get("logprobs")
    if isinstance(logprobs, dict) and isinstance(logprobs.get("content"), list):
        state.setdefault("logprobs", []).extend(logprobs["content"])  # read by read_logprobs
    if isinstance(choice.get("finish_reason"), str):
        state["finish_reason"] = choice["finish_reason"]


def _body(parts: list[str], state: dict[str, Any]) -> bytes:
    message = {"role": "assistant", "content": "".join(parts)}
    body: dict[str, Any] = {
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": state["finish_reason"]}],
    }
    if state["model"] is not None:
        body["model"] = state["model"]
    if state["id"] is not None:
        body["id"] = state["id"]
    if state.get("logprobs"):
        body["choices"][0]["logprobs"] = {"content": state["logprobs"]}
    if state["usage"] is not None:
        body["usage"] = state["usage"]
    return json.dumps(body).encode()
