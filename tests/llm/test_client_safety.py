"""The chat client against a server it should not trust: credentials in its URL stay hidden,
redirects are refused, a 401 is not retried, and ``close()`` releases the connections."""

from __future__ import annotations

import base64
import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests
from structlog.testing import capture_logs

from corrective_rag.calls import Retries
from corrective_rag.errors import LLMError, LLMResponseError
from corrective_rag.llm.client import OpenAIChatClient
from corrective_rag.testing import Fault, ScriptedLLMServer

HELLO = [{"role": "user", "content": "hi"}]
PASSWORD = "s3cr3tpw"
BASIC = base64.b64encode(f"user:{PASSWORD}".encode()).decode()
ECHO = '{"error": {"message": "denied {authorization}"}}'


def _with_password(url: str) -> str:
    return url.replace("http://", f"http://user:{PASSWORD}@")


def _chain(exc: BaseException | None) -> Iterator[BaseException]:
    seen: list[BaseException] = []
    while exc is not None and exc not in seen:
        seen.append(exc)
        yield exc
        exc = exc.__cause__ or exc.__context__


def _shown(exc: BaseException) -> str:
    return " ".join(f"{e} {e!r} {getattr(e, 'body', '')}" for e in _chain(exc))


# -- issue 41 item 5: credentials in the URL --------------------------------------------------


def test_a_password_in_the_url_is_sent_but_never_shown(caplog):
    """The password reaches the server (as Basic auth) yet appears in no error, body echo, log
    event, log record, repr, ``base_url`` or ``url``, for error statuses and a dead server."""
    caplog.set_level(logging.DEBUG)
    errors: list[BaseException] = []
    retries = Retries(max_retries=1, backoff_base=0)
    with capture_logs() as events, ScriptedLLMServer() as server:
        chat = OpenAIChatClient(
            _with_password(server.base_url), "m", retries=retries, sleep=lambda s: None
        )
        server.enqueue(Fault.error(500, ECHO), Fault.error(503, ECHO), Fault.error(401, ECHO))
        for _ in range(2):
            with pytest.raises(LLMError) as info:
                chat.complete(HELLO)
            errors.append(info.value)
        url = chat.url
    dead = OpenAIChatClient(_with_password(server.base_url), "m", retries=Retries(max_retries=0))
    with pytest.raises(LLMError) as info:
        dead.complete(HELLO)
    errors.append(info.value)
    assert "Basic ***" in _shown(errors[1])  # the password was sent, echoed back, and masked
    shown = " ".join(_shown(e) for e in errors)
    shown += repr(chat) + repr(dead) + chat.base_url + url + caplog.text
    shown += json.dumps(events, default=str)
    assert "http://***@127.0.0.1" in shown
    for secret in (PASSWORD, BASIC):
        assert secret not in shown
    assert any(e["event"] == "llm_retry" for e in events)  # the retry path was logged


def test_a_key_in_the_query_string_is_kept_after_the_path_and_masked():
    """``?api_key=`` stays in the request after ``/chat/completions`` and is masked in ``url``
    and ``base_url``."""
    chat = OpenAIChatClient("http://h:1/v1?api_key=K123456789&api-version=2", "m")
    assert "http://h:1/v1/chat/completions?api_key=***&api-version=2" == chat.url
    assert "http://h:1/v1?api_key=***&api-version=2" == chat.base_url


def test_a_password_in_the_url_and_an_api_key_are_refused_together():
    """``user:pw@`` and an API key would both need the Authorization header (requests sends the
    Basic one and the key never reaches the server): one ConfigError, showing neither."""
    from corrective_rag.errors import ConfigError

    key = "sk-test-0123456789abcdef"
    with pytest.raises(ConfigError, match="user:password@ and an api_key") as info:
        OpenAIChatClient(f"http://user:{PASSWORD}@127.0.0.1:9/v1", "m", api_key=key)
    assert PASSWORD not in str(info.value) and key not in str(info.value)
    OpenAIChatClient("http://127.0.0.1:9/v1", "m", api_key=key)  # each alone is fine
    OpenAIChatClient(f"http://user:{PASSWORD}@127.0.0.1:9/v1", "m")


# -- issue 41 item 6: redirects ---------------------------------------------------------------


class _Redirector:
    """A server on 127.0.0.1 answering every POST with ``status`` and ``Location: target``
    (``None``: itself), counting the requests."""

    def __init__(self, status: int = 307, target: str | None = None) -> None:
        owner = self
        self.hits = 0
        self.lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                return

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with owner.lock:
                    owner.hits += 1
                self.send_response(status)
                self.send_header("Location", target or f"{owner.base_url}/chat/completions")
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> _Redirector:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_a_redirect_is_refused_and_the_prompt_never_reaches_its_target(status):
    """A 3xx pointing at another server is an LLMResponseError naming the status and the
    masked target; the target gets no request, and the redirect is not retried."""
    with ScriptedLLMServer() as target:
        where = _with_password(target.base_url) + "/chat/completions?token=T0123456789"
        with _Redirector(status, where) as redirector:
            chat = OpenAIChatClient(redirector.base_url, "m", retries=Retries(max_retries=3))
            with pytest.raises(LLMResponseError) as info:
                chat.complete(HELLO)
        assert 0 == target.request_count
    assert 1 == redirector.hits
    assert status == info.value.status
    message = str(info.value)
    assert f"redirect ({status})" in message and "not followed" in message
    assert f"{target.base_url.replace('http://', 'http://***@')}/chat/completions" in message
    assert PASSWORD not in message and "T0123456789" not in message


def test_a_redirect_loop_costs_one_request():
    """A server redirecting to itself costs exactly one request per call, not 31."""
    with _Redirector(308) as loop:
        chat = OpenAIChatClient(loop.base_url, "m", retries=Retries(max_retries=3))
        with pytest.raises(LLMResponseError):
            chat.complete(HELLO)
    assert 1 == loop.hits


# -- issue 40 item 5: no retry of 401/403; close() ---------------------------------------------


@pytest.mark.parametrize("status", [401, 403])
def test_a_401_or_403_is_sent_once(status):
    """A key the server refuses is one request, whatever the retry budget."""
    with ScriptedLLMServer(faults=lambda request, n: Fault.error(status, ECHO)) as server:
        chat = OpenAIChatClient(server.base_url, "m", retries=Retries(max_retries=5))
        with pytest.raises(LLMResponseError) as info:
            chat.complete(HELLO)
        assert 1 == server.request_count
    assert "not retried" in str(info.value)


def test_close_and_with_release_the_connection_the_client_made():
    """Leaving ``with`` closes the client's own session: the next call opens a new connection,
    where without close the pooled one is reused."""
    with ScriptedLLMServer() as server:
        with OpenAIChatClient(server.base_url, "m") as chat:
            chat.complete(HELLO)
            chat.complete(HELLO)
            assert 1 == server.connections  # reused while open
        chat.complete(HELLO)
        assert 2 == server.connections
        chat.close()
        chat.close()  # twice is harmless


def test_close_leaves_a_session_passed_in_open():
    """A session the caller passed is the caller's: close() does not close it."""
    session = requests.Session()
    with ScriptedLLMServer() as server:
        chat = OpenAIChatClient(server.base_url, "m", session=session)
        chat.complete(HELLO)
        chat.close()
        chat.complete(HELLO)
        assert 1 == server.connections
    session.close()
