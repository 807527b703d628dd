"""A judge held to N documents a question and the stop rule's min_relevant agree."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

from corrective_rag.errors import ConfigError
from corrective_rag.evaluate.local import DEFAULT_WEIGHTS, LocalEvaluator
from corrective_rag.evaluate.policy import get_policy
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.loop.stopping import within_cap
from corrective_rag.testing.fakes import ListRetriever, ScriptedRewriter
from corrective_rag.types import Document

GENERAL = get_policy("general")  # min_relevant 3


def test_a_default_min_relevant_is_lowered_to_the_cap_and_a_given_one_refused() -> None:
    capped = SimpleNamespace(keeps_at_most=2)
    assert 2 == within_cap(GENERAL, capped, given=False).min_relevant
    with pytest.raises(ConfigError, match="min_relevant 3 is more than the evaluator keeps"):
        within_cap(GENERAL, capped, given=True)
    assert GENERAL is within_cap(GENERAL, SimpleNamespace(keeps_at_most=3), given=True)
    assert GENERAL is within_cap(GENERAL, SimpleNamespace(keeps_at_most=None), given=False)
    assert GENERAL is within_cap(GENERAL, SimpleNamespace(keeps_at_most=True), given=False)
    assert GENERAL is within_cap(GENERAL, object(), given=False)


def test_the_orchestrator_reads_a_capped_local_judge() -> None:
    judge = LocalEvaluator(None, weights=replace(DEFAULT_WEIGHTS, cap=2))
    assert 2 == judge.keeps_at_most
    assert None is LocalEvaluator(None).keeps_at_most
    parts = (ListRetriever([Document("d", "text")]), judge, ScriptedRewriter([]))
    assert 2 == CorrectiveRAGOrchestrator(*parts).policy.min_relevant
    assert 1 == CorrectiveRAGOrchestrator(*parts, min_relevant=1).policy.min_relevant
    with pytest.raises(ConfigError, match="never stop on enough"):
        CorrectiveRAGOrchestrator(*parts, min_relevant=3)
