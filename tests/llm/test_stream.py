"""Streamed replies: SSE reading, the non-streaming fallback, and hanging up on deadline or cancel.

No assertion here is on time: a test waits on the server's own count of requests and disconnects.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from corrective_rag.calls import Retries, Timeouts, call_settings
from corrective_rag.calls.scope import call_scope
from corrective_rag.errors import Cancelled, LLMResponseError, LLMTimeoutError, LLMTransportError
from corrective_rag.evaluate.llm import LLMEvaluator
from corrective_rag.generate.llm import LLMGenerator
from corrective_rag.llm.client import OpenAIChatClient
from corrective_rag.llm.stream import collect_events, is_event_stream
from corrective_rag.rewrite.llm import LLMRewriter
from corrective_rag.testing import Fault, ScriptedLLMServer
from corrective_rag.types import Document, RewriteRequest

HELLO = [{"role": "user", "content": "say hello"}]


def _events(*events: object) -> list[bytes]:
    text = "".join(f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n" for e in events)
    raw = text.encode()
    return [raw[i : i + 7] for i in range(0, len(raw), 7)]  # split mid-line, as a socket may


def _delta(text: str, finish: str | None = None) -> dict:
    return {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish}]}


def test_collect_events_joins_deltas_and_keeps_finish_and_usage():
    """Deltas are joined, and the finish reason, model and last chunk's usage are kept."""
    usage = {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
    chunks = _events(
        {"model": "m", **_delta("Hel")},
        _delta("lo", "length"),
        {"choices": [], "usage": usage},
        "[DONE]",
    )
    body = json.loads(collect_events([b": keep-alive\n", *chunks], limit=10_000))
    choice = body["choices"][0]
    assert ("Hello", "length", "m", usage) == (
        choice["message"]["content"],
        choice["finish_reason"],
        body["model"],
        body["usage"],
    )
    assert is_event_stream("text/event-stream; charset=utf-8")
    assert not is_event_stream("application/json")


def test_collect_events_bounds_size_and_refuses_a_cut_stream():
    """A stream past the byte cap, an error event and a stream cut before its end all fail."""
    with pytest.raises(LLMResponseError, match="byte limit"):
        collect_events(_events(_delta("x" * 5000)), limit=1024)
    with pytest.raises(LLMResponseError, match="error"):
        collect_events(_events({"error": {"message": "overloaded"}}), limit=10_000)
    with pytest.raises(LLMTransportError, match="ended before"):
        collect_events(_events(_delta("half a rep")), limit=10_000)


def test_client_streams_and_reads_usage_from_the_last_chunk():
    """The client asks for a stream with usage, and reads the streamed reply and its usage."""
    with ScriptedLLMServer(reply=lambda request: "a reply longer than one streamed piece") as srv:
        reply = OpenAIChatClient(srv.base_url, "scripted").complete(HELLO)
        sent = srv.requests[0]
    assert (True, {"include_usage": True}) == (sent["stream"], sent["stream_options"])
    assert "a reply longer than one streamed piece" == reply.text
    assert ("stop", 7) == (reply.finish_reason, reply.usage.completion_tokens)


def test_a_server_ignoring_stream_is_read_as_one_body():
    """A server that answers a stream request with one JSON body is read as before."""
    with ScriptedLLMServer(reply=lambda request: "plain", streaming=False) as srv:
        reply = OpenAIChatClient(srv.base_url, "scripted").complete(HELLO)
        assert True is srv.requests[0]["stream"]
    assert "plain" == reply.text


def test_a_server_refusing_stream_is_asked_again_without_and_remembered():
    """A 400 naming stream makes the client ask again for one body, and keep doing so."""
    with ScriptedLLMServer(reply=lambda request: "plain", reject_stream=True) as srv:
        client = OpenAIChatClient(srv.base_url, "scripted")
        first, second = client.complete(HELLO), client.complete(HELLO)
        assert [True, False, False] == ["stream" in r for r in srv.requests]
    assert ("plain", "plain") == (first.text, second.text)
    assert "json_schema" == client.structured_mode  # not mistaken for a format refusal


def test_stream_false_sends_no_stream_flag():
    """With stream=False the request asks for one body."""
    with ScriptedLLMServer() as srv:
        OpenAIChatClient(srv.base_url, "scripted", stream=False).complete(HELLO)
        assert "stream" not in srv.requests[0]


def test_streamed_calls_reuse_one_connection():
    """Calls one after another go over one connection: the end of each stream is read."""
    with ScriptedLLMServer(reply=lambda request: "a reply longer than one streamed piece") as srv:
        client = OpenAIChatClient(srv.base_url, "scripted")
        texts = [client.complete(HELLO).text for _ in range(5)]
        assert (5, 1) == (srv.request_count, srv.connections)
    assert ["a reply longer than one streamed piece"] * 5 == texts


class _AfterDone(ThreadingHTTPServer):
    """Streams "hi" and `[DONE]`, then holds the body open, sends junk or drips (``after``)."""

    daemon_threads = True

    def __init__(self, after: str) -> None:
        super().__init__(("127.0.0.1", 0), _AfterDoneHandler)
        self.after = after
        self.connections = 0
        self.release = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _AfterDoneHandler(BaseHTTPRequestHandler):
    server: _AfterDone
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        return

    def setup(self) -> None:
        super().setup()
        self.server.connections += 1

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self._chunk(b'data: {"choices": [{"index": 0, "delta": {"content": "hi"}}]}\n\n')
        self._chunk(b"data: [DONE]\n\n")
        self.wfile.flush()
        if self.server.after == "junk":
            for _ in range(40):  # 160 KiB, past what the client reads after a complete reply
                self._chunk(b"x" * 4096)
            self._chunk(b"")
            self.wfile.flush()
        elif self.server.after == "drip":  # a byte at a time, never past any read timeout
            while not self.server.release.wait(0.2):
                try:
                    self._chunk(b":")
                    self.wfile.flush()
                except OSError:
                    break  # the client gave up on the rest: what the test expects
        else:  # "hold": the body never ends
            self.server.release.wait(60)
        self.close_connection = True


@pytest.mark.timeout(120)
@pytest.mark.parametrize("after", ["hold", "junk", "drip"])
def test_a_complete_reply_is_returned_whatever_follows_its_done(after):
    """A body held open or sent on past `[DONE]` gives the reply; its connection is dropped."""
    server = _AfterDone(after)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02})
    thread.start()
    try:
        client = OpenAIChatClient(server.url, "scripted")
        texts = [client.complete(HELLO).text for _ in range(2)]
        assert 2 == server.connections  # the first connection was not reused
    finally:
        server.release.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=30)
    assert ["hi", "hi"] == texts


