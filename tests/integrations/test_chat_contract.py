"""The chat-model contract (corrective_rag.testing.chat_contract) holds for the package's client
and both framework adapters, and a chat model that ignores it fails it."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
import requests
from http_models import (
    HTTPLLM,
    HTTPChatModel,
    LogprobHTTPChatModel,
    LogprobHTTPLLM,
    PlainHTTPChatModel,
    ToolHTTPLLM,
)

from corrective_rag.calls import Retries
from corrective_rag.errors import LLMResponseError
from corrective_rag.integrations.langchain import LangChainChatModel
from corrective_rag.integrations.llamaindex import LlamaIndexChatModel
from corrective_rag.llm.client import OpenAIChatClient
from corrective_rag.protocols import ChatModel
from corrective_rag.testing.chat_contract import ChatModelContract, check_chat_model
from corrective_rag.types import ChatReply, Usage


class TestOpenAIChatClient(ChatModelContract):
    def make_model(self, base_url: str, api_key: str) -> ChatModel:
        return OpenAIChatClient(base_url, "scripted", api_key=api_key)


class TestLangChainChatModel(ChatModelContract):
    def make_model(self, base_url: str, api_key: str) -> ChatModel:
        return LangChainChatModel(HTTPChatModel(base_url=base_url, api_key=api_key))


class TestLangChainChatModelWithLogprobFields(ChatModelContract):
    def make_model(self, base_url: str, api_key: str) -> ChatModel:
        return LangChainChatModel(LogprobHTTPChatModel(base_url=base_url, api_key=api_key))


class TestLangChainChatModelBindingLogprobs(ChatModelContract):
    def make_model(self, base_url: str, api_key: str) -> ChatModel:
        model = HTTPChatModel(base_url=base_url, api_key=api_key)
        return LangChainChatModel(model, bind_logprobs=True)


class TestLangChainChatModelWithoutStructuredOutput(ChatModelContract):
    def make_model(self, base_url: str, api_key: str) -> ChatModel:
        return LangChainChatModel(PlainHTTPChatModel(base_url=base_url, api_key=api_key))


class TestLlamaIndexChatModel(ChatModelContract):
    def make_model(self, base_url: str, api_key: str) -> ChatModel:
        return LlamaIndexChatModel(HTTPLLM(base_url=base_url, api_key=api_key))


class TestLlamaIndexChatModelWithLogprobFields(ChatModelContract):
    def make_model(self, base_url: str, api_key: str) -> ChatModel:
        return LlamaIndexChatModel(LogprobHTTPLLM(base_url=base_url, api_key=api_key))


class TestLlamaIndexFunctionCallingChatModel(ChatModelContract):
    def make_model(self, base_url: str, api_key: str) -> ChatModel:
        return LlamaIndexChatModel(ToolHTTPLLM(base_url=base_url, api_key=api_key))


class DeafChatModel:
    """What the contract is there to catch: a plain HTTP call that reads no call scope, trusts
    the server's usage and lets its own exception out with the server's words."""

    def __init__(self, base_url: str, api_key: str) -> None:
        self.base_url, self.api_key = base_url, api_key

    def complete(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        json_schema: Mapping[str, Any] | None = None,
        max_tokens: int | None = None,
        temperature: float = 0.0,
    ) -> ChatReply:
        response = requests.post(
            f"{self.base_url}/chat/completions",
            json={"model": "scripted", "messages": list(messages)},
            headers={"Authorization": f"Bearer {self.api_key}"},
            timeout=60,
        )
        if response.status_code != 200:
            raise RuntimeError(response.text)
        body = json.loads(response.text)
        usage = body.get("usage") or {}
        return ChatReply(
            text=body["choices"][0]["message"]["content"],
            usage=Usage(1, usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)),
        )


def test_a_chat_model_that_ignores_the_contract_fails_it():
    """The deaf model passes the plain reply check and fails each of JSON, usage, errors,
    deadline and cancel: the suite can fail."""
    with pytest.raises(AssertionError) as failure:
        check_chat_model(DeafChatModel, hold_seconds=2.0)
    failed = set(re.findall(r"^(test_\w+):", str(failure.value), re.MULTILINE))
    assert {
        "test_a_json_schema_call_returns_json",
        "test_absurd_usage_is_not_reported",
        "test_a_401_or_403_is_sent_once",
        "test_a_server_error_is_an_llm_error_without_the_key",
        "test_the_scopes_deadline_ends_a_call_in_flight",
        "test_cancelling_the_scope_ends_a_call_in_flight",
        "test_a_cancelled_scope_makes_no_call",
    } == failed


def test_the_package_client_passes_as_a_function_call():
    """check_chat_model, the suite without pytest, passes the package's own client."""
    retries = Retries(max_retries=0)
    check_chat_model(lambda url, key: OpenAIChatClient(url, "s", api_key=key, retries=retries))


