"""Posting a chat request: each try bounded in a worker thread, retried, its errors the package's.

:class:`ChatTransport` is what :class:`~corrective_rag.llm.client.OpenAIChatClient` sends a
built payload through (the client decides what to ask; this decides how a try is made, waited
for, given up and retried). A try runs in a worker thread and the caller only waits on it, so an
enclosing call scope (:mod:`corrective_rag.calls.scope`: ``Budget.max_seconds``, Ctrl-C) ends it
within ``_POLL`` seconds whatever the server does; 429, 5xx, timeouts and connection errors are
retried with back-off and jitter, honouring ``Retry-After``; a 3xx is never followed; the body is
read up to ``max_response_bytes``; at most ``max_concurrency`` tries are in flight.
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urljoin

import requests

from corrective_rag.calls import scope
from corrective_rag.calls.body import read_capped
from corrective_rag.calls.settings import Retries, Timeouts, parse_retry_after
from corrective_rag.errors import (
    Cancelled,
    LLMError,
    LLMResponseError,
    LLMTimeoutError,
    LLMTransportError,
)
from corrective_rag.llm.exchange import Exchange, finish_stream, stream_chunks
from corrective_rag.llm.failures import is_read_timeout, permanent_hint
from corrective_rag.llm.stream import EVENT_STREAM, collect_events, is_event_stream
from corrective_rag.observe.logs import get_logger
from corrective_rag.text.secrets import redact
from corrective_rag.text.urls import mask_url

__all__ = ["ChatTransport"]

log: Any = get_logger(__name__)

_POLL = 0.05  # seconds between checks of cancellation and deadlines while a request runs


class _Retryable(Exception):
    """Internal: a failure worth another try, with the server's requested wait if any."""

    def __init__(
        self, error: LLMError, retry_after: float | None = None, *, give_up: float | None = None
    ) -> None:
        super().__init__(str(error))
        self.error = error
        self.retry_after = retry_after
        self.give_up = give_up  # when the call's tries must have ended (monotonic), if bounded


def _earliest(*times: float | None) -> float | None:
    known = [t for t in times if t is not None]
    return min(known) if known else None


