"""``ScriptedLLMServer``: a real OpenAI-compatible HTTP server on 127.0.0.1 with scripted replies.

For tests and benchmarks of the LLM path without a model: replies are a deterministic function of
the request (by default :func:`default_reply`, which grades documents by word overlap), every
request can be delayed, and faults (429 with ``Retry-After``, 5xx, hangs, requests held until the
test releases them, bodies dripped one byte at a time or cut short, non-JSON, wrong-shape JSON,
huge bodies, scripted content, replies cut at the token limit, streams that stall until the client
hangs up) are queued for the next requests. A request asking for ``stream: true`` is answered
with server-sent events as OpenAI streams them (unless ``streaming=False``: a server that ignores
it); a client closing a stream's connection is counted (:attr:`ScriptedLLMServer.disconnects`),
so a test can prove that a client gave up for real. Requests are served in parallel, one thread
each, and recorded::

    with ScriptedLLMServer(latency=0.05) as server:
        server.enqueue(Fault.rate_limited(retry_after="1"))
        client = OpenAIChatClient(server.base_url, "scripted")
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from corrective_rag.testing import token_logprobs
from corrective_rag.testing.faults import Fault, FaultChooser
from corrective_rag.testing.replies import default_reply
from corrective_rag.testing.schema_fit import fit_reply

# ScriptedLLMServer: its home is corrective_rag.testing
__all__: list[str] = []

Reply = Callable[[Mapping[str, Any]], str]


_STREAM_PIECE = 16  # characters per streamed delta: many events, as a model streams tokens
_HANGUP_POLL = 0.05  # seconds between checks for the server's stop while awaiting a hang-up


def _words(text: str) -> int:
    return len(text.split())


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; with Nagle's algorithm the body then waits for the
    # client's delayed ACK (~40 ms a reply), which timings of the loop would count as our cost.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        return

    def setup(self) -> None:
        super().setup()
        self.server.owner._connected()

    def _send(self, status: int, body: bytes, headers: Mapping[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        owner = self.server.owner
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            models = {"object": "list", "data": [{"id": owner.model, "object": "model"}]}
            self._send(200, json.dumps(models).encode())
        elif self.path == "/health":
            self._send(200, b'{"status": "ok"}')
        else:
            self._send(404, b'{"error": {"message": "not found"}}')

    def do_POST(self) -> None:
        owner = self.server.owner
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._send(404, b'{"error": {"message": "not found"}}')
            return
        try:
            request = json.loads(raw)
        except ValueError:
            self._send(400, b'{"error": {"message": "request body is not JSON"}}')
            return
        fault = owner._begin(request)
        try:
            self._answer(owner, request, fault)
        except (BrokenPipeError, ConnectionResetError):
            owner._hung_up()  # the client gave up (timeout, size cap): nothing left to do
        finally:
            owner._end()

    def _answer(
        self, owner: ScriptedLLMServer, request: dict[str, Any], fault: Fault | None
    ) -> None:
        if owner.latency:
            owner._stopping.wait(owner.latency)
        kind = fault.kind if fault else None
        if fault and kind == "hang":
            owner._stopping.wait(fault.seconds)
        if fault and kind == "held":
            owner._released.wait()
        if fault and kind == "drip":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "1000000")
            self.end_headers()
            while not owner._stopping.wait(fault.seconds):
                self.wfile.write(b" ")
                self.wfile.flush()
            return
        fmt = (request.get("response_format") or {}).get("type")
        if owner.reject_stream and "stream" in request:
            msg = "stream_options: unknown field, stream is not supported by this server"
            self._send(400, json.dumps({"error": {"message": msg}}).encode())
            return
        if fmt and fmt in owner.reject_formats:
            msg = f"response_format type {fmt} is not supported by this server"
            self._send(400, json.dumps({"error": {"message": msg}}).encode())
            return
        if fault and kind == "status":
            body = fault.body.replace("{authorization}", self.headers.get("Authorization", ""))
            headers = {"Retry-After": fault.retry_after} if fault.retry_after else {}
            self._send(fault.status, body.encode(), headers)
            return
        if fault and kind == "raw":
            self._send(200, fault.body.encode())
            return
        if fault and kind == "close":
            self.send_response(200)
            self.send_header("Content-Length", "5000")
            self.end_headers()
            self.wfile.write(b'{"choices": [{"mess')
            self.wfile.flush()
            self.close_connection = True
            return
        if fault and kind == "huge":
            self.send_response(200)
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            chunk = b" " * 65536
            for _ in range(fault.size // len(chunk) + 1):
                self.wfile.write(chunk)
            return
        if fault and kind == "stall":
            self._start_stream()
            self._event({"choices": [{"index": 0, "delta": {"role": "assistant"}}]})
            self._await_hangup(owner)
            return
        if fault and kind == "content":
            text = fault.body  # a scripted fault is sent as written
        else:
            text = owner.reply(request)
            if owner.obey_schema:  # what a server enforcing the schema could send
                text = fit_reply(text, request)
            text = token_logprobs.lay_out(text, owner.logprobs)
        finish = fault.finish_reason if fault and kind == "content" else "stop"
        usage = self._usage(owner, request, text)
        tokens = token_logprobs.scripted_logprobs(text, owner.logprobs, request)
        if request.get("stream") is True and owner.streaming:
            self._stream(owner, request, text, finish, usage, tokens=tokens)
            return
        completion: dict[str, Any] = {
            "id": f"chatcmpl-{owner.request_count}",
            "object": "chat.completion",
            "model": owner.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": finish,
                }
            ],
        }
        if tokens is not None:
            completion["choices"][0]["logprobs"] = {"content": tokens}
        if usage is not None:
            completion["usage"] = usage
        self._send(200, json.dumps(completion).encode())

    @staticmethod
    def _usage(
        owner: ScriptedLLMServer, request: Mapping[str, Any], text: str
    ) -> dict[str, int] | None:
        if not owner.usage:
            return None
        count = owner.count_tokens or _words
        prompt = sum(count(str(m.get("content", ""))) for m in request["messages"])
        return {
            "prompt_tokens": prompt,
            "completion_tokens": count(text),
            "total_tokens": prompt + count(text),
        }

    # -- server-sent events ------------------------------------------------------------------

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _event(self, event: Mapping[str, Any] | str) -> None:
        data = event if isinstance(event, str) else json.dumps(event)
        self._chunk(f"data: {data}\n\n".encode())

    def _stream(
        self,
        owner: ScriptedLLMServer,
        request: Mapping[str, Any],
        text: str,
        finish: str,
        usage: dict[str, int] | None,
        *,
        tokens: list[dict[str, Any]] | None = None,
    ) -> None:
        """Send ``text`` as OpenAI streams it: role, content deltas, finish, usage, [DONE].

        With ``tokens`` (logprobs asked for) one delta per token, carrying its logprobs.
        """
        head = {"id": f"chatcmpl-{owner.request_count}", "object": "chat.completion.chunk"}
        head["model"] = owner.model
        self._start_stream()
        self._event({**head, "choices": [{"index": 0, "delta": {"role": "assistant"}}]})
        if tokens is not None:
            for piece, token in token_logprobs.pieces(tokens):
                choice = {"index": 0, "delta": {"content": piece}}
                choice["logprobs"] = {"content": [token]}
                self._event({**head, "choices": [choice]})
        for start in range(0, len(text) if tokens is None else 0, _STREAM_PIECE):
            delta = {"content": text[start : start + _STREAM_PIECE]}
            self._event({**head, "choices": [{"index": 0, "delta": delta}]})
        self._event({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        options = request.get("stream_options")
        if usage is not None and isinstance(options, dict) and options.get("include_usage"):
            self._event({**head, "choices": [], "usage": usage})
        # `[DONE]` and the body's last chunk in one write, as servers send them: a client that
        # reads on to the end of the body keeps the connection for its next request.
        self.wfile.write(b"%x\r\ndata: [DONE]\n\n\r\n0\r\n\r\n" % len(b"data: [DONE]\n\n"))
        self.wfile.flush()

    def _await_hangup(self, owner: ScriptedLLMServer) -> None:
        """Block until the client closes the connection (counted) or the server stops."""
        self.connection.settimeout(_HANGUP_POLL)
        while not owner._stopping.is_set():
            try:
                if self.connection.recv(1) == b"":
                    break
            except TimeoutError:
                continue
            except OSError:
                break
        else:
            return
        owner._hung_up()
        self.close_connection = True


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128
    owner: ScriptedLLMServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away between requests is normal; anything else is printed."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class ScriptedLLMServer:
    """An OpenAI-compatible server on 127.0.0.1 (free port) answering with scripted replies.

    Args:
        reply: maps a request body (dict) to the assistant's text; default :func:`default_reply`.
        latency: seconds added before every answer.
        model: model name reported in replies and ``/v1/models``.
        usage: include a ``usage`` block in replies.
        count_tokens: counts a message's tokens for that block (default: its words).
        reject_formats: ``response_format`` types answered with HTTP 400 "not supported".
        streaming: answer ``stream: true`` requests with server-sent events (False: ignore
            ``stream`` and answer with one body, as some servers do).
        reject_stream: answer any request naming ``stream`` with HTTP 400, as a server that
            refuses unknown fields does.
        obey_schema: fit every reply to the JSON schema its request sent
            (:func:`~corrective_rag.testing.schema_fit.fit_to_schema`: keys the schema forbids
            dropped, strings cut to ``maxLength``), as a server enforcing ``json_schema`` does;
            ``False``: send replies as scripted, a server that breaks the schema (robustness
            tests). Scripted ``Fault.content`` bodies are always sent as written.
        logprobs: answer a request asking ``logprobs: true`` with token log probabilities
            (:func:`~corrective_rag.testing.token_logprobs.scripted_logprobs`): ``"agree"``
            puts 0.8 on each ``true``/``false``/``yes``/``no`` the reply wrote, ``"disagree"``
            0.2; a :class:`~corrective_rag.testing.token_logprobs.TokenScript` also sets the
            layout, tokens and alternatives; ``None``: never, as a server that returns none.
        faults: chooses a fault per request from its body and how many identical bodies came
            before (0 the first time, 1 for the first retry, ...), so that faults stay
            deterministic when requests from many threads arrive in any order. Faults queued
            with :meth:`enqueue` come first.

    Attributes:
        requests: every chat request body received, in arrival order.
        request_count: how many chat requests arrived.
        max_in_flight: the most chat requests being served at the same time.
        disconnects: how many times a client closed a connection while its reply was being
            served (a stalled stream it gave up on, or a write that found it gone).
        connections: how many TCP connections clients opened (a client that reuses its
            connections opens one per concurrent request, not one per request).
    """

    def __init__(
        self,
        reply: Reply | None = None,
        *,
        latency: float = 0.0,
        model: str = "scripted",
        usage: bool = True,
        reject_formats: Iterable[str] = (),
        faults: FaultChooser | None = None,
        count_tokens: Callable[[str], int] | None = None,
        streaming: bool = True,
        reject_stream: bool = False,
        obey_schema: bool = True,
        logprobs: str | token_logprobs.TokenScript | None = None,
    ) -> None:
        self.logprobs: token_logprobs.TokenScript | None = token_logprobs.token_script(logprobs)
        self.reply: Reply = reply or default_reply
        self.latency = latency
        self.model = model
        self.usage = usage
        self.count_tokens = count_tokens
        self.reject_formats: frozenset[str] = frozenset(reject_formats)
        self.requests: list[dict[str, Any]] = []
        self.request_count: int = 0
        self.max_in_flight: int = 0
        self.disconnects: int = 0
        self.connections: int = 0
        self.streaming = streaming
        self.reject_stream = reject_stream
        self.obey_schema = obey_schema
        self._in_flight = 0
        self._faults: deque[Fault | None] = deque()
        self._chooser = faults
        self._seen: dict[str, int] = {}
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._stopping = threading.Event()
        self._released = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The port the server listens on (after ``start``)."""
        if self._httpd is None:
            raise RuntimeError("server not started")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``, the URL to give a client."""
        return f"http://127.0.0.1:{self.port}/v1"

    def enqueue(self, *faults: Fault | None) -> None:
        """Apply ``faults`` to the next requests, one each, in order (None: answer normally)."""
        with self._lock:
            self._faults.extend(faults)

    def wait_for_requests(self, count: int, timeout: float = 120.0) -> bool:
        """Block until ``count`` chat requests have arrived (False if ``timeout`` passes first).

        For tests that must act while a request is in flight: a server-side event, not a sleep.
        """
        with self._arrived:
            return self._arrived.wait_for(lambda: self.request_count >= count, timeout)

    def wait_for_disconnects(self, count: int, timeout: float = 120.0) -> bool:
        """Block until clients have closed ``count`` connections mid-reply (False on timeout)."""
        with self._arrived:
            return self._arrived.wait_for(lambda: self.disconnects >= count, timeout)

    def release(self) -> None:
        """Let every request held by :meth:`Fault.held` (now and later) be answered."""
        self._released.set()

    def start(self, port: int = 0) -> ScriptedLLMServer:
        """Bind ``port`` (0: a free one) and serve in a background thread."""
        self._httpd = _HTTPServer(("127.0.0.1", port), _Handler)
        self._httpd.owner = self
        self._stopping.clear()
        # A short poll interval keeps stop() fast (the default waits up to 0.5 s).
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port; hanging and held requests are woken up."""
        self._stopping.set()
        self._released.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _begin(self, request: dict[str, Any]) -> Fault | None:
        with self._lock:
            self.requests.append(request)
            self.request_count += 1
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            self._arrived.notify_all()
            if self._faults:
                return self._faults.popleft()
            if self._chooser is None:
                return None
            body = hashlib.blake2b(json.dumps(request, sort_keys=True).encode()).hexdigest()
            attempt = self._seen.get(body, 0)
            self._seen[body] = attempt + 1
        return self._chooser(request, attempt)

    def _connected(self) -> None:
        with self._lock:
            self.connections += 1

    def _hung_up(self) -> None:
        with self._lock:
            self.disconnects += 1
            self._arrived.notify_all()

    def _end(self) -> None:
        with self._lock:
            self._in_flight -= 1
