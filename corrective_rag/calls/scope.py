"""Deadlines and cancellation for LLM calls, carried by the calling context.

A run, a batch or a command opens a :func:`call_scope`; every LLM call made inside it (in this
thread, or in threads started through :func:`corrective_rag.llm.parallel.parallel_map`, which copies
the context) ends by the scope's deadline and stops as soon as the scope is cancelled::

    with call_scope(seconds=30, cancel=stop_event) as own:
        orchestrator.run(question)  # calls give up at 30 s; stop_event.set() cancels them
    # own.set() cancels the calls of this block only

Scopes nest: the earliest deadline wins and any enclosing scope's event cancels. The chat client
reads the scope with :func:`deadline` and :func:`cancelled`; nothing else needs to know.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass

from corrective_rag.calls.settings import finite
from corrective_rag.errors import Cancelled, ConfigError

# call_scope: its home is corrective_rag.calls
__all__ = ["cancel_current", "cancelled", "deadline", "raise_if_cancelled"]


@dataclass(frozen=True, slots=True)
class _Scope:
    deadline: float | None  # time.monotonic() value
    events: tuple[threading.Event, ...]  # enclosing scopes' events first, this scope's last


_SCOPE: ContextVar[_Scope | None] = ContextVar("corrective_rag_call_scope", default=None)


@contextlib.contextmanager
def call_scope(
    *, seconds: float | None = None, cancel: threading.Event | None = None
) -> Iterator[threading.Event]:
    """Bound and make cancellable the LLM calls made inside the ``with`` block.

    Args:
        seconds: calls end at most this many seconds from now (``None``: no new bound).
        cancel: an event that cancels the calls when set (``None``: only the scope's own).

    Yields:
        The scope's own event: setting it cancels the calls of this block.
    """
    if seconds is not None and (not finite(seconds) or seconds <= 0):
        raise ConfigError(f"seconds must be a positive number or None, got {seconds!r}")
    outer = _SCOPE.get()
    at = None if seconds is None else time.monotonic() + float(seconds)
    if outer is not None and outer.deadline is not None:
        at = outer.deadline if at is None else min(at, outer.deadline)
    own = threading.Event()
    events = (*(outer.events if outer else ()), *((cancel,) if cancel is not None else ()), own)
    token = _SCOPE.set(_Scope(at, events))
    try:
        yield own
    finally:
        _SCOPE.reset(token)


def deadline() -> float | None:
    """The ``time.monotonic()`` by which calls in this context must end, or ``None``."""
    scope = _SCOPE.get()
    return None if scope is None else scope.deadline


def cancelled() -> bool:
    """True once this context's scope (or an enclosing one) is cancelled."""
    scope = _SCOPE.get()
    return scope is not None and any(e.is_set() for e in scope.events)


def raise_if_cancelled() -> None:
    """Raise :class:`~corrective_rag.errors.Cancelled` when this context is cancelled."""
    if cancelled():
        raise Cancelled("cancelled while an LLM call was in flight")


def cancel_current() -> None:
    """Cancel the innermost scope of this context (no-op outside any scope)."""
    scope = _SCOPE.get()
    if scope is not None:
        scope.events[-1].set()
