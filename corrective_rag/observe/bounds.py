"""The bounds on span attributes: every text, list and JSON value a span carries is cut to fit.

Every attribute is bounded, contents captured or not: a text holds at most
:data:`MAX_ATTRIBUTE_CHARS` characters (a longer one is cut, ending in ``…[cut: N chars]`` with
its whole length), a list at most :data:`MAX_ATTRIBUTE_ITEMS` items (a sibling
``<name>_original_length`` says how many it had), the numbered items of a span at most
:data:`MAX_NUMBERED_ITEMS`, and the messages' JSON is cut message by message so it stays JSON.
An exporter refuses an oversized batch whole, taking other runs' spans with it: one long
question must not do that. :mod:`corrective_rag.observe.spans` makes the spans; docs/tracing.md
has the table of bounds.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from corrective_rag.errors import CUT_SPAN, cut_text

__all__ = [
    "bounded_attributes",
    "cut_attribute",
    "fitted_json",
    "json_value",
    "shared_texts",
    "shown_ids",
]

# The bounds on one attribute. 8,192 characters hold a grading prompt of a few documents whole
# and keep a span of a dozen captured attributes near 100 kB, far under the 4 MiB a gRPC
# collector takes per batch by default (a 1 MiB question once made 9.4 MB of attributes in one
# run, and the refused batch lost the spans of the runs beside it). 64 items hold any kept or
# hit list a loop makes (top_k is at most 50 in the CLI) with room to spare.
MAX_ATTRIBUTE_CHARS = 8192
MAX_ATTRIBUTE_ITEMS = 64
# Items spread over numbered attributes (a search's documents, a call's messages, as
# OpenInference flattens them): at most 32 per span, as the SDK keeps 128 attributes a span by
# default and drops the oldest past that (the span's kind and operation among them); 32
# documents of 3 attributes leave room for the rest. Their texts share one budget, two
# attributes' worth (a grading prompt of several documents whole).
MAX_NUMBERED_ITEMS = 32
SHARED_CHARS = 2 * MAX_ATTRIBUTE_CHARS


def cut_attribute(text: str, limit: int = MAX_ATTRIBUTE_CHARS) -> str:
    """``text`` cut to at most ``limit`` characters, ending in a marker with its whole length.

    A text within the limit comes back whole; a longer one as its start and
    ``…[cut: 1048576 chars]``, ``limit`` characters in all.
    """
    return cut_text(text, limit, CUT_SPAN)


def bounded_attributes(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """The attributes to set: ``None`` dropped, texts and lists cut to the bounds.

    A list cut to :data:`MAX_ATTRIBUTE_ITEMS` items gets a sibling ``<name>_original_length``
    (not ``<name>.original_length``: readers such as Phoenix nest dotted names, and a name
    cannot be both a value and a parent).
    """
    out: dict[str, Any] = {}
    for key, value in attributes.items():
        if isinstance(value, str):
            out[key] = cut_attribute(value)
        elif isinstance(value, (list, tuple)):
            if len(value) > MAX_ATTRIBUTE_ITEMS:
                out[key + "_original_length"] = len(value)
            items = value[:MAX_ATTRIBUTE_ITEMS]
            out[key] = [cut_attribute(v) if isinstance(v, str) else v for v in items]
        elif value is not None:
            out[key] = value
    return out


def _fair_shares(lengths: Sequence[int], budget: int) -> list[int]:
    """How many characters of each text to keep so that they sum to at most ``budget``.

    Short texts stay whole; the long ones share what is left equally (water-filling), so a
    one-line system message survives beside a 1 MiB user message.
    """
    shares = [0] * len(lengths)
    left = max(0, budget)
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    for n, i in enumerate(order):
        shares[i] = min(lengths[i], left // (len(order) - n))
        left -= shares[i]
    return shares


def fitted_json(texts: Sequence[str], build: Callable[[list[str]], Any]) -> str:
    """``build(texts)`` as JSON of at most :data:`MAX_ATTRIBUTE_CHARS` characters.

    The texts are cut to fit (each cut one ending in the cut marker), so the value stays JSON
    with every text in its place; only escapes past the slack left for them cut the JSON itself.
    """
    text = json.dumps(build(list(texts)), ensure_ascii=False)
    if len(text) <= MAX_ATTRIBUTE_CHARS:
        return text
    frame = len(json.dumps(build([""] * len(texts)), ensure_ascii=False))
    budget = MAX_ATTRIBUTE_CHARS - frame - 32 * len(texts)  # 32: a marker and a few escapes
    shares = _fair_shares([len(t) for t in texts], budget)
    fitted = [t if n >= len(t) else cut_attribute(t, n) for t, n in zip(texts, shares, strict=True)]
    return cut_attribute(json.dumps(build(fitted), ensure_ascii=False))


def shared_texts(texts: Sequence[str], budget: int = SHARED_CHARS) -> list[str]:
    """``texts`` cut (with the marker) so that together they hold about ``budget`` characters."""
    shares = _fair_shares([len(t) for t in texts], budget - 32 * len(texts))
    return [
        t if n >= len(t) else cut_attribute(t, max(n, 32))
        for t, n in zip(texts, shares, strict=True)
    ]


def json_value(fields: Mapping[str, Any], texts: Mapping[str, str | None]) -> str:
    """``fields`` and the non-None ``texts`` as one JSON object within the text bound."""
    given = {k: v for k, v in texts.items() if v is not None}
    names = list(given)
    return fitted_json(
        list(given.values()), lambda ts: {**fields, **dict(zip(names, ts, strict=True))}
    )


def shown_ids(ids: Sequence[str]) -> list[str]:
    """Ids for an output value: as many as a list attribute holds."""
    return [cut_attribute(i, 256) for i in ids[:MAX_ATTRIBUTE_ITEMS]]
