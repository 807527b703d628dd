"""Hostile servers against the transport: close-delimited streams, gzip bombs, cut streams,
absurd rate-limit headers and replies that are cheap to send and costly to read
(:class:`~corrective_rag.testing.HostileLLMServer`)."""

from __future__ import annotations

import builtins
import json
import math
import os
import resource
import subprocess
import sys
import threading
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from corrective_rag.calls import Retries, call_scope
from corrective_rag.errors import (
    Cancelled,
    LLMResponseError,
    LLMTimeoutError,
    SearchError,
    SearchSkippedError,
)
from corrective_rag.llm.client import OpenAIChatClient
from corrective_rag.store.hybrid import HybridStore
from corrective_rag.testing import HostileLLMServer
from corrective_rag.types import Document
from corrective_rag.web.http import JsonCaller, WebSettings

REPO = Path(__file__).resolve().parents[2]
ASK = [{"role": "user", "content": "Is the sky blue?"}]
WAIT = 30.0  # bound on waiting for a server-side event; reached only when the event never comes


def _client_sockets(port: int) -> int:
    """Open sockets of this process connected to ``port`` on 127.0.0.1 (from /proc)."""
    ours = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            ours.add(target[8:-1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            remote_port = int(fields[2].rsplit(":", 1)[1], 16)
            if remote_port == port and fields[9] in ours:
                count += 1
    return count


def _threads(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == name]


def _abandon_each(server: HostileLLMServer, calls: int, call: Callable[[], object]) -> None:
    """Make ``calls`` calls, cancelling each once the server has its request."""
    for number in range(1, calls + 1):
        stop = threading.Event()

        def cancel_when_asked(count: int = number, event: threading.Event = stop) -> None:
            server.wait_for_requests(count, WAIT)
            event.set()

        helper = threading.Thread(target=cancel_when_asked)
        helper.start()
        with call_scope(cancel=stop), pytest.raises(Cancelled):
            call()
        helper.join()
        assert server.wait_for_disconnects(number, WAIT), f"call {number} still connected"


@pytest.fixture
def drip() -> Iterator[HostileLLMServer]:
    with HostileLLMServer("drip", interval=0.2) as server:
        yield server


# -- 1. close-delimited streams are abandoned and give their slots back -----------------------


def test_calls_against_a_close_delimited_drip_each_end_and_give_their_slot_back():
    """Four calls in a row against a close-delimited keep-alive stream with two slots each end
    at their deadline with the connection closed, so the third and fourth get slots too."""
    with HostileLLMServer("drip", interval=0.5) as server:
        client = OpenAIChatClient(
            server.base_url, "hostile", timeout=3, max_concurrency=2, stream=True
        )
        for number in range(1, 5):
            with call_scope(seconds=20), pytest.raises(LLMTimeoutError, match="within 3 s"):
                client.complete(ASK)
            assert server.wait_for_disconnects(number, WAIT)
        assert 4 == server.request_count


def test_a_hundred_abandoned_calls_leave_no_request_thread_and_no_socket(drip):
    """After 100 calls cancelled mid-stream on close-delimited replies, every request thread
    has ended, the server has seen every hang-up and no socket to it is left open."""
    client = OpenAIChatClient(drip.base_url, "hostile", timeout=60, max_concurrency=2)
    _abandon_each(drip, 100, lambda: client.complete(ASK))
    for thread in _threads("crag-llm-request"):
        thread.join(WAIT)
    assert [] == _threads("crag-llm-request")
    assert drip.wait_for_disconnects(100, WAIT)
    assert 0 == _client_sockets(drip.port)


def test_a_hundred_abandoned_searches_leave_no_transfer_thread_and_no_socket(drip):
    """After 100 web-search calls cancelled mid-body on close-delimited replies, every
    transfer thread has ended and no socket to the server is left open."""
    caller = JsonCaller("hostile", WebSettings(deadline=60.0))
    url = f"{drip.base_url}/chat/completions"
    _abandon_each(drip, 100, lambda: caller.call("POST", url, payload={"messages": ASK}))
    for thread in _threads("crag-web-transfer"):
        thread.join(WAIT)
    assert [] == _threads("crag-web-transfer")
    assert drip.wait_for_disconnects(100, WAIT)
    assert 0 == _client_sockets(drip.port)


# -- 2. compression inside an event stream is inflated in bounded steps -----------------------


def test_a_gzip_bomb_in_an_event_stream_is_never_inflated_whole():
    """A close-delimited event stream under two gzip layers inflating to 128 MiB fails at the
    4 MB cap while the client never holds more than a few MiB of it."""
    with HostileLLMServer("gzip_bomb", size=128 << 20) as server:
        client = OpenAIChatClient(server.base_url, "hostile", timeout=60)
        tracemalloc.start()
        try:
            with pytest.raises(LLMResponseError, match="limit"):
                client.complete(ASK)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert peak < 32 << 20, f"{peak / 2**20:.0f} MiB held"


# -- 3. replies that are cheap to send and costly to read -------------------------------------


def test_the_worst_lenient_parse_of_a_4_mb_reply_is_cheap():
    """The lenient JSON search over 4 MB of unclosed ``{"":`` ends as unparseable well inside a
    CPU limit of 10 s (it took minutes when every ``{`` was a new full decode)."""
    code = (
        "import resource\n"
        "resource.setrlimit(resource.RLIMIT_CPU, (10, 10))\n"
        "from corrective_rag.errors import VerdictParseError\n"
        "from corrective_rag.llm.jsonparse import parse_json_object\n"
        "for text in ['{\"\":' * 1_000_000, '{\"a\":\"' * 700_000, '{' * 4_000_000]:\n"
        "    try:\n"
        "        parse_json_object(text, strict=False)\n"
        "    except VerdictParseError:\n"
        "        print('unparseable')\n"
    )

    def no_limit_inherited() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))

    done = subprocess.run(
        [sys.executable, "-c", code],
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        capture_output=True,
        text=True,
        timeout=600,
        preexec_fn=no_limit_inherited,
        check=False,
    )
    assert 0 == done.returncode, done.stderr
    assert ["unparseable"] * 3 == done.stdout.split()


