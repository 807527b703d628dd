"""Synchronous work awaited from async code, in a worker thread cancelled with the awaiting task.

The one home of cancel-and-wait (``arun`` and the MCP server's tool calls both use it)::

    result = await in_worker(partial(orchestrator.run, question))

The work runs in a worker thread inside a :func:`~corrective_rag.calls.scope.call_scope` of its
own, with the caller's context (an enclosing scope's deadline, bound log fields). When the
awaiting task is cancelled (a client gone, ``asyncio.timeout``, ``task.cancel()``, an anyio
cancel scope) the scope is cancelled the way Ctrl-C cancels a run: an LLM call in flight is
abandoned at once, no further one starts, and work that was still waiting for a free thread
never starts. The cancellation propagates only once the thread has ended, so when the ``await``
is over nothing of that work still runs or spends.

Callers differ in one thing, named by :class:`Waiting`: what a *second* cancellation does while
the work winds down.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import enum
import threading
from collections.abc import Callable
from concurrent.futures import Executor
from typing import TypeVar

from corrective_rag.calls.scope import call_scope, raise_if_cancelled

__all__ = ["Waiting", "in_worker"]

T = TypeVar("T")


class Waiting(enum.Enum):
    """How a cancelled :func:`in_worker` waits for its thread to end."""

    UNTIL_CANCELLED_AGAIN = "until_cancelled_again"
    """asyncio's edge-triggered cancellation (``arun``): a second ``task.cancel()`` stops the
    waiting (the thread still winds down, unawaited), so a caller can always get away."""

    UNTIL_ENDED = "until_ended"
    """anyio's level-triggered cancellation (the MCP server): a cancelled scope cancels every
    await inside it again, so the wait is shielded and lasts until the thread has ended; what
    the caller holds for the work (a slot) is released only then. Needs anyio."""


async def in_worker(
    work: Callable[[], T],
    *,
    executor: Executor | None = None,
    waiting: Waiting = Waiting.UNTIL_CANCELLED_AGAIN,
) -> T:
    """``work()`` in a worker thread of ``executor`` (None: the event loop's default one).

    Raises:
        asyncio.CancelledError: the awaiting task was cancelled; the thread has ended (see
            :class:`Waiting` for a second cancellation).
        Exception: whatever ``work`` raised.
    """
    stop = threading.Event()
    # The caller's context travels with the work: an enclosing call scope (a service-wide
    # deadline) and bound log fields reach the worker thread as they would a plain call.
    context = contextvars.copy_context()

    def scoped() -> T:
        with call_scope(cancel=stop):
            raise_if_cancelled()  # cancelled while waiting for a free thread: never start
            return work()

    future = asyncio.get_running_loop().run_in_executor(executor, context.run, scoped)
    try:
        # shield: cancelling this task must not detach us from the thread, which goes on
        # until told to stop; we tell it below and wait for it.
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        stop.set()
        if waiting is Waiting.UNTIL_ENDED:
            import anyio

            with anyio.CancelScope(shield=True):
                await asyncio.wait({future})
            if not future.cancelled():
                future.exception()  # retrieved: the work's own Cancelled is expected here
        else:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.shield(future)  # ends within one poll of the client + work
        raise
