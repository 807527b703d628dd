"""What a step had spent before it failed, carried by the exception that ended it.

A strict evaluator that raises on its third batch has already paid for the first two; the caller
that turns the exception into ungraded verdicts must charge those tokens, or the budget
under-counts. A step meters its calls with :func:`metering` (the meter follows the context into
:func:`~corrective_rag.llm.parallel.parallel_map` threads), :func:`charge` adds each answered
call, and on failure :func:`attach_spent` puts the total on the exception; the caller reads it
back with :func:`spent_before`.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from contextvars import ContextVar

from corrective_rag.types import Usage

__all__ = ["Meter", "attach_spent", "charge", "metering", "spent_before"]

_ATTRIBUTE = "spent"  # the exception attribute holding the Usage spent before it was raised


class Meter:
    """A thread-safe running total of the usage of answered calls."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._total = Usage()

    def add(self, usage: Usage) -> None:
        """Add one call's usage."""
        with self._lock:
            self._total = self._total + usage

    @property
    def total(self) -> Usage:
        """Everything added so far."""
        with self._lock:
            return self._total


_METER: ContextVar[Meter | None] = ContextVar("corrective_rag_spent_meter", default=None)


@contextlib.contextmanager
def metering() -> Iterator[Meter]:
    """Meter the calls made inside the block (and in threads that copy its context)."""
    meter = Meter()
    token = _METER.set(meter)
    try:
        yield meter
    finally:
        _METER.reset(token)


def charge(usage: Usage) -> None:
    """Add an answered call's usage to the current meter, if one is running."""
    meter = _METER.get()
    if meter is not None:
        meter.add(usage)


def attach_spent(exc: BaseException, usage: Usage) -> None:
    """Record on ``exc`` what was spent before it was raised (kept when already recorded)."""
    if not isinstance(getattr(exc, _ATTRIBUTE, None), Usage):
        setattr(exc, _ATTRIBUTE, usage)


def spent_before(exc: BaseException) -> Usage:
    """The usage ``exc`` says was spent before it (nothing recorded: none)."""
    spent = getattr(exc, _ATTRIBUTE, None)
    return spent if isinstance(spent, Usage) else Usage()
