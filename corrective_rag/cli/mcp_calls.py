"""How the MCP server admits and runs tool calls: a fair share per client and a bounded wait.

At most ``limit`` calls run at once, each in a worker thread of the server's own pool, cancelled
with its request (:func:`~corrective_rag.calls.worker.in_worker`: the LLM call in flight is
abandoned, no further one starts, and the slot is free only once the thread has ended).

When every slot is taken a call waits, and the next free slot goes to **the client running the
fewest calls**, among those to the one whose last call started longest ago (round robin), and
within a client to its oldest call. A client that queues many calls therefore cannot make
another wait behind all of them: a newcomer waits for one running call to end, not for the
whole backlog (first-come-first-served made one client's six queued calls cost another's call
15.4 s instead of 4.2 s).

The wait is bounded: at most ``max_waiting`` calls wait, all clients together, and one client at
most :func:`share_of` of them, so that one client's backlog leaves room for three others. A
call past either bound is refused at once with :class:`~corrective_rag.errors.BusyError`
(the tool's "server busy" error) rather than queued without end; a call cancelled while it waits
never starts.

A client is whatever key the caller gives (:mod:`corrective_rag.cli.mcp_server`: the stdio
peer, an HTTP session, a client's cookie).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from corrective_rag.calls.worker import Waiting, in_worker
from corrective_rag.errors import BusyError, ConfigError

__all__ = ["MAX_CALLS", "MAX_WAITING", "FairCalls", "share_of"]

T = TypeVar("T")

MAX_CALLS = 4  # calls running at once (--max-calls): an LLM server's usual parallel slots
MAX_WAITING = 16  # calls waiting, all clients together (--max-waiting): four rounds of slots


def share_of(max_waiting: int) -> int:
    """The most calls one client may have waiting: a quarter of ``max_waiting`` (at least 1)."""
    return max(1, max_waiting // 4)


@dataclass(eq=False)
class _Waiter:
    owner: str
    order: int
    granted: bool = False
    event: Any = field(default=None)  # an anyio.Event, made in the event loop


class FairCalls:
    """Tool calls in worker threads: ``limit`` at once, fair across clients, a bounded wait.

    Used from one event loop (the server's): its counters are read by tests as server-side
    events (``running``, ``waiting``, ``refused``, :meth:`running_for`, :meth:`waiting_for`).

    Args:
        limit: calls running at once (1 or more).
        max_waiting: calls waiting, all clients together (0: none wait, a full server refuses).
    """

    def __init__(self, limit: int = MAX_CALLS, *, max_waiting: int = MAX_WAITING) -> None:
        if limit < 1:
            raise ConfigError(f"max_calls must be at least 1, got {limit}")
        if max_waiting < 0:
            raise ConfigError(f"max_waiting must be 0 or more, got {max_waiting}")
        self.limit = limit
        self.max_waiting = max_waiting
        self.max_waiting_each: int = share_of(max_waiting)
        self.running: int = 0  # calls holding a slot (their thread has not ended)
        self.waiting: int = 0  # calls waiting for a slot
        self.refused: int = 0  # calls answered "busy"
        self._running_by: dict[str, int] = {}
        self._queue: list[_Waiter] = []
        self._order = itertools.count()
        # When each client's last call got its slot (the round robin's turn); a client with
        # nothing running or waiting is forgotten, and comes back as one never served.
        self._started: dict[str, int] = {}
        self._pool: ThreadPoolExecutor | None = None

    def running_for(self, owner: str) -> int:
        """Calls of ``owner`` holding a slot."""
        return self._running_by.get(owner, 0)

    def waiting_for(self, owner: str) -> int:
        """Calls of ``owner`` waiting for a slot."""
        return sum(1 for w in self._queue if w.owner == owner)

    async def run(self, owner: str, work: Callable[[], T]) -> T:
        """``work()`` in a worker thread once ``owner`` has a slot; cancelled with the caller.

        Raises:
            BusyError: at once, when the wait is full (for all, or for this client).
        """
        await self._acquire(owner)
        try:
            return await in_worker(work, executor=self._executor(), waiting=Waiting.UNTIL_ENDED)
        finally:
            self._release(owner)

    def close(self) -> None:
        """Let the worker threads go (calls still running end as they would)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:  # one thread per slot: a call with a slot never waits for one
            self._pool = ThreadPoolExecutor(self.limit, thread_name_prefix="corrective-rag-mcp")
        return self._pool

    def _busy(self, owner: str) -> str | None:
        """Why a call of ``owner`` that finds every slot taken is refused, or None."""
        if self.waiting >= self.max_waiting:
            return (
                f"server busy: {self.running} running, {self.waiting} waiting, the most it lets "
                f"wait (--max-waiting {self.max_waiting}); try again shortly"
            )
        mine = self.waiting_for(owner)
        if mine >= self.max_waiting_each:
            return (
                f"server busy: this client has {mine} waiting already, the most one client may "
                f"(a quarter of --max-waiting {self.max_waiting}); try again once one has ended"
            )
        return None

    async def _acquire(self, owner: str) -> None:
        import anyio

        if self.running < self.limit and not self._queue:
            self._take(owner)
            return
        refusal = self._busy(owner)
        if refusal is not None:
            self.refused += 1
            raise BusyError(refusal)
        waiter = _Waiter(owner, next(self._order), event=anyio.Event())
        self._queue.append(waiter)
        self.waiting += 1
        try:
            await waiter.event.wait()
        except BaseException:
            if waiter.granted:  # handed a slot as it was cancelled: pass the slot on
                self._release(owner)
            else:
                self._queue.remove(waiter)
                self.waiting -= 1
                self._forget(owner)
            raise

    def _take(self, owner: str) -> None:
        self.running += 1
        self._running_by[owner] = self._running_by.get(owner, 0) + 1
        self._started[owner] = next(self._order)

    def _turn(self, waiter: _Waiter) -> tuple[int, int, int]:
        """The fair share's order: fewest running, least recently started, oldest call."""
        return (self.running_for(waiter.owner), self._started.get(waiter.owner, -1), waiter.order)

    def _forget(self, owner: str) -> None:
        if owner not in self._running_by and not any(w.owner == owner for w in self._queue):
            self._started.pop(owner, None)

    def _release(self, owner: str) -> None:
        self.running -= 1
        left = self._running_by[owner] - 1
        if left:
            self._running_by[owner] = left
        else:
            del self._running_by[owner]
        if self._queue:
            chosen = min(self._queue, key=self._turn)
            self._queue.remove(chosen)
            self.waiting -= 1
            chosen.granted = True
            self._take(chosen.owner)
            chosen.event.set()
        self._forget(owner)
