"""What a model call returns and costs: one chat reply with its tokens, usage and usage by phase."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Usage:
    """LLM usage of one call or a sum of calls."""

    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latency_seconds: float = 0.0  # summed over calls (not wall time when calls overlap)
    failed_calls: int = 0

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(
            self.llm_calls + other.llm_calls,
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.cost_usd + other.cost_usd,
            self.latency_seconds + other.latency_seconds,
            self.failed_calls + other.failed_calls,
        )


@dataclass(frozen=True, slots=True)
class ChatReply:
    """One chat completion: the assistant's text, the model that answered, and the call's usage."""

    text: str
    model: str = ""
    usage: Usage = Usage()
    finish_reason: str | None = None
    response_id: str = ""  # the server's id for the completion (``chatcmpl-...``), when it sent one
    # The reply's tokens with their log probabilities, when asked for and returned (``None``:
    # not returned); read by evaluate/logprobs.py.
    logprobs: tuple[TokenLogprob, ...] | None = None


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """One generated token, its log probability, and the most likely tokens at its place.

    Attributes:
        token: the token's text (the tokens of a reply spell its text).
        logprob: its natural log probability as the server sent it: a place holding NaN, an
            infinity or a value above 0 is refused by the readers
            (:mod:`corrective_rag.evaluate.logprobs`).
        top: ``(token, logprob)`` of the most likely tokens at this place, as the server sent.
    """

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True, slots=True)
class PhaseUsage:
    """Usage split by the phase that spent it."""

    grading: Usage = Usage()
    rewriting: Usage = Usage()
    generation: Usage = Usage()
    refinement: Usage = Usage()

    @property
    def total(self) -> Usage:
        """All phases summed."""
        return self.grading + self.rewriting + self.generation + self.refinement

    def __add__(self, other: PhaseUsage) -> PhaseUsage:
        if not isinstance(other, PhaseUsage):
            return NotImplemented
        return PhaseUsage(
            self.grading + other.grading,
            self.rewriting + other.rewriting,
            self.generation + other.generation,
            self.refinement + other.refinement,
        )
