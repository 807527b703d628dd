"""The offline judge through the loop: its missing, its cap and the default policy (issue 32)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from corrective_rag.evaluate.local import DEFAULT_WEIGHTS, LocalEvaluator, verdict_score
from corrective_rag.evaluate.policy import Decision, decide, get_policy
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.models.embeddings import SentenceTransformerEmbedder
from corrective_rag.rewrite.local import LocalRewriter
from corrective_rag.store.hybrid import HybridStore
from corrective_rag.types import HIGH_FROM, Document, Judged, Relevance, StopReason, Verdict

TEXTS = [
    "Ganymede, a moon of Jupiter, is the largest moon in the Solar System.",
    "Ganymede is larger than the planet Mercury and has its own magnetic field.",
    "Callisto is the second-largest moon of Jupiter and is heavily cratered.",
    "Io is a volcanic moon of Jupiter with hundreds of active volcanoes.",
    "Europa, a moon of Jupiter, has an ice crust over a salty ocean.",
    "Titan is the largest moon of Saturn and the second-largest in the Solar System.",
    "Jupiter is the largest planet in the Solar System, a gas giant.",
    "The Moon is Earth's only natural satellite.",
    "Triton is the largest moon of Neptune and orbits backwards.",
    "Bees turn flower nectar into honey.",
]
WHICH = "Which moon is the largest moon of Jupiter?"
NAME = "What is the name of the largest moon of Jupiter?"
NASA = "What is the name of the largest moon of Jupiter, per NASA?"


@pytest.fixture(scope="module")
def store(embedder: SentenceTransformerEmbedder) -> Iterator[HybridStore]:
    with HybridStore.in_memory(embedder=embedder) as store:
        store.add([Document(f"d{i}", text) for i, text in enumerate(TEXTS)])
        yield store


def _loop(
    store: HybridStore, *, cap: int | None = None, top_k: int = 2
) -> CorrectiveRAGOrchestrator:
    weights = replace(DEFAULT_WEIGHTS, cap=cap)
    return CorrectiveRAGOrchestrator(
        store,
        LocalEvaluator(store.embedder, idf=store.idf, weights=weights),
        LocalRewriter(idf=store.idf),
        max_iterations=5,
        top_k=top_k,
    )


def test_a_question_word_no_document_holds_does_not_block_the_stop(store: HybridStore) -> None:
    """'What is the name of ...' and '..., per NASA?' stop as 'Which moon ...' does (no cap)."""
    loop = _loop(store)
    which, name, nasa = (loop.run(q) for q in (WHICH, NAME, NASA))
    assert StopReason.ITERATION_CAP is not which.stop_reason
    assert [which.stop_reason] * 2 == [name.stop_reason, nasa.stop_reason]
    assert [which.kept_ids] * 2 == [name.kept_ids, nasa.kept_ids]


def test_the_offline_judge_says_nothing_is_missing(store: HybridStore) -> None:
    """The offline judge cannot tell what is unanswered: missing is empty, the reasoning names
    the question words a document lacks."""
    judge = LocalEvaluator(store.embedder, idf=store.idf)
    verdicts = judge.evaluate(NASA, [Document("g", TEXTS[0])]).verdicts
    assert [()] == [v.missing for v in verdicts]
    assert "lacks" in verdicts[0].reasoning and "nasa" in verdicts[0].reasoning


@pytest.mark.parametrize("cap", [1, 2])
@pytest.mark.parametrize("question", [WHICH, NAME])
def test_judge_cap_holds_per_run_and_ends_it(store: HybridStore, cap: int, question: str) -> None:
    """With one document judged per iteration, cap N keeps at most N and the run stops there."""
    result = _loop(store, cap=cap, top_k=1).run(question)
    relevant = [v.document_id for r in result.history for v in r.verdicts if v.relevant]
    assert len(result.kept) <= cap
    assert len(relevant) <= cap
    assert result.stop_reason in (StopReason.ENOUGH_RELEVANT, StopReason.KEPT_UNCONFIDENT)
    assert f"keeps at most {cap} documents" in result.stop_detail
    assert result.history[-1].kept_ids  # it stopped in the iteration that filled the cap


def test_judge_cap_counts_earlier_relevant_verdicts(store: HybridStore) -> None:
    """evaluate_in_context under cap 1: an earlier relevant verdict leaves no slot for the batch."""
    judge = LocalEvaluator(store.embedder, idf=store.idf, weights=replace(DEFAULT_WEIGHTS, cap=1))
    first = Document("g", TEXTS[0])
    (before,) = judge.evaluate(WHICH, [first]).verdicts
    assert before.relevant is True
    later = judge.evaluate_in_context(WHICH, [Document("g2", TEXTS[1])], (Judged(first, before),))
    assert [False] == [v.relevant for v in later.verdicts]
    assert later.verdicts[0].score is not None and later.verdicts[0].score < 0.5


@given(st.floats(DEFAULT_WEIGHTS.threshold, 1.0))
def test_general_keeps_the_offline_judges_relevant_verdicts_from_its_floor(
    probability: float,
) -> None:
    """In the loop, `general` keeps the offline judge's relevant verdicts whose confidence (its
    probability) reaches the policy's 0.3 floor, and drops the rest (measured: without the floor
    the loop fell behind single shot on Cranfield; docs/offline-judge.md)."""
    score = round(verdict_score(probability, DEFAULT_WEIGHTS.threshold), 4)
    confidence = round(probability, 4)
    verdict = Verdict("d", True, Relevance.HIGH, score, confidence)
    assert score >= HIGH_FROM
    expected = Decision.KEEP if confidence >= 0.3 else Decision.DROP
    assert expected is decide(verdict, get_policy("general"))
