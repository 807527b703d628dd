"""``corrective-rag mcp``: a fair share of the call slots per client, and a bounded wait.

The scheduler (:class:`~corrective_rag.cli.mcp_calls.FairCalls`) is driven directly with work
that blocks on gates the test opens, and end to end over streamable HTTP with the SDK's client
(two clients, the default protocol and the handshake one), reading its counters as server-side
events.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import anyio
import anyio.to_thread
from mcp_helpers import index_store

from corrective_rag.cli.main import main
from corrective_rag.cli.mcp_calls import FairCalls, share_of
from corrective_rag.errors import BusyError, ConfigError

SECONDS = 300


async def _until(check: Callable[[], bool]) -> None:
    """Wait (bounded) until ``check()`` holds, looking again at every scheduler turn."""
    with anyio.fail_after(SECONDS):
        while not check():
            await anyio.sleep(0.005)


class Gates:
    """Work items that record when they start and then wait for the test to open their gate."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self._gates: dict[str, threading.Event] = {}

    def work(self, name: str) -> Callable[[], str]:
        gate = self._gates.setdefault(name, threading.Event())

        def run() -> str:
            self.started.append(name)
            gate.wait(SECONDS)
            return name

        return run

    def open(self, name: str) -> None:
        self._gates[name].set()

    def open_all(self) -> None:
        for gate in self._gates.values():
            gate.set()

    def drive(self, calls: FairCalls, go: Callable[[], Any]) -> None:
        """``anyio.run(go)``; then every gate is opened and the calls' threads let go."""
        try:
            anyio.run(go)
        finally:
            self.open_all()
            calls.close()


@pytest.mark.parametrize("limit", [1, 2])
def test_a_newcomer_waits_for_one_call_not_for_another_clients_backlog(limit):
    """Client A fills every slot and queues three more calls; client B's one call, queued after
    them, gets the next free slot (first come, first served would give it the last)."""
    calls = FairCalls(limit, max_waiting=16)
    gates = Gates()
    ran: list[str] = []

    async def call(owner: str, name: str) -> None:
        ran.append(await calls.run(owner, gates.work(name)))

    async def go() -> None:
        async with anyio.create_task_group() as group:
            for i in range(limit):
                group.start_soon(call, "A", f"a-run{i}")
            await _until(lambda: len(gates.started) == limit)
            for i in range(3):
                group.start_soon(call, "A", f"a-wait{i}")
            await _until(lambda: calls.waiting == 3)
            group.start_soon(call, "B", "b")
            await _until(lambda: calls.waiting == 4)
            gates.open("a-run0")
            await _until(lambda: len(gates.started) == limit + 1)
            gates.open_all()

    gates.drive(calls, go)
    assert "b" == gates.started[limit]
    assert [f"a-wait{i}" for i in range(3)] == gates.started[limit + 1 :]
    assert (0, 0, 0) == (calls.running, calls.waiting, calls.refused)


def test_past_the_bounds_a_call_is_refused_at_once_as_busy():
    """With one slot and room for four waiting calls (one per client), a client's second waiting
    call and a fifth client's call are refused at once with BusyError naming the bound; the
    calls that waited all run (the clients not yet served first), and nothing is left counted
    afterwards."""
    calls = FairCalls(1, max_waiting=4)
    assert 1 == calls.max_waiting_each == share_of(4)
    gates = Gates()
    refusals: list[str] = []

    async def call(owner: str, name: str) -> None:
        try:
            await calls.run(owner, gates.work(name))
        except BusyError as exc:
            refusals.append(str(exc))

    async def go() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(call, "A", "a0")
            await _until(lambda: gates.started == ["a0"])
            group.start_soon(call, "A", "a1")
            await _until(lambda: calls.waiting == 1)
            await call("A", "a2")  # returns at once: refused
            for owner in "BCD":
                group.start_soon(call, owner, owner)
            await _until(lambda: calls.waiting == 4)
            await call("E", "e")
            assert 2 == calls.refused
            gates.open_all()

    gates.drive(calls, go)
    assert 2 == len(refusals)
    assert "this client has 1 waiting" in refusals[0]
    assert "4 waiting" in refusals[1] and "--max-waiting 4" in refusals[1]
    assert ["a0", "B", "C", "D", "a1"] == gates.started  # A was served last: it comes last
    assert (0, 0, {}) == (calls.running, calls.waiting, calls._started)


def test_a_call_cancelled_while_it_waits_never_runs_and_gives_its_place_back():
    """A waiting call whose caller gives up never starts, and its place in the wait is free."""
    calls = FairCalls(1, max_waiting=4)
    gates = Gates()

    async def go() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(calls.run, "A", gates.work("a"))
            await _until(lambda: gates.started == ["a"])
            async with anyio.create_task_group() as waiting:
                waiting.start_soon(calls.run, "B", gates.work("b"))
                await _until(lambda: calls.waiting == 1)
                waiting.cancel_scope.cancel()
            assert 0 == calls.waiting
            gates.open_all()

    gates.drive(calls, go)
    assert ["a"] == gates.started


def test_bounds_are_checked():
    """No slot, or a negative wait, is a ConfigError; the CLI refuses them too."""
    with pytest.raises(ConfigError):
        FairCalls(0)
    with pytest.raises(ConfigError):
        FairCalls(1, max_waiting=-1)
    assert 2 == main(["mcp", "--store", "x", "--max-waiting", "-1"])


