"""Cancel-and-wait has one home, :func:`corrective_rag.calls.worker.in_worker`: it stops the work
when the awaiting task is cancelled and returns only once the thread has ended, under asyncio's
cancellation and anyio's; and no other async function of the package hands work to a thread and
handles its cancellation itself."""

from __future__ import annotations

import ast
import asyncio
import textwrap
import threading
from pathlib import Path

import pytest

from corrective_rag.calls.scope import cancelled
from corrective_rag.calls.worker import Waiting, in_worker

PACKAGE = Path(__file__).resolve().parents[2] / "corrective_rag"
HOME = PACKAGE / "calls" / "worker.py"
SECONDS = 120


class Work:
    """Work that signals it started, then waits until its call scope is cancelled."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.ended = threading.Event()

    def __call__(self) -> str:
        self.started.set()
        try:
            while not cancelled():
                threading.Event().wait(0.01)  # what an LLM client's poll of the scope does
            return "stopped"
        finally:
            self.ended.set()


async def _started(work: Work) -> None:
    assert await asyncio.to_thread(work.started.wait, SECONDS)


def test_a_cancelled_task_stops_the_work_and_returns_after_it_ended():
    """Cancelling the awaiting asyncio task cancels the work's call scope, and CancelledError
    reaches the caller only once the work's thread has ended."""
    work = Work()
    ended_when_raised: list[bool] = []

    async def go() -> None:
        task = asyncio.ensure_future(in_worker(work))
        await _started(work)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            ended_when_raised.append(work.ended.is_set())

    asyncio.run(go())
    assert [True] == ended_when_raised


def test_under_anyio_the_wait_outlasts_repeated_cancellation():
    """In a cancelled anyio scope (which cancels every await again), ``UNTIL_ENDED`` keeps
    waiting until the thread has ended: the code after it (a slot's release) runs only then."""
    anyio = pytest.importorskip("anyio")
    work = Work()
    released_after_end: list[bool] = []

    async def holder() -> None:
        try:
            await in_worker(work, waiting=Waiting.UNTIL_ENDED)
        finally:
            released_after_end.append(work.ended.is_set())

    async def go() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(holder)
            await anyio.to_thread.run_sync(work.started.wait, SECONDS)
            tg.cancel_scope.cancel()

    anyio.run(go)
    assert [True] == released_after_end


def test_work_cancelled_while_waiting_for_a_thread_never_starts():
    """Work whose task is cancelled before a thread is free never runs."""
    from concurrent.futures import ThreadPoolExecutor

    first, second = Work(), Work()

    async def go() -> None:
        with ThreadPoolExecutor(max_workers=1) as pool:
            one = asyncio.ensure_future(in_worker(first, executor=pool))
            await _started(first)
            two = asyncio.ensure_future(in_worker(second, executor=pool))
            await asyncio.sleep(0)  # let it submit its work behind the first
            two.cancel()
            one.cancel()
            await asyncio.gather(one, two, return_exceptions=True)

    asyncio.run(go())
    assert not second.started.is_set()


# -- one home ----------------------------------------------------------------------------------

THREAD_HANDOFFS = {"run_in_executor", "run_sync", "to_thread", "Thread"}
CANCELLATION = {"CancelledError", "get_cancelled_exc_class", "CancelScope"}


def _names(node: ast.AST) -> set[str]:
    found = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            found.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            found.add(sub.attr)
    return found


def cancel_and_wait_copies(source: str) -> list[str]:
    """The async functions in ``source`` that hand work to a thread and handle its cancellation
    themselves (catch the cancellation, shield a wait, or give the thread a cancellable call
    scope): each is a copy of what ``in_worker`` does."""
    copies = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.AsyncFunctionDef):
            continue
        calls = [c for c in ast.walk(node) if isinstance(c, ast.Call)]
        hands_off = any(_names(c.func) & THREAD_HANDOFFS for c in calls)
        handles = any(
            isinstance(h, ast.ExceptHandler)
            and h.type is not None
            and _names(h.type) & CANCELLATION
            for h in ast.walk(node)
        ) or any(
            _names(c.func) & {"CancelScope", "shield"}
            or (_names(c.func) & {"call_scope"} and any(k.arg == "cancel" for k in c.keywords))
            for c in calls
        )
        if hands_off and handles:
            copies.append(node.name)
    return copies


# The two copies issue 49 found, as they were written (reduced to the mechanism).
OLD_MCP_CALLS = """
async def run(self, fn, *args):
    stop, ended = threading.Event(), threading.Event()
    def work():
        try:
            with call_scope(cancel=stop):
                return fn(*args)
        finally:
            ended.set()
    try:
        return await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        stop.set()
        with anyio.CancelScope(shield=True):
            while not ended.is_set():
                await anyio.sleep(0.02)
        raise
"""
OLD_ARUN = """
async def arun(orchestrator, question):
    stop = threading.Event()
    def work():
        with call_scope(cancel=stop):
            return orchestrator.run(question)
    future = asyncio.get_running_loop().run_in_executor(None, work)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        stop.set()
        await asyncio.shield(future)
        raise
"""


def test_the_detector_finds_the_copies_issue_49_found():
    """The check below can fail: it flags MCP's old ``_Calls.run`` and ``arun`` as written
    before, and not an async function that only awaits ``asyncio.to_thread``."""
    assert ["run"] == cancel_and_wait_copies(textwrap.dedent(OLD_MCP_CALLS))
    assert ["arun"] == cancel_and_wait_copies(textwrap.dedent(OLD_ARUN))
    plain = "async def f(x):\n    return await asyncio.to_thread(g, x)\n"
    assert [] == cancel_and_wait_copies(plain)


def test_cancel_and_wait_has_one_home():
    """No module but ``calls/worker.py`` hands work to a thread from async code and handles its
    cancellation itself: the others call ``in_worker``."""
    copies = {
        f"{path.relative_to(PACKAGE)}: {name}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != HOME
        for name in cancel_and_wait_copies(path.read_text(encoding="utf-8"))
    }
    assert set() == copies
    assert ["in_worker"] == cancel_and_wait_copies(HOME.read_text(encoding="utf-8"))
