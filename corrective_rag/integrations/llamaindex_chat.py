"""A LlamaIndex ``LLM`` as the loop's chat model (extra ``[llamaindex]``).

:class:`LlamaIndexChatModel` is imported from :mod:`corrective_rag.integrations.llamaindex`,
the face of the LlamaIndex adapters; here is how it asks a LlamaIndex LLM (function calling for
a schema, limits and token probabilities on a copy of the LLM, the async call under the run's
deadline) and reads what it says back (text, usage, token probabilities).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from corrective_rag.integrations import MissingExtraError

try:
    from llama_index.core.base.llms.types import ChatMessage, ChatResponse, MessageRole
    from llama_index.core.llms import LLM, CustomLLM
    from llama_index.core.llms.function_calling import FunctionCallingLLM
    from llama_index.core.tools import FunctionTool, ToolMetadata
except ImportError as _missing:  # pragma: no cover - exercised in a subprocess without it
    raise MissingExtraError(
        "corrective_rag.integrations.llamaindex needs llama-index-core: "
        "pip install 'corrective_rag[llamaindex]'"
    ) from _missing

from corrective_rag.errors import ConfigError, InputError
from corrective_rag.integrations.bridge import (
    declares,
    model_name,
    reply_usage,
    schema_rule,
    with_limits,
)
from corrective_rag.integrations.chat import FrameworkChatModel
from corrective_rag.llm.reply import read_logprobs
from corrective_rag.types import ChatReply

__all__: list[str] = []  # LlamaIndexChatModel: its home is corrective_rag.integrations.llamaindex

_ROLES = {
    "system": MessageRole.SYSTEM,
    "user": MessageRole.USER,
    "assistant": MessageRole.ASSISTANT,
}


@dataclass
class _SchemaToolMetadata(ToolMetadata):
    """Tool metadata whose parameters are a JSON schema as given (not a pydantic class's)."""

    schema: dict[str, Any] = field(default_factory=dict)

    def get_parameters_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.schema.items() if k != "title"}


class LlamaIndexChatModel(FrameworkChatModel):
    """A LlamaIndex ``LLM`` as a :class:`~corrective_rag.protocols.ChatModel`.

    With a ``json_schema``, a function-calling LLM (``FunctionCallingLLM`` whose metadata says
    ``is_function_calling_model``) is made to call one tool whose parameters are the schema, and
    the tool's arguments are returned as JSON text; other LLMs get the schema as an instruction
    and our lenient parser reads the reply. ``temperature`` and ``max_tokens`` are set on a copy
    of the LLM where it has fields of those names. Tokens are what the LLM reports
    (``additional_kwargs`` or the raw reply's ``usage``), else counted with cl100k_base; cost is
    not known (0). Token probabilities (``logprobs``) are asked on a copy of an LLM whose class
    has ``logprobs`` and ``top_logprobs`` fields (LlamaIndex's ``OpenAI`` and the LLMs built on
    it) and read from the raw OpenAI reply. The call is the LLM's ``achat``
    (``achat_with_tools``), awaited under the run's deadline and cancelled with the run; a
    ``CustomLLM``, whose async call is its sync one, is called in a thread that runs on to the
    LLM's own timeout (:mod:`corrective_rag.integrations.awaiting`).

    Args:
        llm: the LlamaIndex LLM, configured with the user's provider and key.
        structured: use function calling for JSON replies where the LLM has it.
        limits: set ``temperature`` / ``max_tokens`` per call (see above).
    """

    def __init__(self, llm: Any, *, structured: bool = True, limits: bool = True) -> None:
        if not isinstance(llm, LLM):
            raise ConfigError(f"llm must be a LlamaIndex LLM, got {llm!r}")
        name = model_name(llm)
        if name == type(llm).__name__:
            name = getattr(llm.metadata, "model_name", "") or name
        super().__init__(llm, name=name, structured=structured, limits=limits)
        self.llm = llm

    def __repr__(self) -> str:
        return f"LlamaIndexChatModel({type(self.llm).__name__}, model={self.model!r})"

    def _ask(
        self,
        messages: list[dict[str, str]],
        json_schema: Mapping[str, Any] | None,
        limits: Mapping[str, Any],
        asked: Mapping[str, Any],
    ) -> Callable[[], Awaitable[tuple[ChatResponse, str, list[dict[str, str]]]]]:
        fields = declares(self.llm, tuple(asked))
        llm = with_limits(self.llm, {**limits, **(asked if fields else {})})
        msgs = messages
        if json_schema is not None and not (self.structured and _calls_functions(llm)):
            msgs = [*msgs, {"role": "system", "content": schema_rule(json_schema)}]
        chat_messages = _chat_messages(msgs)

        async def call() -> tuple[ChatResponse, str, list[dict[str, str]]]:
            if json_schema is not None and self.structured and _calls_functions(llm):
                return (*await _tool_reply(llm, chat_messages, json_schema), msgs)
            if _async_is_sync(llm):  # CustomLLM's achat calls chat: keep it off the loop
                response = await asyncio.to_thread(llm.chat, chat_messages)
            else:
                response = await llm.achat(chat_messages)
            return response, response.message.content or "", msgs

        return call

    def _reply(
        self, answer: tuple[ChatResponse, str, list[dict[str, str]]], seconds: float
    ) -> ChatReply:
        response, text, msgs = answer
        prompt, completion = _reported_tokens(response)
        raw = response.raw if isinstance(response.raw, Mapping) else {}
        finish = raw.get("finish_reason") if raw else None
        return ChatReply(
            text=text,
            model=str(raw.get("model") or self.model),
            usage=reply_usage(prompt, completion, seconds, msgs, text),
            finish_reason=str(finish) if finish is not None else None,
            logprobs=read_logprobs(_raw_logprobs(response.raw), text),
        )


