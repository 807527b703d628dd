import itertools

import pytest

from corrective_rag.errors import ConfigError
from corrective_rag.evaluate.policy import get_policy
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.loop.refine import recompose, refine, split_strips
from corrective_rag.testing.fakes import (
    ListRetriever,
    ScriptedEvaluator,
    ScriptedGenerator,
    ScriptedRewriter,
)
from corrective_rag.types import Document

DOC = Document(
    "d1",
    "Ganymede is the largest moon.  It orbits Jupiter!\n\nTitan is second? Yes (it is).",
)


def mentions_ganymede(question: str, doc: Document) -> float:
    return 0.9 if "Ganymede" in doc.text or "Jupiter" in doc.text else 0.1


def test_strip_offsets_point_back_into_the_source() -> None:
    """Every strip span slices the source to a trimmed sentence, in order, without overlap."""
    spans = split_strips(DOC)
    pieces = [DOC.text[s:e] for s, e in spans]
    assert [
        "Ganymede is the largest moon.",
        "It orbits Jupiter!",
        "Titan is second?",
        "Yes (it is).",
    ] == pieces
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))


def test_windows_group_sentences() -> None:
    """With two sentences per strip, strips cover pairs of sentences."""
    first_end = DOC.text.index("Jupiter!") + len("Jupiter!")
    expected = [(0, first_end), (DOC.text.index("Titan"), len(DOC.text))]
    assert expected == split_strips(DOC, sentences=2)
    with pytest.raises(ConfigError):
        split_strips(DOC, sentences=0)


def test_refine_keeps_relevant_strips_only() -> None:
    """Only strips the policy keeps survive, with their scores and offsets."""
    evaluator = ScriptedEvaluator(mentions_ganymede)
    result = refine("largest moon?", [DOC], evaluator, get_policy("general"))
    kept = [s.text for s in result.strips]
    assert ["Ganymede is the largest moon.", "It orbits Jupiter!"] == kept
    assert all(DOC.text[s.start : s.end] == s.text for s in result.strips)
    assert 4 == len(result.verdicts)
    assert 4 == result.usage.llm_calls


def test_refine_respects_a_strip_cap() -> None:
    """A strip cap (from the budget) limits what is sent to the evaluator."""
    evaluator = ScriptedEvaluator(mentions_ganymede)
    result = refine("q", [DOC], evaluator, get_policy("general"), max_strips=1)
    assert 1 == len(evaluator.evaluated)
    assert 1 == len(result.strips)


def test_recompose_joins_strips_under_the_source_id() -> None:
    """Recomposed documents keep the source id so citations still point at real documents."""
    result = refine("q", [DOC], ScriptedEvaluator(mentions_ganymede), get_policy("general"))
    (doc,) = recompose(result.strips, [DOC])
    assert "d1" == doc.id
    assert "Ganymede is the largest moon. ... It orbits Jupiter!" == doc.text


def test_orchestrator_refines_and_generates_from_strips() -> None:
    """With refine=True the generator gets the strips, and refinement usage is its own phase."""
    generator = ScriptedGenerator(lambda q, docs: docs[0].text)
    orch = CorrectiveRAGOrchestrator(
        ListRetriever([DOC]),
        ScriptedEvaluator(mentions_ganymede),
        ScriptedRewriter([]),
        generator=generator,
        refine=True,
        min_relevant=1,
    )
    result = orch.run("Which is the largest moon?")
    assert 2 == len(result.strips)
    assert result.answer is not None
    assert "Ganymede is the largest moon. ... It orbits Jupiter!" == result.answer.text
    assert 4 == result.usage.refinement.llm_calls
