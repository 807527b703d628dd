"""``HostileLLMServer``: a real server on 127.0.0.1 whose replies attack the client reading them.

The scripted server (:class:`~corrective_rag.testing.server.ScriptedLLMServer`) fails the way
honest servers fail; this one answers the way a server the user does not control may answer, to
prove that a client stays bounded in time, memory, CPU and slots. One mode per server:

- ``"drip"``: a close-delimited event stream (``Connection: close``, neither ``Content-Length``
  nor chunked) that sends ``: keepalive`` every ``interval`` seconds until the client hangs up;
- ``"gzip_bomb"``: a close-delimited event stream under two gzip layers (``Content-Encoding:
  gzip, gzip``) that inflates to ``size`` bytes of keep-alive comments;
- ``"cut_stream"``: a close-delimited event stream that stops mid-reply (no finish reason, no
  ``[DONE]``) by closing the connection;
- ``"rate_limited"``: HTTP 429 with the ``headers`` given (``Retry-After: 1e9``,
  ``X-RateLimit-Reset: inf``, ``nan``, ...);
- ``"expensive_json"``: a well-formed reply whose content is ``{"":`` repeated ``repeat``
  times, cheap to send and costly for a naive lenient JSON search.

After ``times`` hostile answers (``None``: never) requests are answered as the scripted server
answers them, so a test can prove a retry. Everything else (recorded requests, counters, waits
on events, queued faults) is the scripted server's::

    with HostileLLMServer("drip", interval=0.2) as server:
        client = OpenAIChatClient(server.base_url, "hostile", timeout=3)
"""

from __future__ import annotations

import json
import threading
import zlib
from collections.abc import Mapping
from typing import Any, ClassVar

from corrective_rag.testing.faults import Fault
from corrective_rag.testing.server import ScriptedLLMServer, _Handler, _HTTPServer

# HostileLLMServer: its home is corrective_rag.testing
__all__ = ["HOSTILE_MODES", "gzip_bomb"]

HOSTILE_MODES = ("drip", "gzip_bomb", "cut_stream", "rate_limited", "expensive_json")
_KEEPALIVE = b": keepalive\n"
_BLOCK = 1 << 20  # bytes compressed per step when a bomb is made: never a gigabyte in memory


def gzip_bomb(size: int) -> bytes:
    """``size`` bytes of ``: keepalive`` lines (rounded up to a MiB) under two gzip layers."""
    block = _KEEPALIVE * (_BLOCK // len(_KEEPALIVE)) + b"\n" * (_BLOCK % len(_KEEPALIVE))
    inner = zlib.compressobj(9, zlib.DEFLATED, 31)  # wbits 31: a gzip member
    layer = [inner.compress(block) for _ in range(max(1, -(-size // _BLOCK)))]
    layer.append(inner.flush())
    outer = zlib.compressobj(9, zlib.DEFLATED, 31)
    return outer.compress(b"".join(layer)) + outer.flush()


class _HostileHandler(_Handler):
    server: _HostileHTTPServer

    def _answer(
        self, owner: ScriptedLLMServer, request: dict[str, Any], fault: Fault | None
    ) -> None:
        hostile = self.server.hostile
        if fault is not None or not hostile._take_turn():
            super()._answer(owner, request, fault)
            return
        if hostile.mode == "rate_limited":
            body = b'{"error": {"message": "rate limited"}}'
            self._send(429, body, hostile.headers)
            return
        if hostile.mode == "expensive_json":
            text = '{"":' * hostile.repeat
            super()._answer(owner, request, Fault("content", body=text))
            return
        encoded = hostile.mode == "gzip_bomb"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        if encoded:
            self.send_header("Content-Encoding", "gzip, gzip")
        self.end_headers()
        self.close_connection = True  # the end of the body is the end of the connection
        if hostile.mode == "drip":
            self._drip(owner, hostile.interval)
        elif encoded:
            self.wfile.write(hostile.bomb())
        else:  # cut_stream: a reply begun, then the connection closed
            head = {"object": "chat.completion.chunk", "model": owner.model}
            for delta in ({"role": "assistant"}, {"content": '{"relevant": tr'}):
                event = {**head, "choices": [{"index": 0, "delta": delta}]}
                self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
        self.wfile.flush()

    def _drip(self, owner: ScriptedLLMServer, interval: float) -> None:
        """Send a keep-alive every ``interval`` s until the client hangs up (counted) or stop."""
        self.wfile.write(_KEEPALIVE)
        self.wfile.flush()
        self.connection.settimeout(interval)
        while not owner._stopping.is_set():
            try:
                if self.connection.recv(1) == b"":
                    break  # the client shut its side: it gave up on the stream
            except TimeoutError:
                self.wfile.write(_KEEPALIVE)
                self.wfile.flush()
                continue
            except OSError:
                break
        else:
            return
        owner._hung_up()


class _HostileHTTPServer(_HTTPServer):
    hostile: HostileLLMServer


class HostileLLMServer(ScriptedLLMServer):
    """A :class:`ScriptedLLMServer` whose chat answers are hostile in one ``mode``.

    Args:
        mode: one of :data:`HOSTILE_MODES` (see the module docstring).
        times: hostile answers before answering as the scripted server does (None: all).
        interval: seconds between two keep-alives of ``"drip"``.
        size: uncompressed bytes of ``"gzip_bomb"`` (default 1 GiB; about 2 KB on the wire).
        headers: the headers of ``"rate_limited"``'s 429.
        repeat: how many ``{"":`` make ``"expensive_json"``'s content (default 4 MB of it).
        **kwargs: passed to :class:`ScriptedLLMServer` (``latency``, ``model``, ...).

    Attributes:
        hostile_count: how many hostile answers were begun.
    """

    _bombs: ClassVar[dict[int, bytes]] = {}
    _bombs_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(
        self,
        mode: str,
        *,
        times: int | None = None,
        interval: float = 1.0,
        size: int = 1 << 30,
        headers: Mapping[str, str] | None = None,
        repeat: int = 1_000_000,
        **kwargs: Any,
    ) -> None:
        if mode not in HOSTILE_MODES:
            raise ValueError(f"mode must be one of {', '.join(HOSTILE_MODES)}, got {mode!r}")
        super().__init__(**kwargs)
        self.mode = mode
        self.times = times
        self.interval = interval
        self.size = size
        self.headers: dict[str, str] = dict(
            headers or {"Retry-After": "1e9", "X-RateLimit-Reset": "inf"}
        )
        self.repeat = repeat
        self.hostile_count: int = 0

    def bomb(self) -> bytes:
        """The ``"gzip_bomb"`` body, made once per size and process."""
        with self._bombs_lock:
            if self.size not in self._bombs:
                self._bombs[self.size] = gzip_bomb(self.size)
            return self._bombs[self.size]

    def start(self, port: int = 0) -> HostileLLMServer:
        """Bind ``port`` (0: a free one) and serve in a background thread."""
        if self.mode == "gzip_bomb":
            self.bomb()  # made before the first request, not while a client waits on it
        httpd = _HostileHTTPServer(("127.0.0.1", port), _HostileHandler)
        httpd.owner = self
        httpd.hostile = self
        self._httpd = httpd
        self._stopping.clear()
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()
        return self

    def __enter__(self) -> HostileLLMServer:
        return self.start()

    def _take_turn(self) -> bool:
        """Whether this request gets a hostile answer (counted)."""
        with self._lock:
            if self.times is not None and self.hostile_count >= self.times:
                return False
            self.hostile_count += 1
            return True
