"""OpenAIChatClient against the scripted server: retries, fallbacks, limits, usage, secrecy."""

from __future__ import annotations

import json
import random
import socket
import threading
from datetime import datetime, timezone

import pytest
import structlog

from corrective_rag.calls import Retries, Timeouts, parse_retry_after
from corrective_rag.errors import (
    ConfigError,
    InputError,
    LLMResponseError,
    LLMTimeoutError,
    LLMTransportError,
)
from corrective_rag.llm import Pricing
from corrective_rag.llm.client import OpenAIChatClient
from corrective_rag.testing import Fault, ScriptedLLMServer

HELLO = [{"role": "user", "content": "say hello"}]
SCHEMA = {"title": "t", "type": "object", "properties": {"a": {"type": "string"}}}
CANARY = "sk-CANARY-7f3e9a1b2c"


@pytest.fixture
def server():
    with ScriptedLLMServer(reply=lambda req: "hello there") as srv:
        yield srv


def make(server: ScriptedLLMServer, **kw) -> tuple[OpenAIChatClient, list[float]]:
    sleeps: list[float] = []
    kw.setdefault("retries", Retries(max_retries=3, backoff_base=0.5))
    client = OpenAIChatClient(
        server.base_url, "scripted", sleep=sleeps.append, rng=random.Random(0), **kw
    )
    return client, sleeps


def test_reply_text_usage_and_cost(server):
    """A plain call returns the text, the server's token counts and the priced cost."""
    client, _ = make(server, pricing=Pricing(prompt_per_million=2.0, completion_per_million=4.0))
    reply = client.complete(HELLO)
    assert "hello there" == reply.text
    assert (1, 2, 2) == (
        reply.usage.llm_calls,
        reply.usage.prompt_tokens,
        reply.usage.completion_tokens,
    )
    assert pytest.approx((2 * 2.0 + 2 * 4.0) / 1e6) == reply.usage.cost_usd
    assert reply.usage.latency_seconds > 0


def test_usage_estimated_when_absent():
    """Without a usage block the tokens are estimated with tiktoken."""
    with ScriptedLLMServer(reply=lambda req: "hello there", usage=False) as srv:
        reply = make(srv)[0].complete(HELLO)
    assert 2 == reply.usage.completion_tokens
    assert reply.usage.prompt_tokens >= 2


def test_rate_limit_honours_retry_after_seconds(server):
    """A 429 with Retry-After: 2 waits exactly 2 seconds and then succeeds."""
    client, sleeps = make(server)
    server.enqueue(Fault.rate_limited(retry_after="2"))
    assert "hello there" == client.complete(HELLO).text
    assert [2.0] == sleeps
    assert 2 == server.request_count


def test_retry_after_is_capped(server):
    """A Retry-After beyond the cap waits only the cap."""
    client, sleeps = make(server, retries=Retries(max_retries=1, retry_after_max=7.0))
    server.enqueue(Fault.rate_limited(retry_after="1000"))
    client.complete(HELLO)
    assert [7.0] == sleeps


def test_parse_retry_after_http_date():
    """An HTTP-date Retry-After gives the seconds until that date; junk gives None."""
    now = datetime(2024, 1, 1, 0, 0, 0, tzinfo=timezone.utc)
    assert 30.0 == parse_retry_after("Mon, 01 Jan 2024 00:00:30 GMT", now=now)
    assert 0.0 == parse_retry_after("Mon, 01 Jan 2023 00:00:30 GMT", now=now)
    assert parse_retry_after("soon", now=now) is None


def test_5xx_backs_off_exponentially_with_jitter(server):
    """500 then 503 are retried with back-off base*2**n scaled into 50-100% by jitter."""
    client, sleeps = make(server)
    server.enqueue(Fault.error(500), Fault.error(503))
    assert "hello there" == client.complete(HELLO).text
    assert 3 == server.request_count
    assert 0.25 <= sleeps[0] <= 0.5
    assert 0.5 <= sleeps[1] <= 1.0