def test_a_stream_of_tiny_events_is_refused_past_its_event_limit():
    """An event stream of four hundred thousand ``data: {}`` lines (4 MB) ends with a clear
    error at the event limit instead of a second of decoding per reply."""
    from corrective_rag.llm.stream import MAX_EVENTS, collect_events

    body = b"data: {}\n" * 400_000
    with pytest.raises(LLMResponseError, match=f"more than {MAX_EVENTS} events"):
        collect_events([body[i : i + 65536] for i in range(0, len(body), 65536)], 4_000_000)


# -- 7. a stream cut by closing the connection is retried --------------------------------------


def test_a_close_delimited_stream_cut_mid_reply_is_retried():
    """A close-delimited event stream that stops mid-reply is retried like a cut chunked
    stream, and the retry's reply is returned."""
    with HostileLLMServer("cut_stream", times=1) as server:
        client = OpenAIChatClient(server.base_url, "hostile", timeout=30)
        reply = client.complete(ASK)
        assert 2 == server.request_count
        assert 1 == server.hostile_count
    assert reply.text


# -- 8. rate-limit headers cannot switch a service off --------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {"Retry-After": "1e9"},
        {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "inf"},
        {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1e308"},
        {"X-RateLimit-Remaining": "0, 0", "X-RateLimit-Reset": "1, Infinity"},
    ],
)
def test_absurd_rate_limit_headers_keep_a_service_quiet_ten_minutes_at_most(headers):
    """A 429 asking to wait for ever (or 1e308 s) keeps the search from being sent again for
    at most ten minutes, not for the life of the process."""
    with HostileLLMServer("rate_limited", headers=headers) as server:
        caller = JsonCaller("hostile", WebSettings(), sleep=lambda _: None)
        url = f"{server.base_url}/chat/completions"
        with pytest.raises(SearchError):
            caller.call("POST", url, payload={"messages": ASK})
        try:
            caller.call("POST", url, payload={"messages": ASK})
        except SearchSkippedError as skipped:
            assert skipped.retry_after <= 600.0
        except SearchError:
            pass  # a header ignored as not a number: asked again


