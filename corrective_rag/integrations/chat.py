"""What both chat adapters share, with no framework imported: settings, the call and its errors.

:class:`FrameworkChatModel` is the base of
:class:`~corrective_rag.integrations.langchain.LangChainChatModel` and
:class:`~corrective_rag.integrations.llamaindex.LlamaIndexChatModel`. Its
:meth:`~FrameworkChatModel.complete` is the loop's :class:`~corrective_rag.protocols.ChatModel`
call, written once: the limits, the framework's async call awaited under the run's deadline
(:func:`~corrective_rag.integrations.awaiting.await_in_scope`), its time, and any failure as
our :class:`~corrective_rag.errors.LLMError` with keys masked. A subclass says how its
framework is asked (:meth:`~FrameworkChatModel._ask`) and what its answer is
(:meth:`~FrameworkChatModel._reply`).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from corrective_rag.errors import CorrectiveRAGError
from corrective_rag.integrations.awaiting import await_in_scope
from corrective_rag.integrations.bridge import call_failed, secrets_of_model
from corrective_rag.llm.options import top_logprobs_asked
from corrective_rag.types import ChatReply

__all__ = ["FrameworkChatModel"]


class FrameworkChatModel:
    """A framework's chat model as a :class:`~corrective_rag.protocols.ChatModel` (a base).

    Args:
        model: the framework's model object (its secrets are read to mask them in errors).
        name: the model's name, used in messages and verdict cache keys.
        structured: use the framework's structured output for JSON replies where it has one.
        limits: set ``temperature`` / ``max_tokens`` per call on a copy of the model.
    """

    def __init__(self, model: Any, *, name: str, structured: bool, limits: bool) -> None:
        self.model = name
        self.structured: bool = bool(structured)
        self.limits: bool = bool(limits)
        self._secrets = secrets_of_model(model)

    def complete(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        json_schema: Mapping[str, Any] | None = None,
        max_tokens: int | None = None,
        temperature: float = 0.0,
        logprobs: bool | int | None = None,
    ) -> ChatReply:
        """Return the model's reply to ``messages`` (see the class docstring).

        ``logprobs`` (read as OpenAI's, :func:`~corrective_rag.llm.options.top_logprobs_asked`)
        is set on a copy of the model where its class declares ``logprobs`` and
        ``top_logprobs`` fields (LangChain's ``ChatOpenAI``, LlamaIndex's ``OpenAI`` and the
        models built on them), and the reply's token probabilities are read where the framework
        hands over the server's (``ChatReply.logprobs``). A model without those fields is not
        asked (a provider that does not take them would refuse the call; LangChain's adapter
        can bind them as call keywords instead), and its replies carry none: verbal verdicts.

        Raises:
            InputError: ``logprobs`` is not None, a bool or an int 0..20.
            LLMError: the model raised (its message, keys masked; the cause is chained).
            LLMTimeoutError: the run's deadline passed before or during the call.
            Cancelled: the run was cancelled before or during the call.
        """
        top = top_logprobs_asked(logprobs)
        asked = {} if top is None else {"logprobs": True, "top_logprobs": top}
        limits = {"temperature": temperature, "max_tokens": max_tokens} if self.limits else {}
        call = self._ask([dict(m) for m in messages], json_schema, limits, asked)
        started = time.perf_counter()
        try:
            answer = await_in_scope(self.model, call)
        except CorrectiveRAGError:
            raise
        except Exception as exc:
            raise call_failed(self.model, exc, self._secrets) from exc
        return self._reply(answer, time.perf_counter() - started)

    def _ask(
        self,
        messages: list[dict[str, str]],
        json_schema: Mapping[str, Any] | None,
        limits: Mapping[str, Any],
        asked: Mapping[str, Any],
    ) -> Callable[[], Awaitable[Any]]:
        """The framework's async call for these messages (made, not yet awaited).

        ``limits``: the ``temperature`` and ``max_tokens`` to set on a copy of the model
        (empty when ``limits=False``); ``asked``: ``logprobs`` and ``top_logprobs`` as OpenAI
        takes them (empty when token probabilities are not asked for).
        """
        raise NotImplementedError

    def _reply(self, answer: Any, seconds: float) -> ChatReply:
        """The reply, from what the framework's call returned and how long it took."""
        raise NotImplementedError
