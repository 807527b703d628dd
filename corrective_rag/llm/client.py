"""An OpenAI-compatible chat client over ``requests``: retries, structured output, usage, limits.

``OpenAIChatClient.complete`` posts to ``{base_url}/chat/completions`` and returns a
:class:`~corrective_rag.types.ChatReply`. What it guarantees:

- every try has a connect, a read and a total timeout (:class:`Timeouts`), and all the tries of
  one call share ``Retries.give_up_after``; an enclosing call scope
  (:mod:`corrective_rag.calls.scope`: ``Budget.max_seconds``, Ctrl-C) bounds and cancels calls in
  flight, because the exchange runs in a worker thread and the caller only waits on it;
- HTTP 429 and 5xx, timeouts and connection errors are retried with exponential back-off and
  jitter, honouring ``Retry-After`` (seconds or an HTTP date, capped); other 4xx are not retried,
  and 401, 403, 404 and "unknown model" say what to fix
  (:func:`corrective_rag.llm.failures.permanent_hint`);
- structured output asks for ``response_format`` ``json_schema``, and when the server rejects it
  falls back to ``json_object``, then to instructions alone, remembering per client what worked;
- replies are streamed (server-sent events) unless ``stream=False``, so that giving up on a call
  (its deadline, Ctrl-C, the run's cancellation) closes the connection and a server that stops
  on disconnect stops generating for nobody; a server that ignores ``stream`` is read as one body,
  and one that refuses it (a 4xx naming it) is asked again without, remembered per client;
- a body larger than ``max_response_bytes`` is never held in memory: reading stops at the cap;
- at most ``max_concurrency`` requests are in flight across threads;
- redirects are never followed: a 3xx is an ``LLMResponseError`` naming the status and where it
  pointed (the prompt and the key would travel to wherever a server names, and a loop would
  cost a request per hop);
- credentials in ``base_url`` (``user:password@``, a ``?api_key=``, a key in the path) are
  sent, and masked wherever the URL is shown (:func:`corrective_rag.text.urls.mask_url`):
  messages, log fields, spans, ``repr``, ``base_url`` and ``url``; ``user:password@`` with an
  ``api_key`` is refused (a ``ConfigError``): both would need the one ``Authorization``
  header, and requests would send the Basic one in place of the key;
- the API key never appears in an error message, a log line or a reply.
"""

from __future__ import annotations

import json
import math
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

import requests

from corrective_rag.calls import scope
from corrective_rag.calls.body import read_capped
from corrective_rag.calls.settings import (
    Retries,
    Timeouts,
    call_settings,
    finite,
    parse_retry_after,
)
from corrective_rag.errors import (
    Cancelled,
    ConfigError,
    InputError,
    LLMError,
    LLMResponseError,
    LLMTimeoutError,
    LLMTransportError,
)
from corrective_rag.llm.exchange import Exchange, finish_stream, stream_chunks
from corrective_rag.llm.failures import (
    is_read_timeout,
    permanent_hint,
    rejects_format,
    rejects_logprobs,
    rejects_stream,
)
from corrective_rag.llm.options import top_logprobs_asked
from corrective_rag.llm.parallel import parallel_map
from corrective_rag.llm.pricing import Pricing
from corrective_rag.llm.reply import read_reply
from corrective_rag.llm.stream import EVENT_STREAM, collect_events, is_event_stream
from corrective_rag.observe.logs import get_logger
from corrective_rag.observe.spans import traced_chat
from corrective_rag.protocols import TokenCounter
from corrective_rag.text.secrets import redact
from corrective_rag.text.urls import mask_url, url_secrets
from corrective_rag.types import ChatReply

__all__ = ["STRUCTURED_MODES"]  # OpenAIChatClient: its home is corrective_rag

log: Any = get_logger(__name__)

# Ways to ask for JSON, most precise first; a client steps down when a server rejects one.
STRUCTURED_MODES = ("json_schema", "json_object", "instructions")
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


