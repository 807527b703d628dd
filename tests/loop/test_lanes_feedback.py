"""The free feedback lane: its query, when it is offered, and which loops search it."""

from __future__ import annotations

import pytest

from corrective_rag.errors import ConfigError
from corrective_rag.loop.feedback import feedback_query
from corrective_rag.loop.lanes import Lanes, lane_queries
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.rewrite.llm import LLMRewriter
from corrective_rag.rewrite.local import LocalRewriter
from corrective_rag.testing import ListRetriever, ScriptedEvaluator, ScriptedRewriter
from corrective_rag.types import (
    Document,
    Judged,
    Relevance,
    Rewrite,
    RewriteRequest,
    Usage,
    Verdict,
)

QUESTION = "How do volcanoes form magma chambers?"
BRIDGE = "Magma chambers beneath Kilauea were mapped by the Hawaiian Volcano Observatory."
GENERIC = "Magma chambers collect molten rock and gases beneath volcanoes over long periods."


def _kept_only(text: str, title: str | None = None) -> RewriteRequest:
    metadata = {"title": title} if title else {}
    document = Document("k", text, metadata)
    kept = Judged(document, Verdict("k", True, Relevance.HIGH, 0.9, 0.9, "on topic"))
    return RewriteRequest(QUESTION, (QUESTION,), (kept,))


def _lane(request: RewriteRequest, rewrite: Rewrite | None = None) -> str | None:
    answer = rewrite or Rewrite("volcanoes magma chambers formation crust", usage=Usage(1))
    return feedback_query(LocalRewriter(), request, answer)


def test_free_feedback_is_offered_when_the_kept_documents_name_a_new_entity() -> None:
    """A name the kept document adds (a bridge to the next hop) becomes the feedback lane."""
    feedback = _lane(_kept_only(BRIDGE))
    assert feedback is not None
    assert "Hawaiian Volcano Observatory" in feedback


def test_free_feedback_is_withheld_when_it_holds_only_generic_terms() -> None:
    """Loose terms from an on-topic abstract search what the question's next hits cover."""
    assert _lane(_kept_only(GENERIC)) is None


def test_free_feedback_is_withheld_when_its_only_name_is_the_kept_documents_own_title() -> None:
    """Searching a kept document's own title finds that document again: no bridge, no lane."""
    title = "Magma Chamber Dynamics"
    text = f"{title}\nMagma chambers collect molten rock and gases beneath volcanoes."
    assert _lane(_kept_only(text, title)) is None
    untitled = _lane(_kept_only(text))
    assert untitled is not None and "Magma Chamber Dynamics" in untitled


def test_free_feedback_is_withheld_after_a_failed_call_or_with_nothing_kept() -> None:
    """A rewrite whose call failed, or a request with nothing kept, gets no feedback query."""
    failed = Rewrite(None, rejected="llm error: 500", usage=Usage(1, failed_calls=1))
    assert _lane(_kept_only(BRIDGE), failed) is None
    assert _lane(RewriteRequest(QUESTION, (QUESTION,), ())) is None


def test_lane_queries_name_each_text_once() -> None:
    """The question, the rewrite and the feedback are lanes; a repeated text is searched once."""
    assert {"question": "q", "rewrite": "r", "feedback": "f"} == lane_queries("q", "r", "f")
    assert {"question": "q", "feedback": "f"} == lane_queries("q", "q", "f")
    assert {"question": "q"} == lane_queries("q", "q", None)


def test_lanes_policy_defaults_to_every_rewriter_but_the_local_one() -> None:
    """Lanes() searches the feedback lane unless the rewriter writes that query already, and
    a model's rewrite by BM25 alone, a LocalRewriter's on both legs."""
    chatless = ScriptedRewriter([])
    assert {"rewrite", "feedback"} == Lanes().searched_lexically(chatless)
    assert {"feedback"} == Lanes().searched_lexically(LocalRewriter())
    assert set() == Lanes(lexical=[]).searched_lexically(chatless)
    assert Lanes().feeds(chatless)
    assert Lanes().feeds(LLMRewriter.__new__(LLMRewriter))
    assert not Lanes().feeds(LocalRewriter())
    assert Lanes(feedback=True).feeds(LocalRewriter())
    assert not Lanes(feedback=False).feeds(chatless)
    with pytest.raises(ConfigError):
        Lanes(feedback="yes")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        Lanes(idf=3)  # type: ignore[arg-type]


CORPUS = [
    Document(
        "k", "Volcanoes form magma chambers under Kilauea, says the Hawaiian Volcano Observatory."
    ),
    Document("o", "The Hawaiian Volcano Observatory monitors eruptions on the Big Island."),
    *(Document(f"v{i}", f"Volcanoes and magma chambers, note {i}.") for i in range(6)),
]


def _run(rewriter: object, **options: object) -> list[tuple[str, ...]]:
    orch = CorrectiveRAGOrchestrator(
        ListRetriever(CORPUS),
        ScriptedEvaluator({"k": 0.9}),
        rewriter,  # type: ignore[arg-type]
        top_k=2,
        max_iterations=3,
        **options,  # type: ignore[arg-type]
    )
    return [r.searched for r in orch.run(QUESTION).history]


def test_a_rewriter_of_ones_own_gets_the_feedback_lane() -> None:
    """Any rewriter's loop searches the kept documents' bridge name in the next iteration."""
    searched = _run(ScriptedRewriter([None, None]))
    assert any("Hawaiian Volcano Observatory" in q for q in searched[1])
    off = _run(ScriptedRewriter([None, None]), lanes=Lanes(feedback=False))
    assert all(len(s) == 1 for s in off)  # the question alone


def test_a_local_rewriter_loop_searches_no_feedback_lane() -> None:
    """LocalRewriter's rewrites are the feedback query: its loop searches two lanes at most."""
    searched = _run(LocalRewriter())
    assert all(len(s) <= 2 for s in searched)
    assert any("Hawaiian Volcano Observatory" in q for q in searched[1])  # as its rewrite
