"""HTTP for the web-search retrievers: settings, one JSON call with retries, a polite User-Agent.

The same discipline as the chat client (:mod:`corrective_rag.llm.client`), reusing its
:class:`~corrective_rag.calls.settings.Timeouts` and
:class:`~corrective_rag.calls.settings.Retries`:

- every request has a connect and a read timeout, and one search (all its tries and waits
  together, each body read included) has a total ``deadline``, cut short by the enclosing call
  scope (the run's ``Budget.max_seconds``) and cancelled with it (Ctrl-C);
- redirects are never followed: a key would travel with them (requests drops ``Authorization``
  on a cross-host redirect, not ``X-Subscription-Token``);
- a server that asked to wait longer than was waited (``429 Retry-After: 3600``) is not asked
  again before that time, ten minutes at most (``MAX_QUIET``; a wait that is not a finite
  number is ignored): :class:`~corrective_rag.errors.SearchSkippedError`;
- HTTP 429 and 5xx, timeouts and connection errors are retried with exponential back-off and
  jitter, honouring ``Retry-After`` (or, where a server sends none, the ``X-RateLimit-Reset`` of
  its exhausted window, as Brave does); a wait that would pass the deadline is not waited for;
- a body larger than ``max_response_bytes`` is never held in memory;
- secrets (API keys) never appear in an error message, a log line or a repr.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit

import requests

from corrective_rag._version import __version__
from corrective_rag.calls import scope
from corrective_rag.calls.body import read_capped
from corrective_rag.calls.settings import MAX_QUIET, Retries, Timeouts, finite, parse_retry_after
from corrective_rag.errors import ConfigError, SearchError, SearchSkippedError
from corrective_rag.inputs import check_int
from corrective_rag.observe.logs import get_logger
from corrective_rag.text.urls import mask_url
from corrective_rag.web.transfer import Transfer, TransferTimeout, bounded, end_of

# WebSettings: its home is corrective_rag.web
__all__ = ["USER_AGENT", "JsonCaller", "check_base_url", "check_key", "rate_limit_wait"]

log: Any = get_logger(__name__)

USER_AGENT = f"corrective_rag/{__version__} (corrective RAG web fallback; python-requests)"


@dataclass(frozen=True, slots=True)
class WebSettings:
    """Timeouts, retries, a total deadline and a size cap for one web search.

    Search APIs answer in about a second; 20 s of read timeout covers a slow SearxNG instance
    waiting on its own engines, and a 30 s deadline bounds what one fallback step can add to an
    iteration, retries and ``Retry-After`` waits included.
    """

    timeouts: Timeouts = field(default_factory=lambda: Timeouts(connect=5.0, read=20.0))
    retries: Retries = field(
        default_factory=lambda: Retries(max_retries=2, backoff_max=8.0, retry_after_max=30.0)
    )
    deadline: float = 30.0
    max_response_bytes: int = 4_000_000

    def __post_init__(self) -> None:
        if not isinstance(self.timeouts, Timeouts):
            raise ConfigError(f"timeouts must be a Timeouts, got {self.timeouts!r}")
        if not isinstance(self.retries, Retries):
            raise ConfigError(f"retries must be a Retries, got {self.retries!r}")
        if not finite(self.deadline) or self.deadline <= 0:
            raise ConfigError(
                f"deadline must be a positive number of seconds, got {self.deadline!r}"
            )
        check_int(self.max_response_bytes, "max_response_bytes", minimum=1024)


def check_base_url(url: object, what: str = "base_url") -> str:
    """``url`` without a trailing slash if it is an http(s) URL with a host, else ConfigError."""
    if not isinstance(url, str) or not url.strip():
        raise ConfigError(f"{what} must be an http(s) URL, got {url!r}")
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{what} must be an http(s) URL with a host, got {url!r}")
    return url.strip().rstrip("/")


def check_key(key: object, name: str) -> str:
    """``key`` if it can travel in a header; the message never shows the key itself."""
    if not isinstance(key, str) or not key:
        raise ConfigError(f"{name} must be a non-empty string")
    if not all(33 <= ord(c) <= 126 for c in key):
        raise ConfigError(
            f"{name} holds whitespace, control or non-ASCII characters (a stray newline from a "
            "file or an environment variable?); it cannot be sent in a header"
        )
    return key


def rate_limit_wait(headers: Mapping[str, str]) -> float | None:
    """Seconds a 429/503 asks to wait: ``Retry-After``, else the reset of an exhausted window.

    Brave sends no ``Retry-After`` but ``X-RateLimit-Remaining: 0, 1500`` and
    ``X-RateLimit-Reset: 1, 1419704`` (per-second and per-month windows): the wait is the longest
    reset among the windows with nothing remaining, so an exhausted monthly quota is seen as such.
    """
    wait = parse_retry_after(headers.get("Retry-After"))
    if wait is not None:
        return wait
    remaining = _numbers(headers.get("X-RateLimit-Remaining"))
    reset = _numbers(headers.get("X-RateLimit-Reset"))
    if not remaining or len(remaining) != len(reset):
        return None
    exhausted = [r for left, r in zip(remaining, reset, strict=True) if left <= 0]
    return max(exhausted) if exhausted else None


def _numbers(value: str | None) -> list[float]:
    """The comma-separated numbers of a header; none at all if one is not a finite number."""
    try:
        numbers = [float(part) for part in (value or "").split(",") if part.strip()]
    except ValueError:
        return []
    return numbers if all(finite(n) for n in numbers) else []


class _Retry(Exception):
    """Internal: a failure worth another try, with the server's requested wait if any."""

    def __init__(self, error: SearchError, wait: float | None = None) -> None:
        super().__init__(str(error))
        self.error = error
        self.wait = wait


