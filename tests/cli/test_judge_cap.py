"""--judge-cap: the offline judge held to a number of documents per question."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

from corrective_rag.cli.main import build_parser
from corrective_rag.cli.options import options
from corrective_rag.cli.wiring import Options, _components
from corrective_rag.errors import ConfigError
from corrective_rag.evaluate.local import DEFAULT_WEIGHTS, LocalEvaluator
from corrective_rag.evaluate.policy import get_policy
from corrective_rag.loop.orchestrator import CorrectiveRAGOrchestrator
from corrective_rag.testing.fakes import ListRetriever
from corrective_rag.types import Document

QUESTION = "How do bees make honey from nectar?"
DOCS = [
    Document("a", "Honey bees collect nectar from flowers and turn it into honey in the hive."),
    Document("b", "Bees make honey from nectar; the hive stores honey in wax combs."),
    Document("c", "Honey is made by bees from flower nectar, stored in the hive."),
    Document("d", "The stock market closed lower on Tuesday after bank shares fell."),
    Document("e", "A recipe for tomato soup with basil and cream."),
]


def _options(*flags: str) -> Options:
    return options(build_parser().parse_args(["run", "q", *flags]))


def test_the_cap_reaches_the_offline_judge_and_lowers_min_relevant() -> None:
    """With a cap of 2 and no --min-relevant, the run stops on 2 kept, not the policy's 3."""
    assert get_policy("general").min_relevant == 3
    opts = _options("--judge-cap", "2")
    assert (2, None) == (opts.judge_cap, opts.min_relevant)
    store = SimpleNamespace(embedder=None, idf=None)
    evaluator, rewriter = _components(opts, store, None)
    assert isinstance(evaluator, LocalEvaluator)
    assert 2 == evaluator.weights.cap
    retriever = ListRetriever([Document("d", "text")])
    assert 2 == CorrectiveRAGOrchestrator(retriever, evaluator, rewriter).policy.min_relevant
    uncapped, _ = _components(Options(), store, None)
    assert None is uncapped.weights.cap
    assert 1 == _options("--judge-cap", "4", "--min-relevant", "1").min_relevant


def test_a_min_relevant_the_cap_cannot_reach_is_refused() -> None:
    with pytest.raises(ConfigError, match="--min-relevant 3 cannot be reached"):
        _options("--judge-cap", "2", "--min-relevant", "3")


def test_the_cap_is_refused_with_an_llm_judge() -> None:
    with pytest.raises(ConfigError, match="--judge-cap holds the offline judge"):
        _options("--judge-cap", "2", "--llm-url", "http://127.0.0.1:9/v1", "--model", "m")


@pytest.mark.parametrize("value", ["0", "-1", "two"])
def test_a_cap_that_is_not_a_positive_count_is_a_usage_error(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "q", "--judge-cap", value])
    assert "--judge-cap" in capsys.readouterr().err


def test_a_capped_judge_keeps_no_more_than_the_cap() -> None:
    """Three documents on the question: kept all uncapped, one with a cap of 1."""
    free = LocalEvaluator(None).evaluate(QUESTION, DOCS)
    capped = LocalEvaluator(None, weights=replace(DEFAULT_WEIGHTS, cap=1)).evaluate(QUESTION, DOCS)
    assert sum(bool(v.relevant) for v in free.verdicts) >= 3
    assert 1 == sum(bool(v.relevant) for v in capped.verdicts)