class OpenAIChatClient:
    """A :class:`~corrective_rag.protocols.ChatModel` for any OpenAI-compatible endpoint.

    Args:
        base_url: the API root, e.g. ``https://api.openai.com/v1`` or ``http://127.0.0.1:8080``
            (``/v1`` is added when the URL has no path); requests go to ``/chat/completions``.
        model: the model name sent with each request.
        api_key: sent as a bearer token; never logged nor shown in errors. Not with a
            ``user:password@`` in ``base_url`` (sent as Basic, in the same header).
        timeout: most seconds one call may take, tries included: the one setting behind every
            call (grading, proposal, rewrite, answer, refinement); sets the timeouts and the
            tries' shared bound (:func:`~corrective_rag.calls.settings.call_settings`) where
            ``timeouts`` / ``retries`` are not given.
        timeouts: connect, per-read and total timeouts of one try.
        retries: retry policy for 429, 5xx, timeouts and connection errors, and the time all
            the tries of one call share (default: ``timeouts.total``, so that raising the
            timeouts is never undone by a shorter cap on the tries).
        stream: ask for a streamed reply (``stream: true``, server-sent events), so that
            closing the connection at a deadline or on cancellation stops a server that stops
            on disconnect (llama.cpp, vLLM); a server that ignores it answers in one body, which
            is read as before.
        pricing: per-million-token prices for the cost in ``ChatReply.usage``.
        max_concurrency: most requests in flight at once, across threads.
        max_response_bytes: responses larger than this fail with ``LLMResponseError``.
        session: a ``requests.Session`` to use (adapters, proxies); one is made lazily if None.
        token_counter: estimates tokens when a response has no ``usage``.
        sleep: called with seconds to wait between tries (tests pass a recorder).
        rng: source of jitter (tests pass a seeded ``random.Random``).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float | None = None,
        timeouts: Timeouts | None = None,
        retries: Retries | None = None,
        stream: bool = True,
        pricing: Pricing | None = None,
        max_concurrency: int = 8,
        max_response_bytes: int = 4_000_000,
        session: requests.Session | None = None,
        token_counter: TokenCounter | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        if not isinstance(base_url, str) or urlsplit(base_url).scheme not in ("http", "https"):
            raise ConfigError(f"base_url must be an http(s) URL, got {mask_url(str(base_url))!r}")
        if not isinstance(model, str) or not model.strip():
            raise ConfigError("model must be a non-empty string")
        if api_key is not None and (not isinstance(api_key, str) or not api_key):
            raise ConfigError("api_key must be a non-empty string or None")
        if api_key is not None and not _header_safe(api_key):
            # Said without the key: this message may end up in a log.
            raise ConfigError(
                "api_key holds whitespace, control or non-ASCII characters (a stray newline "
                "from a file or an environment variable?); it cannot be sent in a header"
            )
        if not _positive_int(max_concurrency):
            raise ConfigError(f"max_concurrency must be an int >= 1, got {max_concurrency!r}")
        if not _positive_int(max_response_bytes) or max_response_bytes < 1024:
            raise ConfigError(f"max_response_bytes must be >= 1024, got {max_response_bytes!r}")
        # The path goes before a query string (a gateway's ?api-version= or ?key=).
        parts = urlsplit(base_url.rstrip("/"))
        if api_key is not None and "@" in parts.netloc:
            # requests turns user:password@ into an Authorization: Basic header that replaces
            # the Bearer one: the key would never reach the server, silently.
            raise ConfigError(
                "base_url holds user:password@ and an api_key is given: both go in the one "
                "Authorization header (Basic and Bearer), so the key would never be sent; give "
                "one of them (on the command line: drop user:password@ from --llm-url, or "
                "unset OPENAI_API_KEY)"
            )
        path = parts.path.rstrip("/") or "/v1"
        self._url = urlunsplit(parts._replace(path=f"{path}/chat/completions", fragment=""))
        self._secrets = (api_key, *url_secrets(base_url))
        # What is shown (messages, logs, spans, repr): credentials in the URL masked.
        self.base_url: str = mask_url(urlunsplit(parts._replace(path=path, fragment="")))
        self.url: str = mask_url(self._url)
        self.model = model
        if timeout is not None:
            one_timeouts, one_retries = call_settings(timeout)
            timeouts = timeouts or one_timeouts
            retries = retries or one_retries
        self.timeouts: Timeouts = timeouts or Timeouts()
        self.retries: Retries = retries or Retries(give_up_after=self.timeouts.total)
        self.stream: bool = bool(stream)
        self._streaming = self.stream  # False once a server refused to stream
        self.pricing: Pricing = pricing or Pricing()
        self.max_concurrency = max_concurrency
        self.max_response_bytes = max_response_bytes
        self._api_key = api_key
        self._session = session
        self._owns_session = session is None  # close() closes only a session made here
        self._counter = token_counter
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._slots = threading.BoundedSemaphore(max_concurrency)
        self._lock = threading.Lock()
        self._mode_index = 0
        self._logprobs_taken = True  # False once a server refused the logprobs field

    def __repr__(self) -> str:
        key = "***" if self._api_key else None
        return f"OpenAIChatClient(base_url={self.base_url!r}, model={self.model!r}, api_key={key})"

    def __enter__(self) -> OpenAIChatClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections of the session this client made.

        A session passed in is the caller's to close. A later call opens a new session.
        """
        if not self._owns_session:
            return
        with self._lock:
            session, self._session = self._session, None
        if session is not None:
            session.close()

    @property
    def structured_mode(self) -> str:
        """How this client currently asks for JSON: one of ``STRUCTURED_MODES``."""
        with self._lock:
            return STRUCTURED_MODES[self._mode_index]

    @traced_chat
    def complete(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        json_schema: Mapping[str, Any] | None = None,
        max_tokens: int | None = None,
        temperature: float = 0.0,
        logprobs: bool | int | None = None,
    ) -> ChatReply:
        """Return the assistant's reply to ``messages`` (see the module docstring).

        ``logprobs``, as OpenAI's chat API reads ``logprobs`` and ``top_logprobs``: ``True``
        asks for each reply token's log probability with
        :data:`~corrective_rag.llm.options.DEFAULT_TOP_LOGPROBS`
        alternatives each, an int 0..20 with that many (0: the chosen tokens' own only),
        ``None`` or ``False`` for none. They come back in ``ChatReply.logprobs``; a server that
        refuses the field is asked again without it, and from then on never with it.

        Raises:
            InputError: malformed messages or arguments.
            LLMTimeoutError, LLMTransportError: no usable exchange after the retries.
            LLMResponseError: an error status (after retries where retryable) or unusable body.
            Cancelled: the enclosing call scope was cancelled (Ctrl-C) before the reply came.
        """
        scope.raise_if_cancelled()
        msgs = _check_messages(messages)
        if max_tokens is not None and not _positive_int(max_tokens):
            raise InputError(f"max_tokens must be a positive int, got {max_tokens!r}")
        if not finite(temperature) or not 0.0 <= temperature <= 2.0:
            raise InputError(f"temperature must be in 0..2, got {temperature!r}")
        top_logprobs = top_logprobs_asked(logprobs)
        while True:
            mode = self.structured_mode if json_schema is not None else None
            payload = self._payload(msgs, json_schema, mode, max_tokens, float(temperature))
            if top_logprobs is not None and self._logprobs_taken:
                payload.update(logprobs=True, top_logprobs=top_logprobs)
            try:
                return self._with_retries(payload, msgs)
            except LLMResponseError as exc:
                if "logprobs" in payload and rejects_logprobs(exc):
                    self._logprobs_taken = False  # this server returns no token probabilities
                    log.info("llm_logprobs_refused", url=self.url)
                    continue
                if payload.get("stream") and rejects_stream(exc):
                    with self._lock:
                        self._streaming = False  # this server takes one-body replies only
                    log.info("llm_stream_fallback", url=self.url)
                    continue
                if mode is None or not rejects_format(exc) or not self._step_down(mode):
                    raise
                log.info("llm_structured_fallback", url=self.url, rejected=mode)

    def complete_many(
        self,
        conversations: Sequence[Sequence[Mapping[str, str]]],
        *,
        json_schema: Mapping[str, Any] | None = None,
        max_tokens: int | None = None,
        temperature: float = 0.0,
    ) -> list[ChatReply | LLMError]:
        """Run several completions in parallel (bounded by ``max_concurrency``).

        Returns one item per conversation, in order: its reply, or the ``LLMError`` it raised.
        """

        def one(msgs: Sequence[Mapping[str, str]]) -> ChatReply | LLMError:
            try:
                return self.complete(
                    msgs, json_schema=json_schema, max_tokens=max_tokens, temperature=temperature
                )
            except LLMError as exc:
                return exc

        return parallel_map(one, conversations, max_workers=self.max_concurrency)

    # -- internals ---------------------------------------------------------------------------

    def _step_down(self, failed_mode: str) -> bool:
        """Move to the next structured mode unless another thread already did; False at the end."""
        with self._lock:
            current = STRUCTURED_MODES[self._mode_index]
            if current != failed_mode:
                return True  # another thread stepped down meanwhile: just try again
            if self._mode_index + 1 >= len(STRUCTURED_MODES):
                return False
            self._mode_index += 1
            return True

    def _payload(
        self,
        msgs: list[dict[str, str]],
        schema: Mapping[str, Any] | None,
        mode: str | None,
        max_tokens: int | None,
        temperature: float,
    ) -> dict[str, Any]:
        payload: dict[str, Any] = {"model": self.model, "temperature": temperature}
        with self._lock:
            streaming = self._streaming
        if streaming:
            payload["stream"] = True
            payload["stream_options"] = {"include_usage": True}
        if max_tokens is not None:
            payload["max_tokens"] = max_tokens
        if schema is not None and mode is not None:
            if mode == "json_schema":
                name = str(schema.get("title") or "reply")
                payload["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": name, "schema": dict(schema), "strict": True},
                }
            else:
                if mode == "json_object":
                    payload["response_format"] = {"type": "json_object"}
                # Without a schema-enforcing server the schema travels as an instruction; the
                # word JSON must appear for json_object mode on OpenAI's API.
                rule = "Reply with one JSON object matching this JSON schema: " + json.dumps(
                    schema, separators=(",", ":")
                )
                msgs = [*msgs, {"role": "system", "content": rule}]
        payload["messages"] = msgs
        return payload

    def _with_retries(self, payload: dict[str, Any], msgs: list[dict[str, str]]) -> ChatReply:
        attempt = 0
        give_up: float | None = None  # set when the first try gets its slot
        while True:
            try:
                return self._once(payload, msgs, give_up)
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

    def _headers(self) -> dict[str, str]:
        accept = f"application/json, {EVENT_STREAM}" if self._streaming else "application/json"
        headers = {"Content-Type": "application/json", "Accept": accept}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def _redact(self, text: str) -> str:
        return redact(text, self._secrets)

    def _session_or_new(self) -> requests.Session:
        with self._lock:
            if self._session is None:
                self._session = requests.Session()
            return self._session

    def _once(
        self, payload: dict[str, Any], msgs: list[dict[str, str]], give_up: float | None
    ) -> ChatReply:
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
            text = mask_url(self._redact(body.decode("utf-8", "replace")))
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
        return self._reply(body, msgs, latency)

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
                headers=self._headers(),
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
        target = mask_url(self._redact(urljoin(self._url, location))) if location else "nowhere"
        log.info("llm_error_status", url=self.url, status=response.status_code)
        return LLMResponseError(
            f"{self.url} answered a redirect ({response.status_code}) to {target}, not followed "
            "(the prompt and the key would travel with it): set --llm-url / base_url to where "
            "the API answers",
            status=response.status_code,
        )

    def _describe(self, what: str, exc: BaseException) -> str:
        return mask_url(self._redact(f"{self.url} {what}: {type(exc).__name__}: {exc}"))

    def _reply(self, body: bytes, msgs: list[dict[str, str]], latency: float) -> ChatReply:
        reply = read_reply(
            body,
            msgs,
            latency,
            model=self.model,
            pricing=self.pricing,
            redact=self._redact,
            counter=self._token_counter,
        )
        log.debug(
            "llm_call",
            url=self.url,
            model=self.model,
            latency_seconds=round(latency, 4),
            prompt_tokens=reply.usage.prompt_tokens,
            completion_tokens=reply.usage.completion_tokens,
        )
        return reply

    def _token_counter(self) -> TokenCounter:
        with self._lock:
            if self._counter is None:
                from corrective_rag.models.tokens import TiktokenCounter

                self._counter = TiktokenCounter(model=self.model)
            return self._counter


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _header_safe(key: str) -> bool:
    """Printable ASCII without spaces: what a bearer token can be, and all a header can carry."""
    return all(33 <= ord(c) <= 126 for c in key)


def _check_messages(messages: Sequence[Mapping[str, str]]) -> list[dict[str, str]]:
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence) or not messages:
        raise InputError("messages must be a non-empty sequence of {role, content} mappings")
    out = []
    for m in messages:
        if not isinstance(m, Mapping):
            raise InputError(f"each message must be a mapping, got {type(m).__name__}")
        role, content = m.get("role"), m.get("content")
        if role not in ("system", "user", "assistant") or not isinstance(content, str):
            raise InputError(f"message needs role system/user/assistant and str content: {m!r}")
        out.append({"role": role, "content": content})
    return out
