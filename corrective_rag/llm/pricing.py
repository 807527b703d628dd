"""Settings of the chat client: prices, and the defaults of its deadlines.

The deadlines and retry policy themselves (:class:`Timeouts`, :class:`Retries`,
:func:`parse_retry_after`) belong to every outgoing call, web searches too: they live in
:mod:`corrective_rag.calls.settings` and are re-exported here. :func:`call_settings` turns the
one number a user gives (most seconds an LLM call may take) into both.
"""

from __future__ import annotations

from dataclasses import dataclass

from corrective_rag.calls.settings import Retries, Timeouts, finite, parse_retry_after
from corrective_rag.errors import ConfigError

__all__ = [
    "LOCAL_CALL_SECONDS",
    "REMOTE_CALL_SECONDS",
    "Pricing",
    "Retries",
    "Timeouts",
    "call_settings",
    "finite",
    "parse_retry_after",
]

REMOTE_CALL_SECONDS = 60.0
# A small model on CPU writes a few tokens a second: a grading call of several documents takes
# minutes on a busy machine.
LOCAL_CALL_SECONDS = 300.0


@dataclass(frozen=True, slots=True)
class Pricing:
    """US dollars per million prompt and completion tokens (default 0: local or unknown)."""

    prompt_per_million: float = 0.0
    completion_per_million: float = 0.0

    def __post_init__(self) -> None:
        for name in ("prompt_per_million", "completion_per_million"):
            value = getattr(self, name)
            if not finite(value) or value < 0:
                raise ConfigError(f"pricing.{name} must be a number >= 0, got {value!r}")

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        """Cost of a call in US dollars."""
        return (
            prompt_tokens * self.prompt_per_million
            + completion_tokens * self.completion_per_million
        ) / 1e6


def call_settings(
    seconds: float | None = None, *, max_retries: int | None = None, local: bool = False
) -> tuple[Timeouts, Retries]:
    """Timeouts and retries under which one LLM call, tries included, ends within ``seconds``.

    The one setting behind every call a client makes (grading, proposal, rewrite, answer,
    refinement): a try's total and the tries' shared bound are both ``seconds`` (default 60, or
    300 for a ``local`` llama.cpp server). ``local``: silence is no fault either (a server that
    does not stream sends nothing until its reply is complete), so the read timeout is
    ``seconds`` too.
    """
    if seconds is None:
        seconds = LOCAL_CALL_SECONDS if local else REMOTE_CALL_SECONDS
    if not finite(seconds) or seconds <= 0:
        raise ConfigError(f"seconds must be a positive number, got {seconds!r}")
    read = seconds if local else min(Timeouts().read, seconds)
    timeouts = Timeouts(read=read, total=seconds)
    if max_retries is None:
        return timeouts, Retries(give_up_after=seconds)
    return timeouts, Retries(max_retries=max_retries, give_up_after=seconds)
