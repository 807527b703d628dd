"""A fake web-search server on 127.0.0.1 answering with the real APIs' documented JSON shapes.

One server speaks all three APIs (SearxNG ``GET /search?format=json``, Tavily ``POST /search``,
Brave ``GET /res/v1/web/search``) over the same scripted results, serves HTML pages under
``/pages/``, and replays queued faults (an error status with the provider's error body and
headers) before answering normally. It records every request and the most page requests it
ever had in flight at once. A page may answer with a redirect (:meth:`FakeSearchServer.redirect`),
and any path may drip its body one byte at a time (``server.drip``) until the server stops.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

TAVILY_KEY = "tvly-test-SECRET-0123456789"
BRAVE_KEY = "BSA-test-SECRET-9876543210"


@dataclass
class Reply:
    """A scripted answer: status, headers, body."""

    status: int
    body: str
    headers: dict[str, str] = field(default_factory=dict)


def tavily_error(status: int, message: str) -> Reply:
    """Tavily's documented error body."""
    return Reply(status, json.dumps({"detail": {"error": message}}))


def brave_error(
    status: int, code: str, detail: str, headers: dict[str, str] | None = None
) -> Reply:
    """Brave's documented ErrorResponse body."""
    body = {
        "type": "ErrorResponse",
        "error": {"id": "0b3c", "status": status, "code": code, "detail": detail, "meta": {}},
        "time": 1700000000,
    }
    return Reply(status, json.dumps(body), headers or {})


