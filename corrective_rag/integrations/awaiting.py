"""A framework chat model's async call, awaited under the run's deadline and cancelled with it.

A framework's sync call (``invoke``, ``chat``) cannot be cut off once started: it runs to the
provider's own timeout, and ``asyncio.timeout`` around ``arun`` waited for it (4.3 s where 0.5 s
was asked). Its async call (``ainvoke``, ``achat``) can be: the adapters run it as a task on one
event loop of their own, in a daemon thread (``crag-framework-loop``; one loop for every call, so
a provider's async HTTP client keeps its connections on the loop it made them on), and the
calling thread waits for it while watching the call scope
(:mod:`corrective_rag.calls.scope`). When the scope's deadline passes or the scope is
cancelled (Ctrl-C, ``asyncio.timeout`` around ``arun``, ``Budget.max_seconds``) the task is
cancelled and the call raises at once.

What cancelling cannot stop: a framework whose async call is its sync call in a worker thread
(LangChain's default ``_agenerate`` for a model that implements only ``_generate``; a LlamaIndex
``CustomLLM``, whose ``achat`` calls ``chat``; those are run in a thread here rather than on the
loop). The caller gets its answer at the deadline all the same, but that thread goes on until
the provider answers or its own timeout ends it, and what that call costs is not counted.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from corrective_rag.calls import scope
from corrective_rag.errors import Cancelled, LLMTimeoutError
from corrective_rag.integrations.bridge import check_call_allowed

__all__ = ["await_in_scope"]

T = TypeVar("T")
_POLL = 0.05  # seconds between checks of the scope while a call runs, as the chat client's
_lock = threading.Lock()
_loops: list[asyncio.AbstractEventLoop] = []  # the one loop, started on first need


def _loop() -> asyncio.AbstractEventLoop:
    with _lock:
        if not _loops:
            loop = asyncio.new_event_loop()
            thread = threading.Thread(
                target=loop.run_forever, name="crag-framework-loop", daemon=True
            )
            thread.start()
            _loops.append(loop)
        return _loops[0]


def await_in_scope(name: str, call: Callable[[], Awaitable[T]]) -> T:
    """Run ``call()`` on the adapters' loop and return its result, within the call scope.

    Args:
        name: the model's name, for messages.
        call: makes the framework's awaitable (called on the loop's thread).

    Raises:
        Cancelled: the scope was cancelled before or during the call (the task is cancelled).
        LLMTimeoutError: the scope's deadline passed before or during the call (likewise).
        BaseException: whatever the framework's call raised.
    """
    check_call_allowed(name)
    at = scope.deadline()

    async def run() -> Any:
        return await call()

    future = asyncio.run_coroutine_threadsafe(run(), _loop())
    while True:
        wait = _POLL if at is None else max(0.0, min(_POLL, at - time.monotonic()))
        try:
            return future.result(timeout=wait)
        except concurrent.futures.TimeoutError:
            pass
        if scope.cancelled():
            future.cancel()
            raise Cancelled(f"{name}: cancelled while the call was in flight")
        if at is not None and time.monotonic() >= at:
            future.cancel()
            raise LLMTimeoutError(
                f"{name}: the run's deadline (Budget.max_seconds or the caller's) passed "
                "while the call was in flight"
            )