def _chat_messages(msgs: Sequence[Mapping[str, str]]) -> list[ChatMessage]:
    out = []
    for m in msgs:
        role = _ROLES.get(m.get("role", ""))
        if role is None:
            raise InputError(f"unknown message role {m.get('role')!r}")
        out.append(ChatMessage(role=role, content=m.get("content", "")))
    return out


def _calls_functions(llm: LLM) -> TypeGuard[FunctionCallingLLM]:
    return isinstance(llm, FunctionCallingLLM) and bool(llm.metadata.is_function_calling_model)


def _async_is_sync(llm: LLM) -> bool:
    """True when the LLM's ``achat`` is ``CustomLLM``'s, which runs ``chat`` on the loop."""
    return getattr(type(llm), "achat", None) is CustomLLM.achat


async def _tool_reply(
    llm: FunctionCallingLLM, messages: list[ChatMessage], schema: Mapping[str, Any]
) -> tuple[ChatResponse, str]:
    name = str(schema.get("title") or "reply")
    metadata = _SchemaToolMetadata(
        description=f"Give the {name} reply.", name=name, fn_schema=None, schema=dict(schema)
    )
    tool = FunctionTool(fn=lambda **kwargs: kwargs, metadata=metadata)
    if _async_is_sync(llm):
        response = await asyncio.to_thread(
            llm.chat_with_tools, [tool], chat_history=messages, tool_required=True
        )
    else:
        response = await llm.achat_with_tools([tool], chat_history=messages, tool_required=True)
    calls = llm.get_tool_calls_from_response(response, error_on_no_tool_call=False)
    if calls:
        return response, json.dumps(calls[0].tool_kwargs, ensure_ascii=False)
    return response, response.message.content or ""  # no call: the lenient parser reads it


def _raw_logprobs(raw: object) -> object:
    """The server's ``choices[0].logprobs`` in a response's raw reply, or None.

    The raw reply is a dict or the OpenAI SDK's object. ``ChatResponse.logprobs`` is not read:
    it lists each place's alternatives without the token chosen there.
    """
    dump = getattr(raw, "model_dump", None)
    if callable(dump):
        with contextlib.suppress(Exception):  # a raw object of the SDK's; anything else: none
            raw = dump()
    choices = raw.get("choices") if isinstance(raw, Mapping) else None
    choice = choices[0] if isinstance(choices, list) and choices else None
    return choice.get("logprobs") if isinstance(choice, Mapping) else None


def _reported_tokens(response: ChatResponse) -> tuple[int | None, int | None]:
    extra = response.additional_kwargs or {}
    raw = response.raw
    usage = raw.get("usage") if isinstance(raw, Mapping) else getattr(raw, "usage", None)
    if isinstance(usage, Mapping):
        extra = {**usage, **extra}
    elif usage is not None:
        extra = {**vars(usage), **extra} if hasattr(usage, "__dict__") else extra
    return extra.get("prompt_tokens"), extra.get("completion_tokens")
