"""What a server that enforces a JSON schema can send: a reply cut to the schema it was sent.

A server that honours ``response_format`` ``json_schema`` (OpenAI's strict mode, llama.cpp's and
vLLM's grammars) cannot write a key the schema forbids nor a string past its ``maxLength``. The
scripted server fits its replies to the request's schema with :func:`fit_to_schema`, so that a
test sees what such a server sends, not what the package would like to read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["fit_reply", "fit_to_schema", "request_schema"]


def fit_to_schema(value: Any, schema: Mapping[str, Any]) -> Any:
    """``value`` with what ``schema`` forbids taken out (pure).

    Keys not in ``properties`` go where ``additionalProperties`` is ``false``; strings are cut
    to ``maxLength``; arrays to ``maxItems``; both recursively. Nothing is added: a required
    key the value lacks stays missing (a fake must not invent what a model did not say).
    """
    if isinstance(value, dict):
        properties = schema.get("properties")
        props: Mapping[str, Any] = properties if isinstance(properties, Mapping) else {}
        closed = schema.get("additionalProperties") is False
        fitted: dict[str, Any] = {}
        for key, item in value.items():
            if key in props:
                fitted[key] = fit_to_schema(item, props[key])
            elif not closed:
                fitted[key] = item
        return fitted
    if isinstance(value, list):
        items = schema.get("items")
        most = schema.get("maxItems")
        kept = value[:most] if isinstance(most, int) else value
        if isinstance(items, Mapping):
            return [fit_to_schema(item, items) for item in kept]
        return list(kept)
    if isinstance(value, str):
        most = schema.get("maxLength")
        return value[:most] if isinstance(most, int) else value
    return value


def request_schema(request: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The JSON schema a chat request asks its reply to follow (``response_format``), or None."""
    fmt = request.get("response_format")
    if not isinstance(fmt, Mapping) or fmt.get("type") != "json_schema":
        return None
    spec = fmt.get("json_schema")
    schema = spec.get("schema") if isinstance(spec, Mapping) else None
    return schema if isinstance(schema, Mapping) else None


def fit_reply(text: str, request: Mapping[str, Any]) -> str:
    """``text`` fitted to the request's schema when it is a JSON object and one was sent."""
    schema = request_schema(request)
    if schema is None:
        return text
    try:
        value = json.loads(text)
    except ValueError:
        return text  # not JSON: a model's prose; left for the client to refuse
    if not isinstance(value, dict):
        return text
    return json.dumps(fit_to_schema(value, schema))
