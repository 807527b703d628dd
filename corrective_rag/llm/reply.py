"""A chat completion body read into a :class:`~corrective_rag.types.ChatReply`, key redacted.

Pure: the client passes its redaction, pricing and a token counter for servers that report no
usage.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Callable, Sequence
from typing import Any

from corrective_rag.errors import LLMResponseError
from corrective_rag.llm.pricing import Pricing
from corrective_rag.protocols import TokenCounter
from corrective_rag.types import ChatReply, TokenLogprob, Usage

__all__ = ["MOST_TOKENS_PER_CALL", "read_logprobs", "read_reply", "reported_tokens"]

_PER_MESSAGE_TOKENS = 4  # role and separators per chat message, as OpenAI documents for estimates
# No call reads or writes more tokens than its model's context window holds, and the largest on
# offer is 10 million (Llama 4 Scout); ten times that leaves room for any real reply while a
# count past it (10**20, a 400-digit integer that overflows the cost's float) is a server's
# nonsense, read as "not reported" and counted instead.
MOST_TOKENS_PER_CALL = 100_000_000
# A reply's token probabilities are read only this far: a grading reply is a few hundred tokens;
# OpenAI caps top_logprobs at 20; a token is a few characters (a long one is no model's token).
_MOST_LOGPROB_TOKENS = 16_384
_MOST_TOP = 20
_MOST_TOKEN_CHARS = 256


def read_reply(
    body: bytes,
    messages: Sequence[dict[str, str]],
    latency: float,
    *,
    model: str,
    pricing: Pricing,
    redact: Callable[[str], str],
    counter: Callable[[], TokenCounter],
) -> ChatReply:
    """The reply in ``body``; usage the server did not report is counted with ``counter()``.

    Raises:
        LLMResponseError: the body is not a chat completion with text content (its text,
            redacted, is on the error).
    """
    raw = redact(body.decode("utf-8", "replace"))
    try:
        data = json.loads(body)
        choice = data["choices"][0]
        text = choice["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise LLMResponseError(
            f"unusable chat completion body ({type(exc).__name__})", body=raw
        ) from None
    if not isinstance(text, str):
        raise LLMResponseError("chat completion has no text content", body=raw)
    usage = data.get("usage") if isinstance(data, dict) else None
    prompt_tokens = _int_or_none(usage, "prompt_tokens")
    completion_tokens = _int_or_none(usage, "completion_tokens")
    if prompt_tokens is None:
        tokens = counter()
        prompt_tokens = sum(tokens.count(m["content"]) + _PER_MESSAGE_TOKENS for m in messages)
    if completion_tokens is None:
        completion_tokens = counter().count(text)
    # The one redaction point for replies: a server echoing the key in a normal answer must
    # not carry it into verdicts, rewrites (searched), answers, results files or logs.
    return ChatReply(
        text=redact(text),
        model=redact(str(data.get("model") or model)),
        usage=Usage(
            llm_calls=1,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost_usd=pricing.cost(prompt_tokens, completion_tokens),
            latency_seconds=latency,
        ),
        finish_reason=choice.get("finish_reason") if isinstance(choice, dict) else None,
        response_id=_response_id(data, redact),
        logprobs=_unsecret(
            read_logprobs(choice.get("logprobs") if isinstance(choice, dict) else None, text),
            redact,
        ),
    )


def reported_tokens(value: object) -> int | None:
    """A token count as a server or framework reported it, or None where it is no count.

    Counts are ints from 0 to :data:`MOST_TOKENS_PER_CALL`; anything else (a bool, a float, a
    string, a negative or absurdly large number) is treated as not reported.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return value if 0 <= value <= MOST_TOKENS_PER_CALL else None
    return None


_MOST_ID_CHARS = 256  # OpenAI's ids are ~40 characters; a longer "id" is a server's nonsense


def _response_id(data: Any, redact: Callable[[str], str]) -> str:
    """The completion's ``id`` (traced as ``gen_ai.response.id``), or "" where there is none."""
    found = data.get("id") if isinstance(data, dict) else None
    if not isinstance(found, str) or len(found) > _MOST_ID_CHARS:
        return ""
    return redact(found)


def _int_or_none(usage: Any, key: str) -> int | None:
    return reported_tokens(usage.get(key)) if isinstance(usage, dict) else None


def read_logprobs(value: object, text: str | None = None) -> tuple[TokenLogprob, ...] | None:
    """A choice's ``logprobs`` (``{"content": [{token, logprob, bytes, top_logprobs}, ...]}``).

    Untrusted and bounded: ``None`` when absent or malformed anywhere (a token that is not a
    string, a log probability that is not a number, more than 16384 tokens); alternatives past
    20 and malformed ones are dropped. Log probabilities are kept as sent, NaN, infinite or
    above 0 included: the readers (:mod:`corrective_rag.evaluate.logprobs`) refuse a place
    that holds one, and only that place.

    With ``text`` (the reply's content): when the tokens' strings do not spell it but their
    ``bytes`` do (OpenAI's shape: a character split over tokens has its bytes spread over them,
    and each token's string shows only its own bytes), each token's string is rebuilt from the
    bytes, the character going to the token that completes it, so that the tokens spell the
    reply and the readers find its characters.
    """
    content = value.get("content") if isinstance(value, dict) else None
    if not isinstance(content, list) or not content or len(content) > _MOST_LOGPROB_TOKENS:
        return None
    out = []
    for item in content:
        place = _token_logprob(item)
        if place is None:
            return None
        top = item.get("top_logprobs")
        alternatives = []
        for alt in top[:_MOST_TOP] if isinstance(top, list) else ():
            read = _token_logprob(alt)
            if read is not None:
                alternatives.append(read)
        out.append(TokenLogprob(place[0], place[1], tuple(alternatives)))
    if text is not None and "".join(t.token for t in out) != text:
        rebuilt = _from_bytes(content)
        if rebuilt is not None and "".join(rebuilt) == text:
            out = [TokenLogprob(s, t.logprob, t.top) for s, t in zip(rebuilt, out, strict=True)]
    return tuple(out)


def _from_bytes(content: list[Any]) -> list[str] | None:
    """Each token's string rebuilt from the UTF-8 ``bytes`` of all, or None where one lacks them.

    A character goes to the token whose bytes complete it.
    """
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    out = []
    for item in content:
        raw = item.get("bytes")
        if not isinstance(raw, list) or len(raw) > 4 * _MOST_TOKEN_CHARS:
            return None
        if not all(isinstance(b, int) and not isinstance(b, bool) and 0 <= b < 256 for b in raw):
            return None
        out.append(decoder.decode(bytes(raw)))
    out[-1] += decoder.decode(b"", final=True)
    return out


def _unsecret(
    tokens: tuple[TokenLogprob, ...] | None, redact: Callable[[str], str]
) -> tuple[TokenLogprob, ...] | None:
    """``tokens``, or None when any of their strings holds a secret the reply's text hides."""
    if not tokens:
        return tokens
    written = "".join(t.token for t in tokens)
    listed = "\0".join(s for t in tokens for s, _ in t.top)
    if redact(written) != written or redact(listed) != listed:
        return None
    return tokens


def _token_logprob(item: object) -> tuple[str, float] | None:
    if not isinstance(item, dict):
        return None
    token, logprob = item.get("token"), item.get("logprob")
    if not isinstance(token, str) or len(token) > _MOST_TOKEN_CHARS:
        return None
    if isinstance(logprob, bool) or not isinstance(logprob, int | float):
        return None
    try:
        return token, float(logprob)
    except OverflowError:  # an int too large for a float: no log probability
        return None