class FakeSearchServer:
    """Start with ``with FakeSearchServer(results) as server: ...``; ``server.base_url``."""

    def __init__(self, results: list[dict[str, str]] | None = None) -> None:
        self.results = list(results or [])
        self.pages: dict[str, tuple[str, bytes]] = {}  # path -> (content type, body)
        self.faults: deque[Reply] = deque()
        self.requests: list[dict[str, Any]] = []
        self.page_gate: threading.Event | None = None  # set: pages are answered
        self.page_waiting = threading.Semaphore(0)  # released once per page request arriving
        self.in_flight = 0
        self.max_in_flight = 0
        self.redirects: dict[str, str] = {}  # page path -> Location
        self.drip: set[str] = set()  # paths answered one byte per drip_interval, never finished
        self.drip_interval = 0.5  # below every read timeout: only a total deadline ends it
        self.dripping = threading.Semaphore(0)  # released once per dripping answer started
        self.stopped = threading.Event()  # set on exit: dripping answers end
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._server.owner = self  # type: ignore[attr-defined]
        # A short poll keeps shutdown quick; it is not a synchronisation point.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def page(self, name: str, body: str | bytes, content_type: str = "text/html") -> str:
        """Serve ``body`` at ``/pages/name``; return its URL."""
        data = body.encode("utf-8") if isinstance(body, str) else body
        self.pages[f"/pages/{name}"] = (content_type, data)
        return f"{self.base_url}/pages/{name}"

    def redirect(self, name: str, location: str, status: int = 302) -> str:
        """Answer ``/pages/name`` with ``status`` and ``Location: location``; return its URL."""
        self.redirects[f"/pages/{name}"] = location
        self.pages[f"/pages/{name}"] = (f"redirect {status}", b"")
        return f"{self.base_url}/pages/{name}"

    def __enter__(self) -> FakeSearchServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        if self.page_gate is not None:
            self.page_gate.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def searxng(self) -> dict[str, Any]:
        return {
            "query": "q",
            "number_of_results": 0,
            "results": [
                {
                    "url": r["url"],
                    "title": r["title"],
                    "content": r["content"],
                    "engine": "duckduckgo",
                    "engines": ["duckduckgo", "wikipedia"],
                    "parsed_url": ["https", "example.org", "/", "", "", ""],
                    "template": "default.html",
                    "positions": [i + 1],
                    "score": 2.0 / (i + 1),
                    "category": "general",
                }
                for i, r in enumerate(self.results)
            ],
            "answers": [],
            "corrections": [],
            "infoboxes": [],
            "suggestions": ["related query"],
            "unresponsive_engines": [["brave", "timeout"]],
        }

    def tavily(self, max_results: int) -> dict[str, Any]:
        return {
            "query": "q",
            "follow_up_questions": None,
            "answer": None,
            "images": [],
            "results": [
                {
                    "title": r["title"],
                    "url": r["url"],
                    "content": r["content"],
                    "score": 0.9 - i / 100,
                    "raw_content": None,
                }
                for i, r in enumerate(self.results[:max_results])
            ],
            "response_time": 1.09,
        }

    def brave(self, count: int) -> dict[str, Any]:
        return {
            "type": "search",
            "query": {"original": "q", "more_results_available": True},
            "mixed": {"type": "mixed", "main": [{"type": "web", "index": 0, "all": False}]},
            "web": {
                "type": "search",
                "family_friendly": True,
                "results": [
                    {
                        "type": "search_result",
                        "title": r["title"],
                        "url": r["url"],
                        "description": f"<strong>{r['content']}</strong> &amp; more",
                        "is_source_local": False,
                        "language": "en",
                        "profile": {"name": "Example", "url": r["url"]},
                    }
                    for r in self.results[:count]
                ],
            },
        }


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _send(self, reply: Reply, content_type: str = "application/json") -> None:
        body = reply.body.encode("utf-8")
        self.send_response(reply.status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in reply.headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def _record(self, body: Any = None) -> tuple[Any, Reply | None]:
        owner: FakeSearchServer = self.server.owner  # type: ignore[attr-defined]
        parts = urlsplit(self.path)
        with owner._lock:
            owner.requests.append(
                {
                    "method": self.command,
                    "path": parts.path,
                    "query": {k: v[0] for k, v in parse_qs(parts.query).items()},
                    "headers": dict(self.headers.items()),
                    "body": body,
                }
            )
            api = not parts.path.startswith("/pages/")
            fault = owner.faults.popleft() if owner.faults and api else None
        return owner, fault

    def _drip(self, content_type: str) -> None:
        """Headers, then one byte per drip_interval until the server stops: never a whole body."""
        owner: FakeSearchServer = self.server.owner  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", "1000000")
        self.end_headers()
        self.wfile.flush()
        owner.dripping.release()
        try:
            while not owner.stopped.wait(owner.drip_interval):  # the server's pace, not a test's
                self.wfile.write(b" ")
                self.wfile.flush()
        except OSError:
            pass  # the client hung up: what a deadline is for
        self.close_connection = True

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        owner_: FakeSearchServer = self.server.owner  # type: ignore[attr-defined]
        if path in owner_.drip:
            self._record()
            self._drip("text/html" if path.startswith("/pages/") else "application/json")
            return
        if path.startswith("/pages/"):
            self._page(path)
            return
        owner, fault = self._record()
        if fault is not None:
            self._send(fault)
            return
        query = {k: v[0] for k, v in parse_qs(urlsplit(self.path).query).items()}
        if path == "/search":
            if query.get("format") != "json":
                self._send(Reply(403, "<html>Forbidden</html>"), "text/html")
            else:
                self._send(Reply(200, json.dumps(owner.searxng())))
        elif path == "/res/v1/web/search":
            if self.headers.get("X-Subscription-Token") != BRAVE_KEY:
                self._send(
                    brave_error(
                        401,
                        "SUBSCRIPTION_TOKEN_INVALID",
                        "The provided subscription token is invalid.",
                    )
                )
            else:
                self._send(Reply(200, json.dumps(owner.brave(int(query.get("count", 20))))))
        else:
            self._send(Reply(404, '{"error": "not found"}'))

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        owner, fault = self._record(body)
        if urlsplit(self.path).path in owner.drip:
            self._drip("application/json")
            return
        if fault is not None:
            self._send(fault)
            return
        if urlsplit(self.path).path != "/search" or not isinstance(body, dict):
            self._send(tavily_error(400, "bad request"))
        elif self.headers.get("Authorization") != f"Bearer {TAVILY_KEY}":
            self._send(tavily_error(401, "Unauthorized: missing or invalid API key."))
        else:
            self._send(Reply(200, json.dumps(owner.tavily(int(body.get("max_results", 5))))))

    def _page(self, path: str) -> None:
        owner: FakeSearchServer = self.server.owner  # type: ignore[attr-defined]
        self._record()
        with owner._lock:
            owner.in_flight += 1
            owner.max_in_flight = max(owner.max_in_flight, owner.in_flight)
        try:
            owner.page_waiting.release()
            if owner.page_gate is not None:
                owner.page_gate.wait()
            if path not in owner.pages:
                self._send(Reply(404, "<html>missing</html>"), "text/html")
                return
            if path in owner.redirects:
                status = int(owner.pages[path][0].split()[1])
                self._send(Reply(status, "", {"Location": owner.redirects[path]}), "text/html")
                return
            kind, data = owner.pages[path]
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        finally:
            with owner._lock:
                owner.in_flight -= 1