def test_a_nan_rate_limit_reset_is_ignored_not_a_retry_at_once():
    """``X-RateLimit-Reset: nan`` is not a wait: retries wait their finite back-off."""
    waits: list[float] = []
    headers = {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "nan"}
    with HostileLLMServer("rate_limited", headers=headers) as server:
        settings = WebSettings(retries=Retries(max_retries=2, backoff_base=0.1))
        caller = JsonCaller("hostile", settings, sleep=waits.append)
        with pytest.raises(SearchError):
            caller.call("POST", f"{server.base_url}/chat/completions", payload={"messages": ASK})
        assert 3 == server.request_count
    assert 2 == len(waits)
    assert all(math.isfinite(w) and w > 0 for w in waits), waits


def test_absurd_retry_after_of_an_llm_server_waits_retry_after_max():
    """An LLM server's ``Retry-After: 1e9`` or ``nan`` is never waited for longer than
    ``retry_after_max``, and never skips the back-off."""
    for value in ("1e9", "nan", "inf", "-1e308"):
        waits: list[float] = []
        with HostileLLMServer("rate_limited", headers={"Retry-After": value}) as server:
            client = OpenAIChatClient(
                server.base_url,
                "hostile",
                retries=Retries(max_retries=1, retry_after_max=5.0, give_up_after=None),
                sleep=waits.append,
            )
            with pytest.raises(LLMResponseError):
                client.complete(ASK)
        assert 1 == len(waits)
        assert all(math.isfinite(w) and 0 <= w <= 5.0 for w in waits), (value, waits)


# -- the command line against a close-delimited drip ------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_batch_command_against_a_close_delimited_drip_records_every_question(
    tmp_path, embedder
):
    """`corrective-rag batch` of 10 questions with `--timeout 4 --concurrency 1` against a
    close-delimited keep-alive stream ends with every question recorded, none as a Python
    exception type."""
    store_dir = tmp_path / "store"
    with HybridStore.open(store_dir, embedder=embedder) as store:
        store.add(
            [Document(id=f"d{i}", text=f"Topic {i} is about bees and honey.") for i in range(4)]
        )
    queries = tmp_path / "queries.jsonl"
    ids = [f"q{i}" for i in range(10)]
    queries.write_text(
        "".join(
            json.dumps({"id": q, "query": f"How do bees make honey ({q})?"}) + "\n" for q in ids
        )
    )
    out = tmp_path / "results.jsonl"
    with HostileLLMServer("drip", interval=0.5) as server:
        command = [
            sys.executable, "-m", "corrective_rag", "batch", str(queries), "--out", str(out),
            "--store", str(store_dir), "--llm-url", server.base_url, "--model", "hostile",
            "--timeout", "4", "--concurrency", "1", "--max-iterations", "1", "--no-progress",
        ]  # fmt: skip
        done = subprocess.run(
            command,
            env=dict(os.environ, PYTHONPATH=str(REPO)),
            capture_output=True,
            text=True,
            timeout=840,  # 10 questions of a few 4 s calls each, on a busy machine
            check=False,
        )
    assert "internal error" not in done.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(ids) == sorted(r["id"] for r in records), done.stderr
    python_types = {name for name in dir(builtins) if name.endswith(("Error", "Exception"))}
    assert [] == [r["error"] for r in records if (r.get("error") or {}).get("type") in python_types]


@pytest.mark.slow
@pytest.mark.parametrize(
    "mode", ["drip", "gzip_bomb", "cut_stream", "rate_limited", "expensive_json"]
)
def test_run_against_every_hostile_mode_ends_without_an_internal_error(tmp_path, embedder, mode):
    """`corrective-rag run` against each hostile mode ends with the package's own message
    (exit 0 or 1), never "internal error"."""
    store_dir = tmp_path / "store"
    with HybridStore.open(store_dir, embedder=embedder) as store:
        store.add([Document(id=f"d{i}", text=f"Topic {i}: bees make honey.") for i in range(3)])
    options = {"interval": 0.5, "size": 64 << 20, "repeat": 100_000}
    with HostileLLMServer(mode, **options) as server:
        command = [
            sys.executable, "-m", "corrective_rag", "run", "How do bees make honey?",
            "--store", str(store_dir), "--llm-url", server.base_url, "--model", "hostile",
            "--timeout", "3", "--max-retries", "1", "--max-iterations", "1",
        ]  # fmt: skip
        done = subprocess.run(
            command,
            env=dict(os.environ, PYTHONPATH=str(REPO)),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    assert done.returncode in (0, 1), done.stderr
    assert "internal error" not in done.stderr + done.stdout
    assert "Traceback" not in done.stderr