class JsonCaller:
    """Makes one JSON API call with timeouts, retries and a deadline; redacts ``secrets``.

    Args:
        name: what the messages call the service (``"searxng"``, ``"tavily"``, ...).
        settings: timeouts, retries, deadline and size cap.
        secrets: strings to replace by ``***`` wherever they might show (API keys).
        session: a ``requests.Session`` (adapters, proxies); one is made lazily if None.
        sleep: called with seconds to wait between tries (tests pass a recorder); by default a
            wait that a cancelled call scope ends at once.
        rng: source of jitter.
    """

    def __init__(
        self,
        name: str,
        settings: WebSettings,
        *,
        secrets: Collection[str] = (),
        session: requests.Session | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.name = name
        self.settings = settings
        self._secrets = tuple(sorted((s for s in secrets if s), key=len, reverse=True))
        self._session = session
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._lock = threading.Lock()
        self._quiet_until = 0.0  # time.monotonic() before which the server asked not to be asked

    def __repr__(self) -> str:
        return f"JsonCaller(name={self.name!r}, secrets={'***' if self._secrets else None})"

    def redact(self, text: str) -> str:
        """``text`` with every secret replaced by ``***``."""
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def call(
        self,
        method: str,
        url: str,
        *,
        params: Mapping[str, Any] | None = None,
        payload: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        """The decoded JSON body of a 200 answer to ``method url``.

        Raises:
            SearchError: an error status (after retries where retryable), a redirect, a body that
                is not JSON, or no usable exchange before the deadline.
            SearchSkippedError: the server asked to wait and that time has not passed; nothing
                is sent.
            Cancelled: the enclosing call scope was cancelled.
        """
        settings = self.settings
        where = mask_url(url)
        with self._lock:
            quiet = self._quiet_until - time.monotonic()
        if quiet > 0:
            raise SearchSkippedError(
                f"{self.name}: {where} asked not to be asked before {quiet:.0f} s from now",
                retry_after=quiet,
            )
        deadline, run_deadline = end_of(settings.deadline)
        request = {
            "method": method,
            "url": url,
            "params": dict(params) if params else None,
            "json": dict(payload) if payload is not None else None,
            "headers": {"Accept": "application/json", "User-Agent": USER_AGENT, **(headers or {})},
        }
        attempt = 0
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._late(where, run_deadline)
            try:
                return self._once(request, where, deadline)
            except TransferTimeout:
                raise self._late(where, run_deadline) from None
            except _Retry as retry:
                wait = retry.wait
                if wait is not None:
                    self._stay_quiet(wait)
                if wait is None:
                    wait = settings.retries.delay(attempt, self._rng.random())
                elif wait > settings.retries.retry_after_max:
                    raise SearchError(
                        f"{retry.error} (the server asks to wait {wait:.0f} s, more than "
                        f"retry_after_max={settings.retries.retry_after_max:g} s)",
                        status=retry.error.status,
                    ) from None
                if attempt >= settings.retries.max_retries:
                    raise retry.error from None
                if time.monotonic() + wait >= deadline:
                    raise SearchError(
                        f"{retry.error} (a retry in {wait:.1f} s would pass the "
                        f"{settings.deadline:g} s deadline)",
                        status=retry.error.status,
                    ) from None
                log.warning(
                    "web_search_retry",
                    service=self.name,
                    url=where,
                    attempt=attempt + 1,
                    wait_seconds=round(wait, 3),
                    error=str(retry.error),
                )
                attempt += 1
                self._pause(wait)

    def _late(self, where: str, run_deadline: bool) -> SearchError:
        if run_deadline:
            return SearchError(
                f"{self.name}: no answer from {where} before the run's deadline "
                "(Budget.max_seconds) passed"
            )
        return SearchError(
            f"{self.name}: no complete answer from {where} within the "
            f"{self.settings.deadline:g} s deadline"
        )

    def _stay_quiet(self, wait: float) -> None:
        """Remember that the server asked not to be asked for ``wait`` s (``MAX_QUIET`` at most)."""
        if not finite(wait) or wait <= 0:
            return
        with self._lock:
            until = time.monotonic() + min(wait, MAX_QUIET)
            self._quiet_until = max(self._quiet_until, until)

    def _pause(self, seconds: float) -> None:
        """Wait between tries; a cancelled call scope ends the wait at once."""
        if self._sleep is not time.sleep:
            self._sleep(seconds)  # an injected sleep (tests) is called as given
        else:
            end = time.monotonic() + seconds
            while (left := end - time.monotonic()) > 0:
                scope.raise_if_cancelled()
                time.sleep(min(0.05, left))
        scope.raise_if_cancelled()
        with self._lock:  # the wait asked for is over: the server may be asked again
            self._quiet_until = min(self._quiet_until, time.monotonic())

    def _session_or_new(self) -> requests.Session:
        with self._lock:
            if self._session is None:
                self._session = requests.Session()
            return self._session

    def _once(self, request: dict[str, Any], where: str, end: float) -> Any:
        timeouts = self.settings.timeouts
        session = self._session_or_new()

        def exchange(transfer: Transfer[tuple[requests.Response, bytes]]) -> Any:
            left = max(0.001, end - time.monotonic())
            response = session.request(
                **request,
                timeout=(min(timeouts.connect, left), min(timeouts.read, left)),
                stream=True,
                allow_redirects=False,  # a key must never travel to where a redirect points
            )
            transfer.attach(response)
            try:
                if response.is_redirect:
                    return response, b""
                return response, read_capped(
                    response,
                    self.settings.max_response_bytes,
                    lambda message: SearchError(f"{self.name}: {message}"),
                )
            finally:
                response.close()

        try:
            response, body = bounded(exchange, end, f"{self.name}: {where}")
        except requests.Timeout as exc:
            raise _Retry(SearchError(self._describe(where, "timed out", exc))) from None
        except (requests.ConnectionError, requests.exceptions.ChunkedEncodingError) as exc:
            raise _Retry(SearchError(self._describe(where, "connection failed", exc))) from None
        except requests.RequestException as exc:
            raise SearchError(self._describe(where, "request failed", exc)) from None
        status = response.status_code
        if response.is_redirect:
            target = mask_url(urljoin(response.url, response.headers.get("Location", "")))
            raise SearchError(
                self.redact(
                    f"{self.name}: {where} answered a redirect to {target}, not followed (API "
                    "calls never follow redirects: the key would travel with them); set the "
                    "base URL to where the API answers"
                ),
                status=status,
            )
        text = self.redact(body.decode("utf-8", "replace"))
        if status != 200:
            error = SearchError(f"{self.name}: {where} answered an error", status=status, body=text)
            log.info("web_search_error_status", service=self.name, url=where, status=status)
            if status == 429 or status >= 500:
                raise _Retry(error, rate_limit_wait(response.headers))
            raise error
        try:
            return json.loads(body)
        except (ValueError, RecursionError):
            raise SearchError(
                f"{self.name}: {where} answered with a body that is not JSON", body=text
            ) from None

    def _describe(self, where: str, what: str, exc: Exception) -> str:
        return self.redact(f"{self.name}: {where} {what}: {type(exc).__name__}: {exc}")