@pytest.mark.timeout(120)
def test_the_connection_is_closed_when_the_deadline_passes():
    """A call whose stream stalls past its deadline hangs up, and the server sees it."""
    with ScriptedLLMServer(faults=lambda request, n: Fault.stalled_stream()) as srv:
        client = OpenAIChatClient(srv.base_url, "scripted", timeout=0.5)
        with pytest.raises(LLMTimeoutError, match=r"within 0\.5 s"):
            client.complete(HELLO)
        assert srv.wait_for_disconnects(1)
        assert 1 == srv.request_count


@pytest.mark.timeout(120)
def test_the_connection_is_closed_when_the_run_is_cancelled():
    """Cancelling the call scope hangs up a stream in flight, and the server sees it."""
    stop = threading.Event()
    outcome: list[BaseException] = []
    with ScriptedLLMServer(faults=lambda request, n: Fault.stalled_stream()) as srv:
        client = OpenAIChatClient(srv.base_url, "scripted")

        def call() -> None:
            with call_scope(cancel=stop):
                try:
                    client.complete(HELLO)
                except BaseException as exc:
                    outcome.append(exc)

        thread = threading.Thread(target=call)
        thread.start()
        assert srv.wait_for_requests(1)
        stop.set()
        assert srv.wait_for_disconnects(1)
        thread.join(timeout=60)
        assert 1 == srv.disconnects  # exactly the one stream
    assert [Cancelled] == [type(e) for e in outcome]


def test_raised_timeouts_are_not_capped_by_the_retries_default():
    """Timeouts raised to 1200 s give each call 1200 s, tries included (it was 60 s)."""
    client = OpenAIChatClient("http://127.0.0.1:1/v1", "m", timeouts=Timeouts(read=900, total=1200))
    assert 1200 == client.retries.give_up_after
    assert (Timeouts(read=300, total=300), Retries(give_up_after=300)) == call_settings(
        300, local=True
    )


@pytest.mark.timeout(120)
def test_one_setting_bounds_grading_rewriting_and_answering():
    """The client's one timeout ends the grading, rewriting and answering calls alike."""
    doc = Document("d0", "Volcanoes form over magma chambers.")
    with ScriptedLLMServer(faults=lambda request, n: Fault.stalled_stream()) as srv:
        chat = OpenAIChatClient(srv.base_url, "scripted", timeout=0.4)
        verdict = LLMEvaluator(chat).evaluate("How do volcanoes form?", [doc]).verdicts[0]
        rewrite = LLMRewriter(chat).rewrite(RewriteRequest("How do volcanoes form?", (), ()))
        with pytest.raises(LLMTimeoutError, match=r"within 0\.4 s") as answered:
            LLMGenerator(chat).generate("How do volcanoes form?", [doc])
        assert srv.wait_for_disconnects(3)
    assert "within 0.4 s" in verdict.error
    assert "within 0.4 s" in (rewrite.rejected or "")
    assert "tries included" in str(answered.value)
