"""Deadlines and retries of every outgoing call: LLM requests and web searches alike.

Frozen values, validated on construction: :class:`Timeouts` for one request, :class:`Retries`
for a call with all its tries; :func:`call_settings` turns the one number a user gives (the most
seconds an LLM call may take) into both; :func:`parse_retry_after` reads a ``Retry-After``
header (delta seconds or an HTTP date).
"""

from __future__ import annotations

import email.utils
import math
from dataclasses import dataclass
from datetime import datetime, timezone

from corrective_rag.errors import ConfigError
from corrective_rag.inputs import check_int, is_number

# Timeouts, Retries, call_settings and parse_retry_after: their home is corrective_rag.calls
__all__ = ["LOCAL_CALL_SECONDS", "MAX_QUIET", "REMOTE_CALL_SECONDS", "finite"]

# The longest a server's rate-limit headers can keep a service from being asked again. A quota
# reset is at most an hour off in practice; ten minutes bounds what `Retry-After: 1e9` or
# `X-RateLimit-Reset: 1e308` can switch off in a long-lived process, and after it one request
# (answered 429 again, if the quota is really gone) asks the server anew.
MAX_QUIET = 600.0

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