def test_gives_up_after_retry_limit(server):
    """Persistent 500s raise LLMResponseError with the status after max_retries + 1 tries."""
    client, sleeps = make(server, retries=Retries(max_retries=2))
    server.enqueue(*[Fault.error(500, body="overloaded")] * 3)
    with pytest.raises(LLMResponseError) as info:
        client.complete(HELLO)
    assert 500 == info.value.status
    assert "overloaded" in info.value.body
    assert 3 == server.request_count
    assert 2 == len(sleeps)


def test_other_4xx_not_retried(server):
    """A 400 fails at once."""
    client, sleeps = make(server)
    server.enqueue(Fault.error(400, body="bad request"))
    with pytest.raises(LLMResponseError) as info:
        client.complete(HELLO)
    assert (400, 1, []) == (info.value.status, server.request_count, sleeps)


def test_read_timeout_retried_then_raised(server):
    """A server hanging past the read timeout raises LLMTimeoutError after the retries."""
    client, _ = make(server, timeouts=Timeouts(read=0.2), retries=Retries(max_retries=1))
    server.enqueue(Fault.hang(1.5), Fault.hang(1.5))
    with pytest.raises(LLMTimeoutError):
        client.complete(HELLO)
    assert 2 == server.request_count


def test_body_cut_short_is_retried(server):
    """A connection closed mid-body is a transport error, retried successfully."""
    client, sleeps = make(server)
    server.enqueue(Fault.close_mid_body())
    assert "hello there" == client.complete(HELLO).text
    assert 1 == len(sleeps)


def test_connection_refused_raises_transport_error():
    """Nothing listening on the port gives LLMTransportError after the retries."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    sleeps: list[float] = []
    client = OpenAIChatClient(
        f"http://127.0.0.1:{port}", "m", retries=Retries(max_retries=2), sleep=sleeps.append
    )
    with pytest.raises(LLMTransportError):
        client.complete(HELLO)
    assert 2 == len(sleeps)


@pytest.mark.parametrize("fault", [Fault.non_json(), Fault.wrong_shape()])
def test_malformed_body_raises_response_error(server, fault):
    """A 200 whose body is not a chat completion raises LLMResponseError without retrying."""
    client, _ = make(server)
    server.enqueue(fault)
    with pytest.raises(LLMResponseError):
        client.complete(HELLO)
    assert 1 == server.request_count


def test_huge_body_stops_at_the_cap(server):
    """A 10 MB body fails with LLMResponseError naming the limit, reading no more than the cap."""
    client, _ = make(server, max_response_bytes=100_000)
    server.enqueue(Fault.huge(10_000_000))
    with pytest.raises(LLMResponseError, match="100000-byte limit"):
        client.complete(HELLO)


def test_structured_output_falls_back_and_remembers():
    """A server rejecting json_schema gets json_object from then on, without asking again."""
    with ScriptedLLMServer(reply=lambda r: '{"a": "x"}', reject_formats={"json_schema"}) as srv:
        client, _ = make(srv)
        assert '{"a": "x"}' == client.complete(HELLO, json_schema=SCHEMA).text
        assert 2 == srv.request_count
        assert "json_object" == client.structured_mode
        client.complete(HELLO, json_schema=SCHEMA)
        assert 3 == srv.request_count
        sent = srv.requests[-1]
    assert {"type": "json_object"} == sent["response_format"]
    assert "JSON schema" in sent["messages"][-1]["content"]


def test_structured_output_falls_back_to_instructions():
    """A server rejecting both formats gets the schema as an instruction only."""
    rejected = {"json_schema", "json_object"}
    with ScriptedLLMServer(reply=lambda r: '{"a": "x"}', reject_formats=rejected) as srv:
        client, _ = make(srv)
        client.complete(HELLO, json_schema=SCHEMA)
        sent = srv.requests[-1]
    assert "instructions" == client.structured_mode
    assert "response_format" not in sent
    assert json.dumps(SCHEMA, separators=(",", ":")) in sent["messages"][-1]["content"]


def test_json_schema_sent_when_accepted(server):
    """A schema travels as response_format json_schema with the schema's title as name."""
    client, _ = make(server)
    client.complete(HELLO, json_schema=SCHEMA)
    fmt = server.requests[0]["response_format"]
    assert ("json_schema", "t", SCHEMA) == (
        fmt["type"],
        fmt["json_schema"]["name"],
        fmt["json_schema"]["schema"],
    )


