"""The ``logprobs`` option of a chat call, read as OpenAI's chat API reads it.

OpenAI's ``logprobs`` is a boolean and ``top_logprobs`` an int 0..20 that needs it; a
:class:`~corrective_rag.protocols.ChatModel` takes both as one keyword, ``logprobs``:

- ``None`` or ``False``: no token probabilities;
- ``True``: each reply token's log probability with :data:`DEFAULT_TOP_LOGPROBS` alternatives;
- an int 0..20: with that many alternatives (0: the chosen tokens' own only, which no judge
  reads a probability from: it needs an alternative at the value it reads).

The package's client and the LangChain and LlamaIndex adapters read it with
:func:`top_logprobs_asked`, so the same value means the same request whichever is used.
"""

from __future__ import annotations

from corrective_rag.errors import InputError

__all__ = ["DEFAULT_TOP_LOGPROBS", "MOST_TOP_LOGPROBS", "top_logprobs_asked"]

# What `logprobs=True` asks for: a true/false value's place then usually lists both sides (the
# verdict judge reads P(true) against P(false) there); OpenAI's default for top_logprobs is 0,
# which lists none.
DEFAULT_TOP_LOGPROBS = 5
MOST_TOP_LOGPROBS = 20  # OpenAI's cap; vLLM and llama.cpp accept it


def top_logprobs_asked(logprobs: object) -> int | None:
    """The ``top_logprobs`` a call's ``logprobs`` asks for, or None for no token probabilities.

    Raises:
        InputError: ``logprobs`` is not None, a bool or an int 0..20.
    """
    if logprobs is None or logprobs is False:
        return None
    if logprobs is True:
        return DEFAULT_TOP_LOGPROBS
    if isinstance(logprobs, int) and 0 <= logprobs <= MOST_TOP_LOGPROBS:
        return logprobs
    raise InputError(
        f"logprobs must be True, False, None or an int 0..{MOST_TOP_LOGPROBS} "
        f"(alternatives per token), got {logprobs!r}"
    )
