"""Settings of the chat client that travel together: timeouts, retry policy, prices.

Frozen values, validated on construction; :func:`parse_retry_after` reads a ``Retry-After``
header (delta seconds or an HTTP date); :func:`call_settings` turns the one number a user gives
(most seconds a call may take) into both.
"""

from __future__ import annotations

import email.utils
import math
from dataclasses import dataclass
from datetime import datetime, timezone

from corrective_rag.errors import ConfigError
from corrective_rag.inputs import check_int, is_number

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


def finite(value: object) -> bool:
    """A real number (not a bool, not NaN or infinite)."""
    return is_number(value) and math.isfinite(value)


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Seconds to wait for one request: to connect, for each socket read, and in all.

    ``total`` bounds the whole exchange of one try (connect, headers and the complete body), so
    a server that sends one byte every few seconds, or nothing at all, cannot hold a call longer;
    ``read`` alone only bounds the silence between two bytes.
    """

    connect: float = 5.0
    read: float = 30.0
    total: float = 60.0

    def __post_init__(self) -> None:
        for name in ("connect", "read", "total"):
            value = getattr(self, name)
            if not finite(value) or value <= 0:
                raise ConfigError(f"timeouts.{name} must be a positive number, got {value!r}")


@dataclass(frozen=True, slots=True)
class Retries:
    """Retry policy: ``max_retries`` after the first try, back-off ``base * 2**n`` capped.

    ``give_up_after`` bounds one call with all its tries: counted from the start of the first
    try, no try runs past it and no retry starts that could not finish by it (``None``: only
    ``max_retries`` bounds the call).
    """

    max_retries: int = 3
    backoff_base: float = 0.5
    backoff_max: float = 20.0
    retry_after_max: float = 60.0  # a server asking for longer is waited for this long only
    give_up_after: float | None = 60.0

    def __post_init__(self) -> None:
        check_int(self.max_retries, "retries.max_retries", minimum=0)
        for name in ("backoff_base", "backoff_max", "retry_after_max"):
            value = getattr(self, name)
            if not finite(value) or value < 0:
                raise ConfigError(f"retries.{name} must be a number >= 0, got {value!r}")
        if self.give_up_after is not None and (
            not finite(self.give_up_after) or self.give_up_after <= 0
        ):
            value = self.give_up_after
            raise ConfigError(f"retries.give_up_after must be a number > 0 or None, got {value!r}")

    def delay(self, attempt: int, jitter: float) -> float:
        """Back-off before retry ``attempt`` (0-based); ``jitter`` in [0, 1) gives 50-100%."""
        return min(self.backoff_max, self.backoff_base * 2**attempt) * (0.5 + jitter / 2)


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


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait (delta seconds or HTTP date), or None."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        seconds = (when - (now or datetime.now(timezone.utc))).total_seconds()
    if math.isnan(seconds) or math.isinf(seconds):
        return None
    return max(0.0, seconds)


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
