"""Framework chat models that talk to the scripted OpenAI-compatible server over real HTTP.

What a provider package (langchain-openai, llama-index-llms-openai) does, cut to what the tests
need, so that only ``langchain-core`` and ``llama-index-core`` are installed: messages go out as
OpenAI chat messages; ``temperature`` and ``max_tokens`` come from the model's fields; a bound
tool becomes ``response_format`` ``json_schema`` and the JSON reply comes back as the tool call;
usage comes back as the framework reports it. Token probabilities go out as ``ChatOpenAI`` and
LlamaIndex's ``OpenAI`` send them (``logprobs`` / ``top_logprobs`` fields, here on the
``Logprob...`` models; or LangChain call keywords bound on any model) and come back where they
put them (``response_metadata["logprobs"]``; the raw reply).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import requests
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    CompletionResponse,
    LLMMetadata,
    MessageRole,
)
from llama_index.core.llms import CustomLLM
from llama_index.core.llms.function_calling import FunctionCallingLLM
from llama_index.core.llms.llm import ToolSelection
from pydantic import SecretStr

_LC_ROLES = {"system": "system", "human": "user", "ai": "assistant"}


def _post(base_url: str, key: str, body: dict[str, Any]) -> dict[str, Any]:
    response = requests.post(
        f"{base_url}/chat/completions",
        json=body,
        headers={"Authorization": f"Bearer {key}"},
        timeout=30,
    )
    if response.status_code != 200:  # as SDKs do, the server's error text, whatever it holds
        raise RuntimeError(f"HTTP {response.status_code}: {response.text}")
    return response.json()


def _schema_format(parameters: dict[str, Any], name: str) -> dict[str, Any]:
    return {
        "type": "json_schema",
        "json_schema": {"name": name, "schema": parameters, "strict": True},
    }


class HTTPChatModel(BaseChatModel):
    """A LangChain chat model over an OpenAI-compatible endpoint, with tool binding."""

    base_url: str
    api_key: SecretStr = SecretStr("sk-test-key-0123456789abcdef")
    model_name: str = "scripted"
    temperature: float | None = None
    max_tokens: int | None = None

    @property
    def _llm_type(self) -> str:
        return "http-chat"

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any) -> Any:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        body: dict[str, Any] = {
            "model": self.model_name,
            "messages": [{"role": _LC_ROLES[m.type], "content": m.content} for m in messages],
        }
        for name in ("temperature", "max_tokens", "logprobs", "top_logprobs"):
            value = kwargs.get(name, getattr(self, name, None))
            if value is not None:
                body[name] = value
        tools = kwargs.get("tools") or []
        if tools:
            function = tools[0]["function"]
            body["response_format"] = _schema_format(function["parameters"], function["name"])
        reply = _post(self.base_url, self.api_key.get_secret_value(), body)
        choice = reply["choices"][0]
        content = choice["message"]["content"]
        usage = reply.get("usage") or {}
        meta = {"model_name": reply.get("model"), "finish_reason": choice.get("finish_reason")}
        if choice.get("logprobs") is not None:
            meta["logprobs"] = choice["logprobs"]
        if tools:
            call = {"name": tools[0]["function"]["name"], "args": json.loads(content), "id": "c1"}
            message = AIMessage(content="", tool_calls=[call], response_metadata=meta)
        else:
            message = AIMessage(content=content, response_metadata=meta)
        if usage:
            message.usage_metadata = {
                "input_tokens": usage["prompt_tokens"],
                "output_tokens": usage["completion_tokens"],
                "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"],
            }
        return ChatResult(generations=[ChatGeneration(message=message)])


class LogprobHTTPChatModel(HTTPChatModel):
    """The model with ``ChatOpenAI``'s ``logprobs`` and ``top_logprobs`` fields."""

    logprobs: bool | None = None
    top_logprobs: int | None = None


class PlainHTTPChatModel(HTTPChatModel):
    """The same model without tool binding: no structured output."""

    bind_tools = BaseChatModel.bind_tools  # type: ignore[assignment]


def _li_body(llm: Any, messages: Sequence[ChatMessage]) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": llm.model_name,
        "messages": [{"role": m.role.value, "content": m.content or ""} for m in messages],
    }
    for name in ("temperature", "max_tokens", "logprobs", "top_logprobs"):
        if getattr(llm, name, None) is not None:
            body[name] = getattr(llm, name)
    return body


def _li_response(reply: dict[str, Any], **extra: Any) -> ChatResponse:
    choice = reply["choices"][0]
    return ChatResponse(
        message=ChatMessage(
            role=MessageRole.ASSISTANT, content=choice["message"]["content"], **extra
        ),
        raw=reply,
    )


class HTTPLLM(CustomLLM):
    """A LlamaIndex LLM over an OpenAI-compatible endpoint (chat, no function calling)."""

    base_url: str
    api_key: SecretStr = SecretStr("sk-test-key-0123456789abcdef")
    model_name: str = "scripted"
    temperature: float | None = None
    max_tokens: int | None = None

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name=self.model_name, is_chat_model=True)

    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        body = _li_body(self, messages)
        return _li_response(_post(self.base_url, self.api_key.get_secret_value(), body))

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        reply = self.chat([ChatMessage(role=MessageRole.USER, content=prompt)])
        return CompletionResponse(text=reply.message.content or "", raw=reply.raw)

    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        yield self.complete(prompt)


class ToolHTTPLLM(FunctionCallingLLM, HTTPLLM):
    """A LlamaIndex function-calling LLM over an OpenAI-compatible endpoint.

    The tool's parameters go out as ``response_format`` ``json_schema``; the JSON reply comes
    back as the tool call.
    """

    model_name: str = "scripted-tools"

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(
            model_name=self.model_name, is_chat_model=True, is_function_calling_model=True
        )

    def _prepare_chat_with_tools(
        self, tools: Sequence[Any], user_msg: Any = None, chat_history: Any = None, **kwargs: Any
    ) -> dict[str, Any]:
        return {"messages": list(chat_history or []), "tools": [t.metadata for t in tools]}

    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        body = _li_body(self, messages)
        tools = kwargs.get("tools") or []
        if tools:
            body["response_format"] = _schema_format(tools[0].get_parameters_dict(), tools[0].name)
        reply = _post(self.base_url, "sk-none", body)
        if not tools:
            return _li_response(reply)
        call = {"name": tools[0].name, "args": reply["choices"][0]["message"]["content"]}
        usage = reply.get("usage") or {}
        return ChatResponse(
            message=ChatMessage(
                role=MessageRole.ASSISTANT,
                content="",
                additional_kwargs={"tool_call": call, **usage},
            ),
            raw=reply,
        )

    def get_tool_calls_from_response(
        self, response: ChatResponse, error_on_no_tool_call: bool = True, **kwargs: Any
    ) -> list[ToolSelection]:
        call = response.message.additional_kwargs.get("tool_call")
        if not call:
            return []
        return [
            ToolSelection(
                tool_id="c1", tool_name=call["name"], tool_kwargs=json.loads(call["args"])
            )
        ]


class LogprobHTTPLLM(HTTPLLM):
    """The LLM with LlamaIndex ``OpenAI``'s ``logprobs`` and ``top_logprobs`` fields."""

    logprobs: bool | None = None
    top_logprobs: int | None = None