class ChatTransport:
    """Posts chat payloads to one URL, each try bounded and the tries retried.

    Args:
        url: the full ``.../chat/completions`` URL, credentials and all (shown masked).
        api_key: sent as a bearer token; never logged nor shown in errors.
        secrets: every text to mask in what is shown (the key, the URL's credentials).
        timeouts: connect, per-read and total timeouts of one try.
        retries: retry policy, and the time all the tries of one call share.
        max_concurrency: most tries in flight at once, across threads.
        max_response_bytes: a body longer than this fails with ``LLMResponseError``.
        session: a ``requests.Session`` to use; one is made lazily (and closed here) if None.
        sleep: called with seconds to wait between tries (tests pass a recorder).
        rng: source of jitter.
    """

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None,
        secrets: Sequence[str | None],
        timeouts: Timeouts,
        retries: Retries,
        max_concurrency: int,
        max_response_bytes: int,
        session: requests.Session | None,
        sleep: Callable[[float], None],
        rng: random.Random,
    ) -> None:
        self._url = url
        self.url: str = mask_url(url)
        self._api_key = api_key
        self._secrets = tuple(secrets)
        self.timeouts = timeouts
        self.retries = retries
        self.max_concurrency = max_concurrency
        self.max_response_bytes = max_response_bytes
        self._session = session
        self._owns_session = session is None  # close() closes only a session made here
        self._sleep = sleep
        self._rng = rng
        self._slots = threading.BoundedSemaphore(max_concurrency)
        self._lock = threading.Lock()

    def close(self) -> None:
        """Close the connections of the session made here; a session passed in is the caller's."""
        if not self._owns_session:
            return
        with self._lock:
            session, self._session = self._session, None
        if session is not None:
            session.close()

    def post(self, payload: dict[str, Any]) -> tuple[bytes, float]:
        """The body of the first try that succeeds, and its seconds; retried as ``retries`` says.

        Raises:
            LLMTimeoutError, LLMTransportError: no usable exchange after the retries.
            LLMResponseError: an error status (after retries where retryable) or a body too long.
            Cancelled: the enclosing call scope was cancelled.
        """
        attempt = 0
        give_up: float | None = None  # set when the first try gets its slot
        while True:
            try:
                return self._once(payload, give_up)
            except _Retryable as retry:
                give_up = retry.give_up
                if attempt >= self.retries.max_retries:
                    raise retry.error from None
                wait = self.retries.delay(attempt, self._rng.random())
                if retry.retry_after is not None:
                    wait = min(retry.retry_after, self.retries.retry_after_max)
                end = _earliest(give_up, scope.deadline())
                if end is not None and time.monotonic() + wait >= end:
                    raise retry.error from None  # no time left for another try
                log.warning(
                    "llm_retry",
                    url=self.url,
                    attempt=attempt + 1,
                    wait_seconds=round(wait, 3),
                    error=str(retry.error),
                )
                attempt += 1
                self._pause(wait)

    def _pause(self, seconds: float) -> None:
        """Wait between tries; a cancelled scope ends the wait at once."""
        if self._sleep is not time.sleep:
            self._sleep(seconds)  # an injected sleep (tests) is called as given
            scope.raise_if_cancelled()
            return
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            scope.raise_if_cancelled()
            time.sleep(min(_POLL, left))
        scope.raise_if_cancelled()

    def _headers(self, streaming: bool) -> dict[str, str]:
        accept = f"application/json, {EVENT_STREAM}" if streaming else "application/json"
        headers = {"Content-Type": "application/json", "Accept": accept}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def redact(self, text: str) -> str:
        """``text`` with the key and the URL's credentials masked."""
        return redact(text, self._secrets)

    def _session_or_new(self) -> requests.Session:
        with self._lock:
            if self._session is None:
                self._session = requests.Session()
            return self._session

    def _once(self, payload: dict[str, Any], give_up: float | None) -> tuple[bytes, float]:
        """One try: the exchange runs in a worker thread; this thread waits, bounded.

        The waiting thread never sits in a socket read, so a cancelled scope or a passed deadline
        ends the call within ``_POLL`` seconds whatever the server does.
        """
        session = self._session_or_new()
        self._acquire_slot()  # released by the worker when its exchange ends
        started = time.monotonic()
        if give_up is None and self.retries.give_up_after is not None:
            give_up = started + self.retries.give_up_after
        run_end = scope.deadline()
        end = min(_earliest(give_up, run_end) or math.inf, started + self.timeouts.total)
        exchange = Exchange()
        worker = threading.Thread(
            target=self._exchange,
            args=(exchange, session, payload, end),
            name="crag-llm-request",
            daemon=True,  # an abandoned exchange must never keep the process alive
        )
        try:
            worker.start()
        except BaseException:
            self._slots.release()
            raise
        why = self._await(exchange, end)
        if why is None and exchange.error is not None and time.monotonic() >= end:
            # The socket's timeouts are capped at `end`: a read that timed out then ended with
            # the deadline, and under load it can wake before this thread notices; say why.
            why = "deadline"
        if why is not None:
            exchange.abandon()
            if why == "cancelled":
                raise Cancelled(f"{self.url}: call cancelled")
            if run_end is not None and run_end <= end:
                what = "the run's deadline (Budget.max_seconds) passed"
            elif give_up is not None and give_up <= end:
                what = f"no complete answer within {self.retries.give_up_after:g} s, tries included"
            else:
                what = f"no complete answer within {self.timeouts.total:g} s"
            raise _Retryable(LLMTimeoutError(f"{self.url} timed out: {what}"), give_up=give_up)
        if exchange.error is not None:
            raise self._failure(exchange.error, give_up)
        response, body = exchange.response, exchange.body
        assert response is not None  # set with body when error is None
        latency = time.monotonic() - started
        status = response.status_code
        if 300 <= status < 400:
            raise self._redirect(response)
        if status != 200:
            text = mask_url(self.redact(body.decode("utf-8", "replace")))
            message = f"{self.url} answered an error"
            hint = permanent_hint(status, text)
            if hint:
                message += f" ({hint}; not retried)"
            error = LLMResponseError(message, status=status, body=text)
            log.info("llm_error_status", url=self.url, status=status)
            if status == 429 or status >= 500:
                retry_after = parse_retry_after(response.headers.get("Retry-After"))
                raise _Retryable(error, retry_after, give_up=give_up)
            raise error
        return body, latency

    def _acquire_slot(self) -> None:
        """Wait for a concurrency slot; a cancelled scope or the run's deadline stops the wait."""
        while not self._slots.acquire(timeout=_POLL):
            scope.raise_if_cancelled()
            end = scope.deadline()
            if end is not None and time.monotonic() >= end:
                raise LLMTimeoutError(
                    f"{self.url}: the run's deadline (Budget.max_seconds) passed while waiting "
                    f"for one of {self.max_concurrency} request slots"
                )
        if scope.cancelled():
            self._slots.release()
            scope.raise_if_cancelled()

    def _await(self, exchange: Exchange, end: float) -> str | None:
        """Wait for the worker; ``"cancelled"`` or ``"deadline"`` when the wait was cut short."""
        while not exchange.done.wait(max(0.0, min(_POLL, end - time.monotonic()))):
            if scope.cancelled():
                return "cancelled"
            if time.monotonic() >= end:
                return "deadline"
        return None

    def _exchange(
        self, exchange: Exchange, session: requests.Session, payload: dict[str, Any], end: float
    ) -> None:
        """The worker: post, read the capped body, record the outcome; always frees the slot."""
        try:
            left = max(0.001, end - time.monotonic())
            timeout = (min(self.timeouts.connect, left), min(self.timeouts.read, left))
            response = session.post(
                self._url,
                json=payload,
                headers=self._headers(bool(payload.get("stream"))),
                timeout=timeout,
                stream=True,
                allow_redirects=False,  # the prompt and the key go to base_url and nowhere else
            )
            exchange.attach(response)
            try:
                if response.status_code == 200 and is_event_stream(
                    response.headers.get("Content-Type")
                ):
                    chunks = stream_chunks(response)  # decoded in bounded steps
                    exchange.body = collect_events(chunks, self.max_response_bytes)
                    finish_stream(response, chunks, end)  # keeps the connection for the next call
                else:  # not streamed (an error, or a server that ignores stream): one body
                    exchange.body = read_capped(
                        response,
                        self.max_response_bytes,
                        lambda m: LLMResponseError(f"response {m}", status=response.status_code),
                    )
            finally:
                response.close()
            exchange.response = response
        except BaseException as exc:  # handed to the waiting thread, which decides
            exchange.error = exc
        finally:
            self._slots.release()
            exchange.done.set()

    def _failure(self, exc: BaseException, give_up: float | None) -> Exception:
        """Map an exception from the worker to what ``_once`` raises."""
        if isinstance(exc, LLMTransportError):  # a stream that ended mid-reply, however cut
            return _Retryable(exc, give_up=give_up)
        if isinstance(exc, LLMError):
            return exc  # the size cap
        if isinstance(exc, requests.Timeout):
            return _Retryable(LLMTimeoutError(self._describe("timed out", exc)), give_up=give_up)
        if isinstance(exc, requests.ConnectionError | requests.exceptions.ChunkedEncodingError):
            error: LLMError = LLMTransportError(self._describe("connection failed", exc))
            if is_read_timeout(exc):
                error = LLMTimeoutError(self._describe("timed out", exc))
            return _Retryable(error, give_up=give_up)
        if isinstance(exc, requests.RequestException):
            return LLMTransportError(self._describe("request failed", exc))
        if isinstance(exc, Exception):
            return exc  # a bug or an injected session's own error: not ours to rename
        return LLMTransportError(self._describe("request failed", exc))

    def _redirect(self, response: requests.Response) -> LLMResponseError:
        """The error for a 3xx: never followed, with the status and the (masked) target."""
        location = response.headers.get("Location")
        target = mask_url(self.redact(urljoin(self._url, location))) if location else "nowhere"
        log.info("llm_error_status", url=self.url, status=response.status_code)
        return LLMResponseError(
            f"{self.url} answered a redirect ({response.status_code}) to {target}, not followed "
            "(the prompt and the key would travel with it): set --llm-url / base_url to where "
            "the API answers",
            status=response.status_code,
        )

    def _describe(self, what: str, exc: BaseException) -> str:
        return mask_url(self.redact(f"{self.url} {what}: {type(exc).__name__}: {exc}"))