# -- end to end, over HTTP ---------------------------------------------------------------------

FILES = {
    "copying.txt": "The copy module: copy.deepcopy(x) builds a deep copy of a compound object.",
    "timing.txt": "The timeit module measures the execution time of small code snippets.",
}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real two-file store, made by ``corrective-rag index``."""
    return index_store(tmp_path_factory.mktemp("mcp-fair"), FILES)


class InThread:
    """``corrective-rag mcp --http`` served by uvicorn in a thread of the test, behind its
    guard, so that the test reads the service's counters."""

    def __init__(self, service: Any) -> None:
        import uvicorn

        from corrective_rag.cli.mcp_http import HttpGuard, listen
        from corrective_rag.cli.mcp_server import build_server

        self.service = service
        self.sock = listen("127.0.0.1", 0)
        app = build_server(service).streamable_http_app()
        self.server = uvicorn.Server(uvicorn.Config(HttpGuard(app), log_level="warning"))
        self.thread = threading.Thread(target=anyio.run, args=(self.server.serve, [self.sock]))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/mcp"

    def __enter__(self) -> InThread:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(SECONDS)
        self.sock.close()
        self.service.close()


@pytest.fixture
def served(store: Path) -> Iterator[Callable[..., InThread]]:
    running: list[InThread] = []

    def start(llm_url: str | None = None, **kwargs: Any) -> InThread:
        from corrective_rag.cli.mcp_service import SearchService
        from corrective_rag.cli.wiring import Options

        model = "scripted" if llm_url else None
        opts = Options(store=str(store), llm_url=llm_url, model=model, max_iterations=1)
        served = InThread(SearchService(opts, **kwargs))
        running.append(served.__enter__())
        return served

    yield start
    for served in running:
        served.__exit__()


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_over_http_one_clients_backlog_does_not_delay_another_client(served, mode):
    """Over streamable HTTP (the default 2026-07-28 protocol, whose clients are told apart by
    the cookie the server gives each, and the handshake protocol's sessions), with one slot:
    client A's running call and three queued ones, then client B's one call; B's call is
    served second, not fifth."""
    from mcp import Client

    from corrective_rag.testing import Fault, ScriptedLLMServer

    llm = ScriptedLLMServer().start()
    llm.enqueue(Fault.held())  # the first call's first LLM request: held until all are queued
    server = served(llm_url=llm.base_url, max_calls=1)
    calls = server.service.calls
    finished: list[str] = []

    async def ask(client: Any, name: str) -> None:
        result = await client.call_tool("search", {"question": f"{name} deep copy of a list"})
        assert not result.is_error, result.content[0].text
        finished.append(name)

    async def go() -> None:
        async with (
            Client(server.url, mode=mode, read_timeout_seconds=SECONDS) as a,
            Client(server.url, mode=mode, read_timeout_seconds=SECONDS) as b,
            anyio.create_task_group() as group,
        ):
            group.start_soon(ask, a, "first")
            await anyio.to_thread.run_sync(llm.wait_for_requests, 1, SECONDS)
            for i in range(3):
                group.start_soon(ask, a, f"a{i}")
            await _until(lambda: calls.waiting == 3)
            group.start_soon(ask, b, "b")
            await _until(lambda: calls.waiting == 4)
            llm.release()

    try:
        anyio.run(go)
    finally:
        llm.stop()
    assert ["a0", "a1", "a2", "b", "first"] == sorted(finished)
    # the order the server served them: each search's LLM requests, in arrival order (with one
    # slot, one search's requests all come before the next one's); the order in which the two
    # clients read their replies is the event loop's, not the server's
    served_order: list[str] = []
    for request in llm.requests:
        asked = json.dumps(request.get("messages", []))
        name = next(
            (n for n in ("first", "b", "a0", "a1", "a2") if f"{n} deep copy" in asked), None
        )
        if name is not None and name not in served_order:
            served_order.append(name)
    assert ["first", "b", "a0", "a1", "a2"] == served_order


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_busy_server_answers_a_tool_error_at_once(store):
    """With its one slot taken and no room to wait (``max_waiting=0``), a second call gets a
    "server busy" tool error at once, while the first is still running; the first then
    completes."""
    from mcp import Client

    from corrective_rag.cli.mcp_server import build_server
    from corrective_rag.cli.mcp_service import SearchService
    from corrective_rag.cli.wiring import Options
    from corrective_rag.testing import Fault, ScriptedLLMServer

    with ScriptedLLMServer() as llm:
        llm.enqueue(Fault.held())
        opts = Options(store=str(store), llm_url=llm.base_url, model="scripted", max_iterations=1)
        service = SearchService(opts, max_calls=1, max_waiting=0)
        replies: dict[str, Any] = {}

        async def ask(client: Any, name: str) -> None:
            replies[name] = await client.call_tool("search", {"question": f"{name}: deep copy"})

        async def go() -> None:
            async with (
                Client(build_server(service), read_timeout_seconds=SECONDS) as client,
                anyio.create_task_group() as group,
            ):
                group.start_soon(ask, client, "first")
                await anyio.to_thread.run_sync(llm.wait_for_requests, 1, SECONDS)
                await ask(client, "second")
                assert "first" not in replies
                llm.release()

        try:
            anyio.run(go)
        finally:
            service.close()
    assert replies["second"].is_error
    assert "server busy: 1 running, 0 waiting" in replies["second"].content[0].text
    assert not replies["first"].is_error
    assert 1 == service.calls.refused
