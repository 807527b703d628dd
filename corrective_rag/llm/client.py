"""An OpenAI-compatible chat client over ``requests``: retries, structured output, usage, limits.

``OpenAIChatClient.complete`` posts to ``{base_url}/chat/completions`` and returns a
:class:`~corrective_rag.types.ChatReply`. This module decides what is asked (the messages
checked, the structured-output mode, streaming, token probabilities, stepping down when a server
refuses one) and reads the reply; how each try is posted, bounded, waited for and retried is
:class:`~corrective_rag.llm.transport.ChatTransport`'s. What the client guarantees:

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
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import requests

from corrective_rag.calls import scope
from corrective_rag.calls.settings import Retries, Timeouts, call_settings, finite
from corrective_rag.errors import ConfigError, InputError, LLMError, LLMResponseError
from corrective_rag.llm.failures import rejects_format, rejects_logprobs, rejects_stream
from corrective_rag.llm.options import top_logprobs_asked
from corrective_rag.llm.parallel import parallel_map
from corrective_rag.llm.pricing import Pricing
from corrective_rag.llm.reply import read_reply
from corrective_rag.llm.transport import ChatTransport
from corrective_rag.observe.logs import get_logger
from corrective_rag.observe.spans import traced_chat
from corrective_rag.protocols import TokenCounter
from corrective_rag.text.urls import mask_url, url_secrets
from corrective_rag.types import ChatReply

__all__ = ["STRUCTURED_MODES"]  # OpenAIChatClient: its home is corrective_rag

log: Any = get_logger(__name__)

# Ways to ask for JSON, most precise first; a client steps down when a server rejects one.
STRUCTURED_MODES = ("json_schema", "json_object", "instructions")


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
        url = urlunsplit(parts._replace(path=f"{path}/chat/completions", fragment=""))
        # What is shown (messages, logs, spans, repr): credentials in the URL masked.
        self.base_url: str = mask_url(urlunsplit(parts._replace(path=path, fragment="")))
        self.url: str = mask_url(url)
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
        self._counter = token_counter
        self._lock = threading.Lock()
        self._transport = ChatTransport(
            url,
            api_key=api_key,
            secrets=(api_key, *url_secrets(base_url)),
            timeouts=self.timeouts,
            retries=self.retries,
            max_concurrency=max_concurrency,
            max_response_bytes=max_response_bytes,
            session=session,
            sleep=sleep,
            rng=rng or random.Random(),
        )
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
        self._transport.close()

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
                body, latency = self._transport.post(payload)
                return self._reply(body, msgs, latency)
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

    def _reply(self, body: bytes, msgs: list[dict[str, str]], latency: float) -> ChatReply:
        reply = read_reply(
            body,
            msgs,
            latency,
            model=self.model,
            pricing=self.pricing,
            redact=self._transport.redact,
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
