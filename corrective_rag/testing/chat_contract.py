"""The :class:`~corrective_rag.protocols.ChatModel` contract, written once, for any chat model.

Every chat model the loop calls (the package's ``OpenAIChatClient``, the LangChain and
LlamaIndex adapters, your own) must hold the same promises, each checked here against a
:class:`~corrective_rag.testing.server.ScriptedLLMServer` on 127.0.0.1:

- the reply's text comes back as the server sent it, and a ``json_schema`` call asks the server
  for JSON (``response_format``, tools, or an instruction naming JSON) and returns the JSON the
  server gave; a model that never asks gets plain text back and fails;
- token probabilities, for a model whose ``complete`` takes ``logprobs``: ``True`` and an int
  0..20 are taken as OpenAI's (``logprobs: true`` with ``top_logprobs`` of at least 1, or that
  int), and what the server sends back is handed on, its tokens spelling the reply (a model
  that does not ask passes: its verdicts stay verbal);
- usage: one call, the tokens the server reported; absurd counts (a 400-digit integer) are
  "not reported", never a crash;
- errors: a server's 401 is an :class:`~corrective_rag.errors.LLMError` that does not hold the
  API key the server echoed; a 401 or 403 is sent once, never retried (no retry fixes a key);
- deadline: a call in flight ends with :class:`~corrective_rag.errors.LLMTimeoutError` when the
  call scope's deadline passes, before the server answers;
- cancel: a call in flight ends with :class:`~corrective_rag.errors.Cancelled` when the call
  scope is cancelled, before the server answers; a cancelled scope makes no call at all.

In pytest, subclass :class:`ChatModelContract` in a class named ``Test...`` and say how to
build your model for a server (the manner of Haystack's ``FilterDocumentsTest``)::

    class TestMyModel(ChatModelContract):
        def make_model(self, base_url: str, api_key: str) -> ChatModel:
            return MyModel(base_url=base_url, api_key=api_key)

or, without pytest, ``check_chat_model(make_model)`` runs every check and raises
``AssertionError`` naming those that failed. Nothing here imports pytest.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from typing import Any

from corrective_rag.calls.scope import call_scope
from corrective_rag.errors import Cancelled, LLMError, LLMTimeoutError
from corrective_rag.protocols import ChatModel
from corrective_rag.testing.faults import Fault
from corrective_rag.testing.hostile_content import absurd_usage
from corrective_rag.testing.server import ScriptedLLMServer

__all__ = ["ChatModelContract", "check_chat_model"]

MakeModel = Callable[[str, str], ChatModel]

HELLO = [{"role": "user", "content": "say hello"}]
REPLY = "hello there"
SCHEMA: dict[str, Any] = {
    "title": "answer",
    "type": "object",
    "properties": {"answer": {"type": "string"}, "sure": {"type": "boolean"}},
    "required": ["answer", "sure"],
}
ANSWER: dict[str, Any] = {"answer": "Ganymede", "sure": True}
KEY = "sk-contract-5e1f0a9c7b3d"


def _words(text: str) -> int:
    return len(text.split())


def _asks_for_json(request: Mapping[str, Any]) -> bool:
    """Whether a chat request asks for JSON.

    A JSON ``response_format``, tools to call, or a message naming JSON (the schema sent as an
    instruction).
    """
    fmt = request.get("response_format")
    if isinstance(fmt, Mapping) and fmt.get("type") in ("json_schema", "json_object"):
        return True
    if request.get("tools") or request.get("functions"):
        return True
    messages = request.get("messages")
    return isinstance(messages, list) and any(
        isinstance(m, Mapping) and "json" in str(m.get("content", "")).lower() for m in messages
    )


class ChatModelContract:
    """Checks any :class:`~corrective_rag.protocols.ChatModel` must pass (module docstring).

    Attributes:
        hold_seconds: how long the server holds a call that a deadline or cancel must end; a
            model that ignores them returns a reply after this long, and the check fails.
        deadline_seconds: the call scope's deadline in the deadline check.
    """

    hold_seconds: float = 20.0
    deadline_seconds: float = 0.5

    def make_model(self, base_url: str, api_key: str) -> ChatModel:
        """Your chat model for the OpenAI-compatible server at ``base_url``, with ``api_key``.

        A 401 must not be retried; keep the model's own retries few.
        """
        raise NotImplementedError("subclass ChatModelContract and define make_model")

    def _server(self, **kwargs: Any) -> ScriptedLLMServer:
        kwargs.setdefault("reply", lambda request: REPLY)
        return ScriptedLLMServer(count_tokens=_words, **kwargs)

    # -- replies ---------------------------------------------------------------------------

    def test_the_reply_text_comes_back(self) -> None:
        """The assistant's text is the reply's text."""
        with self._server() as server:
            reply = self.make_model(server.base_url, KEY).complete(HELLO)
        assert REPLY == reply.text, f"reply text {reply.text!r}"

    def test_a_json_schema_call_returns_json(self) -> None:
        """With a json_schema, the model asks for JSON and gets back the server's JSON object.

        The server answers plain text to a request that did not ask for JSON.
        """

        def reply(request: Mapping[str, Any]) -> str:
            return json.dumps(ANSWER) if _asks_for_json(request) else REPLY

        with self._server(reply=reply) as server:
            got = self.make_model(server.base_url, KEY).complete(HELLO, json_schema=SCHEMA)
        try:
            parsed = json.loads(got.text)
        except ValueError:
            raise AssertionError(
                f"no JSON came back (did the request ask?): {got.text!r}"
            ) from None
        assert ANSWER == parsed, f"JSON reply {got.text!r}"

    def test_logprobs_are_asked_as_openai_asks_and_handed_on(self) -> None:
        """``logprobs=True`` / ``3`` are asked as OpenAI's, and what comes back is handed on.

        ``True`` asks ``top_logprobs`` of at least 1, ``3`` asks 3 (or neither is asked at all);
        the server's token probabilities come back, spelling the reply. A model without the
        keyword passes: the evaluators call it without (verbal verdicts).
        """
        from corrective_rag.evaluate.logprobs import takes_logprobs

        for asked, top in ((True, None), (3, 3)):
            with self._server(logprobs="agree") as server:
                model = self.make_model(server.base_url, KEY)
                if not takes_logprobs(model):
                    return
                taking: Any = model  # its complete takes logprobs (just checked)
                reply = taking.complete(HELLO, logprobs=asked)
                request = server.requests[-1]
            assert REPLY == reply.text
            if request.get("logprobs") is not True:
                assert reply.logprobs is None, "token probabilities nobody asked for"
                continue
            sent = request.get("top_logprobs")
            assert (sent == top) if top is not None else (isinstance(sent, int) and sent >= 1), (
                f"logprobs={asked!r} asked top_logprobs={sent!r}"
            )
            assert reply.logprobs is not None, "the server's token probabilities were dropped"
            assert REPLY == "".join(t.token for t in reply.logprobs), "tokens do not spell it"

    # -- usage -----------------------------------------------------------------------------

    def test_reported_usage_is_the_calls_usage(self) -> None:
        """One call, with the prompt and completion tokens the server reported."""
        with self._server() as server:
            usage = self.make_model(server.base_url, KEY).complete(HELLO).usage
        got = (usage.llm_calls, usage.prompt_tokens, usage.completion_tokens)
        assert (1, _words(HELLO[0]["content"]), _words(REPLY)) == got, f"usage {usage}"

    def test_absurd_usage_is_not_reported(self) -> None:
        """A 400-digit token count is not the call's usage, and no crash."""
        with self._server() as server:
            server.enqueue(absurd_usage(10**400, REPLY))
            reply = self.make_model(server.base_url, KEY).complete(HELLO)
        assert REPLY == reply.text
        assert reply.usage.total_tokens < 1_000_000, f"usage {reply.usage}"

    # -- errors ----------------------------------------------------------------------------

    def test_a_server_error_is_an_llm_error_without_the_key(self) -> None:
        """A 401 echoing the request's key is an LLMError whose message hides the key."""
        echo = '{"error": {"message": "bad key: {authorization}"}}'
        with self._server(faults=lambda request, n: Fault.error(401, echo)) as server:
            model = self.make_model(server.base_url, KEY)
            try:
                model.complete(HELLO)
            except LLMError as exc:
                assert KEY not in str(exc), f"the key is in the error: {exc}"
            else:
                raise AssertionError("a 401 did not raise LLMError")

    def test_a_401_or_403_is_sent_once(self) -> None:
        """A refused key (401) or a forbidden model (403) is one request, never retried."""
        for status in (401, 403):
            fault = Fault.error(status, '{"error": {"message": "no"}}')
            with self._server(faults=lambda request, n, fault=fault: fault) as server:
                model = self.make_model(server.base_url, KEY)
                try:
                    model.complete(HELLO)
                except LLMError:
                    pass
                else:
                    raise AssertionError(f"a {status} did not raise LLMError")
                sent = server.request_count
            assert 1 == sent, f"a {status} was sent {sent} times"

    # -- deadline and cancel ---------------------------------------------------------------

    def test_the_scopes_deadline_ends_a_call_in_flight(self) -> None:
        """Past the call scope's deadline a held call raises LLMTimeoutError, not a reply."""
        hold = Fault.hang(self.hold_seconds)
        with self._server(faults=lambda request, n: hold) as server:
            model = self.make_model(server.base_url, KEY)
            try:
                with call_scope(seconds=self.deadline_seconds):
                    reply = model.complete(HELLO)
            except LLMTimeoutError:
                return
            raise AssertionError(f"no LLMTimeoutError at the deadline; got {reply.text!r}")

    def test_cancelling_the_scope_ends_a_call_in_flight(self) -> None:
        """Once the scope's event is set, a held call raises Cancelled, not a reply."""
        stop = threading.Event()
        outcome: list[object] = []
        hold = Fault.hang(self.hold_seconds)
        with self._server(faults=lambda request, n: hold) as server:
            model = self.make_model(server.base_url, KEY)

            def call() -> None:
                with call_scope(cancel=stop):
                    try:
                        outcome.append(model.complete(HELLO))
                    except BaseException as exc:  # the outcome is what is checked
                        outcome.append(exc)

            thread = threading.Thread(target=call, daemon=True)
            thread.start()
            arrived = server.wait_for_requests(1, timeout=self.hold_seconds)
            stop.set()
            thread.join(timeout=self.hold_seconds * 2)
        assert arrived, "the model sent no request"
        assert outcome and isinstance(outcome[0], Cancelled), f"outcome {outcome!r}"

    def test_a_cancelled_scope_makes_no_call(self) -> None:
        """Inside a scope already cancelled, the call raises Cancelled and sends nothing."""
        with self._server() as server:
            model = self.make_model(server.base_url, KEY)
            try:
                with call_scope() as own:
                    own.set()
                    model.complete(HELLO)
            except Cancelled:
                pass
            else:
                raise AssertionError("a cancelled scope did not raise Cancelled")
            assert 0 == server.request_count, f"{server.request_count} requests sent"


def check_chat_model(make_model: MakeModel, *, hold_seconds: float = 20.0) -> None:
    """Run every check of :class:`ChatModelContract` on the model ``make_model`` builds.

    Args:
        make_model: ``(base_url, api_key) -> ChatModel``.
        hold_seconds: see :attr:`ChatModelContract.hold_seconds`.

    Raises:
        AssertionError: naming every check that failed, and why.
    """

    class _Contract(ChatModelContract):
        def make_model(self, base_url: str, api_key: str) -> ChatModel:
            return make_model(base_url, api_key)

    contract = _Contract()
    contract.hold_seconds = hold_seconds
    failed: list[str] = []
    for name in sorted(n for n in dir(ChatModelContract) if n.startswith("test_")):
        try:
            getattr(contract, name)()
        except Exception as exc:  # every failure is collected, whatever raised it
            failed.append(f"{name}: {type(exc).__name__}: {exc}")
    if failed:
        raise AssertionError("the chat model breaks its contract:\n" + "\n".join(failed))
