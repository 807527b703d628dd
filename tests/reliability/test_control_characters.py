"""Questions and rewrites holding terminal escapes, C1 or bidirectional controls are never
searched, locally or on the web: a question is refused, a rewrite rejected."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from corrective_rag.errors import InputError
from corrective_rag.evaluate.cache import VerdictCache
from corrective_rag.evaluate.llm import LLMEvaluator
from corrective_rag.inputs import check_query, control_at
from corrective_rag.llm import prompts
from corrective_rag.llm.client import OpenAIChatClient
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.rewrite.guard import check_rewrite
from corrective_rag.rewrite.llm import LLMRewriter
from corrective_rag.testing import ScriptedLLMServer
from corrective_rag.testing.fakes import ListRetriever, ScriptedEvaluator, ScriptedRewriter
from corrective_rag.testing.hostile_content import CONTROL_QUERY
from corrective_rag.testing.replies import default_reply
from corrective_rag.types import Document

QUESTION = "How do I deepcopy a list in Python?"
CORPUS = [
    Document("copy", "The copy module's deepcopy copies a nested list in Python."),
    Document("bees", "Honey bees make honey from nectar."),
]
CONTROLS = ["\x1b[2J", "\x9b31m", "\u202e", "\u2066", "\u200f", "\x07", "\x7f", "\x08"]


@pytest.mark.parametrize("control", CONTROLS, ids=repr)
def test_a_question_with_a_control_character_is_refused(control):
    """ESC, C1, bidirectional and other C0 controls in a question are an InputError naming it."""
    with pytest.raises(InputError, match=f"U\\+{ord(control[0]):04X}"):
        check_query(f"deepcopy {control} list")
    with pytest.raises(InputError, match="control character"):
        CorrectiveRAGOrchestrator(
            ListRetriever(CORPUS), ScriptedEvaluator({}), ScriptedRewriter([])
        ).run(f"How do I deepcopy {control} a list?")


def test_tabs_and_line_breaks_are_still_text():
    """Whitespace a pasted question holds (tab, newlines, form feed) is not a control here."""
    assert None is control_at("deepcopy\ta list\r\nin Python\x0b\x0c")
    assert "a\tb\nc" == check_query("a\tb\nc")


@pytest.mark.parametrize("control", CONTROLS, ids=repr)
def test_the_drift_guard_rejects_a_rewrite_with_a_control_character(control):
    """check_rewrite names control characters, so every rewriter and proposal is refused."""
    reason = check_rewrite(f"python deepcopy {control} nested list", QUESTION, [])
    assert reason is not None and "control characters" in reason


def _reply(query: str, *, propose: bool):
    def reply(request: Mapping[str, Any]) -> str:
        system = request["messages"][0]["content"]
        if system.startswith(prompts.REWRITER_SYSTEM[:40]):
            return json.dumps({"query": query, "rationale": "broaden"})
        text = default_reply(request)
        if propose and system.startswith(prompts.GRADER_SYSTEM[:40]):
            body = json.loads(text)
            body["next_query"] = query
            body["lacking"] = "the nested case"
            text = json.dumps(body)
        return text

    return reply


@pytest.mark.parametrize("propose", [False, True], ids=["rewriter call", "grader proposal"])
def test_a_rewrite_with_escapes_and_an_override_is_never_searched(propose):
    """'\\x1b[2Jdeepcopy\\u202e list' from the model reaches neither the store nor the web."""
    local, web = ListRetriever(CORPUS), ListRetriever([Document("w", "Nothing about it.")])
    with ScriptedLLMServer(reply=_reply(CONTROL_QUERY, propose=propose)) as server:
        chat = OpenAIChatClient(server.base_url, "scripted")
        orch = CorrectiveRAGOrchestrator(
            local,
            LLMEvaluator(chat, cache=VerdictCache(0), propose=propose),
            LLMRewriter(chat),
            fallback=web,
            top_k=1,
            max_iterations=3,
            min_relevant=5,
        )
        result = orch.run(QUESTION)
    searched = [*local.queries, *web.queries]
    assert [] == [q for q in searched if control_at(q) is not None]
    rewrites = [r.rewrite for r in result.history if r.rewrite is not None]
    assert rewrites and all(r.query is None or control_at(r.query) is None for r in rewrites)