class _NoJSONClient:
    """The package's client behind a wrapper that drops ``json_schema``: it never asks for JSON."""

    def __init__(self, base_url: str, api_key: str) -> None:
        self.inner = OpenAIChatClient(base_url, "s", api_key=api_key)

    def complete(
        self, messages: Sequence[Mapping[str, str]], *, json_schema: Any = None, **kw: Any
    ) -> ChatReply:
        return self.inner.complete(messages, **kw)


class _RetryingClient:
    """The package's client behind a wrapper that tries a refused call five times."""

    def __init__(self, base_url: str, api_key: str) -> None:
        self.inner = OpenAIChatClient(base_url, "s", api_key=api_key)

    def complete(self, messages: Sequence[Mapping[str, str]], **kw: Any) -> ChatReply:
        for _ in range(4):
            try:
                return self.inner.complete(messages, **kw)
            except LLMResponseError:
                continue
        return self.inner.complete(messages, **kw)


class _DroppingClient:
    """The package's client behind a wrapper that asks for token probabilities and drops them."""

    def __init__(self, base_url: str, api_key: str) -> None:
        self.inner = OpenAIChatClient(base_url, "s", api_key=api_key)

    def complete(self, messages: Sequence[Mapping[str, str]], **kw: Any) -> ChatReply:
        return dataclasses.replace(self.inner.complete(messages, **kw), logprobs=None)


class _LiteralClient:
    """The package's client behind a wrapper that reads ``logprobs=True`` as OpenAI's default
    ``top_logprobs``, 0: no alternative, from which no judge reads a probability."""

    def __init__(self, base_url: str, api_key: str) -> None:
        self.inner = OpenAIChatClient(base_url, "s", api_key=api_key)

    def complete(
        self, messages: Sequence[Mapping[str, str]], *, logprobs: Any = None, **kw: Any
    ) -> ChatReply:
        return self.inner.complete(messages, logprobs=0 if logprobs is True else logprobs, **kw)


def _failed(make_model: Any) -> set[str]:
    with pytest.raises(AssertionError) as failure:
        check_chat_model(make_model, hold_seconds=2.0)
    return set(re.findall(r"^(test_\w+):", str(failure.value), re.MULTILINE))


def test_a_model_that_never_asks_for_json_fails_the_json_check():
    """A model dropping json_schema gets plain text back and fails the JSON check alone."""
    assert {"test_a_json_schema_call_returns_json"} == _failed(_NoJSONClient)


def test_a_model_that_retries_a_401_fails_the_retry_check():
    """A model sending a refused key five times fails the 401/403 check alone."""
    assert {"test_a_401_or_403_is_sent_once"} == _failed(_RetryingClient)


def test_a_model_that_drops_or_misreads_logprobs_fails_the_logprob_check():
    """A model that asks and drops what came back, or reads True as 0 alternatives, fails the
    token-probability check alone."""
    check = {"test_logprobs_are_asked_as_openai_asks_and_handed_on"}
    assert check == _failed(_DroppingClient)
    assert check == _failed(_LiteralClient)
