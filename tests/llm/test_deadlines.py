"""Deadlines and cancellation of LLM calls: per try, across tries, per run scope, Ctrl-C.

No assertion here is on time: each test checks which error ends the call and how many requests
the server saw; the pytest timeout is the only clock (a call that never ends fails the test).
"""

from __future__ import annotations

import threading

import pytest

from corrective_rag.calls import Retries, Timeouts
from corrective_rag.calls.scope import call_scope, cancelled, deadline
from corrective_rag.errors import Cancelled, ConfigError, LLMResponseError, LLMTimeoutError
from corrective_rag.llm.client import OpenAIChatClient
from corrective_rag.llm.failures import permanent_hint
from corrective_rag.llm.parallel import parallel_map
from corrective_rag.testing import Fault, ScriptedLLMServer

HELLO = [{"role": "user", "content": "say hello"}]


def _client(server: ScriptedLLMServer, **kw) -> OpenAIChatClient:
    return OpenAIChatClient(server.base_url, "scripted", **kw)


@pytest.mark.timeout(120)
def test_a_dripping_server_is_cut_off_by_the_total_timeout():
    """A server sending one byte at a time never trips the read timeout; the total one ends it."""
    with ScriptedLLMServer(faults=lambda request, n: Fault.drip(0.05)) as server:
        client = _client(
            server,
            timeouts=Timeouts(read=30, total=1.0),
            retries=Retries(max_retries=0),
        )
        with pytest.raises(LLMTimeoutError, match="no complete answer within 1 s"):
            client.complete(HELLO)
    assert 1 == server.request_count


@pytest.mark.timeout(120)
def test_retries_share_one_bound():
    """With give_up_after, a hanging server gets fewer tries than max_retries would allow."""
    with ScriptedLLMServer(faults=lambda request, n: Fault.held()) as server:
        client = _client(
            server,
            timeouts=Timeouts(read=0.4),
            retries=Retries(max_retries=20, backoff_base=0.01, give_up_after=1.0),
        )
        with pytest.raises(LLMTimeoutError):
            client.complete(HELLO)
        # 0.4 s per try within 1 s: at most three tries can start, never the 21 allowed
        assert 1 <= server.request_count <= 3


@pytest.mark.timeout(120)
def test_a_scope_deadline_ends_a_call_in_flight():
    """A call scope's deadline (how Budget.max_seconds reaches the client) ends a held request."""
    with ScriptedLLMServer(faults=lambda request, n: Fault.held()) as server:
        client = _client(server)  # default timeouts: 30 s per read, 60 s per call
        with call_scope(seconds=0.5), pytest.raises(LLMTimeoutError, match=r"Budget\.max_seconds"):
            client.complete(HELLO)
        assert 1 == server.request_count  # no retry past the run's deadline


@pytest.mark.timeout(120)
def test_setting_the_cancel_event_cancels_a_call_in_flight():
    """A call held by the server raises Cancelled once the scope's event is set."""
    stop = threading.Event()
    outcome: list[BaseException] = []
    with ScriptedLLMServer(faults=lambda request, n: Fault.held()) as server:
        client = _client(server)

        def call() -> None:
            with call_scope(cancel=stop):
                try:
                    client.complete(HELLO)
                except BaseException as exc:
                    outcome.append(exc)

        thread = threading.Thread(target=call)
        thread.start()
        assert server.wait_for_requests(1)
        stop.set()
        thread.join(timeout=60)
        assert not thread.is_alive()
    assert [Cancelled] == [type(e) for e in outcome]


@pytest.mark.timeout(120)
def test_a_cancelled_scope_stops_parallel_calls_and_the_next_ones():
    """Cancelling reaches calls on parallel_map's threads, and no new request is sent after."""
    stop = threading.Event()
    with ScriptedLLMServer(faults=lambda request, n: Fault.held()) as server:
        client = _client(server, max_concurrency=2)
        threading.Thread(target=lambda: server.wait_for_requests(2) and stop.set()).start()
        with call_scope(cancel=stop):
            with pytest.raises(Cancelled):  # not an LLMError: never returned in place
                client.complete_many([HELLO] * 4)
            assert cancelled()
        sent = server.request_count
    assert 2 == sent


def test_parallel_map_carries_the_scope_to_its_threads():
    """A deadline set around parallel_map is seen by the functions it runs on other threads."""
    with call_scope(seconds=100):
        outer = deadline()
        seen = parallel_map(lambda _: deadline(), range(4), max_workers=4)
    assert [outer] * 4 == seen


@pytest.mark.parametrize(
    ("status", "body", "fix"),
    [
        (401, "", "OPENAI_API_KEY"),
        (403, "", "key"),
        (404, "", "--model"),
        (400, '{"error": {"message": "The model `gpt-9` does not exist"}}', "--model"),
    ],
)
def test_permanent_failures_are_not_retried_and_say_what_to_fix(status, body, fix):
    """401, 403, 404 and an unknown model fail at the first try with what the user must fix."""
    with ScriptedLLMServer(faults=lambda request, n: Fault.error(status, body)) as server:
        client = _client(server, retries=Retries(max_retries=3, backoff_base=0.01))
        with pytest.raises(LLMResponseError, match="not retried") as info:
            client.complete(HELLO)
    assert (status, 1) == (info.value.status, server.request_count)
    assert fix in str(info.value)
    assert permanent_hint(500, "") is None


def test_timeouts_and_retries_validate_the_new_bounds():
    """A total timeout or a give_up_after that is not a positive number is a ConfigError."""
    with pytest.raises(ConfigError, match="total"):
        Timeouts(total=0)
    with pytest.raises(ConfigError, match="give_up_after"):
        Retries(give_up_after=-1)
    with pytest.raises(ConfigError, match="seconds"), call_scope(seconds=float("nan")):
        pass