def test_concurrency_bound_across_threads():
    """No more than max_concurrency requests are in flight, and all calls complete."""
    with ScriptedLLMServer(reply=lambda r: "x", latency=0.1) as srv:
        client, _ = make(srv, max_concurrency=2)
        threads = [threading.Thread(target=client.complete, args=(HELLO,)) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        replies = client.complete_many([HELLO] * 4)
    assert 2 == srv.max_in_flight
    assert ["x"] * 4 == [r.text for r in replies]
    assert 10 == srv.request_count


def test_complete_many_returns_errors_in_place(server):
    """complete_many returns an LLMError in the slot of a failed call."""
    client, _ = make(server, max_concurrency=1)
    server.enqueue(None, Fault.error(404))
    results = client.complete_many([HELLO, HELLO, HELLO])
    assert [False, True, False] == [isinstance(r, LLMResponseError) for r in results]
    assert 404 == results[1].status


def test_api_key_never_in_errors_logs_or_repr(server):
    """A server echoing the Authorization header cannot leak the key into errors or logs."""
    client, _ = make(server, api_key=CANARY, retries=Retries(max_retries=1))
    echo = '{"error": "invalid key {authorization}"}'
    server.enqueue(Fault.error(500, body=echo), Fault.error(401, body=echo))
    with structlog.testing.capture_logs() as logs, pytest.raises(LLMResponseError) as info:
        client.complete(HELLO)
    assert "Bearer ***" in info.value.body
    assert CANARY not in str(info.value) + info.value.body + repr(client)
    assert CANARY not in repr(logs)
    assert any(e["event"] == "llm_retry" for e in logs)


def test_constructor_and_call_validation(server):
    """Bad arguments raise ConfigError at construction and InputError per call."""
    with pytest.raises(ConfigError):
        OpenAIChatClient("ftp://x", "m")
    with pytest.raises(ConfigError):
        OpenAIChatClient(server.base_url, "m", max_concurrency=0)
    with pytest.raises(ConfigError):
        Timeouts(read=0)
    client, _ = make(server)
    with pytest.raises(InputError):
        client.complete([])
    with pytest.raises(InputError):
        client.complete([{"role": "robot", "content": "x"}])
    assert 0 == server.request_count


def test_base_url_gets_v1_when_bare():
    """A bare host URL is completed with /v1; a URL with a path is kept."""
    assert "http://h:1/v1/chat/completions" == OpenAIChatClient("http://h:1", "m").url
    assert "http://h:1/api/chat/completions" == OpenAIChatClient("http://h:1/api/", "m").url


def test_structured_fallback_is_thread_safe():
    """Parallel calls to a server rejecting json_schema all succeed and settle on json_object."""
    with ScriptedLLMServer(
        reply=lambda r: "{}", reject_formats={"json_schema"}, latency=0.05
    ) as srv:
        client, _ = make(srv, max_concurrency=4)
        results = client.complete_many([HELLO] * 8, json_schema=SCHEMA)
        late = client.complete(HELLO, json_schema=SCHEMA)
    assert ["{}"] * 8 == [r.text for r in results]
    assert "json_object" == client.structured_mode
    assert "{}" == late.text


def test_logprobs_follow_openais_convention(server):
    """True asks 5 alternatives, an int 0..20 that many, False and None none; others refused."""
    client, _ = make(server)
    for given, sent in ((True, (True, 5)), (0, (True, 0)), (20, (True, 20)), (False, None)):
        client.complete(HELLO, logprobs=given)
        request = server.requests[-1]
        got = (request["logprobs"], request["top_logprobs"]) if "logprobs" in request else None
        assert sent == got, given
    for wrong in ("5", 21, -1, 2.5):
        with pytest.raises(InputError, match="logprobs"):
            client.complete(HELLO, logprobs=wrong)
