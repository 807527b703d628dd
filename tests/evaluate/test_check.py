"""The judge check: pairs with known answers tell a judge that can judge from one that cannot."""

from __future__ import annotations

import pytest

from corrective_rag.calls import Retries
from corrective_rag.errors import ConfigError
from corrective_rag.evaluate.check.pairs import CHECK_PAIRS
from corrective_rag.evaluate.check.plain import MIN_AGREEMENT, check_judge
from corrective_rag.evaluate.llm import LLMEvaluator
from corrective_rag.llm.client import OpenAIChatClient
from corrective_rag.testing import Fault, ScriptedLLMServer
from corrective_rag.testing.fakes import ScriptedEvaluator
from corrective_rag.testing.judges import all_relevant_judge, faithful_judge, noisy_judge


def _evaluator(server: ScriptedLLMServer) -> LLMEvaluator:
    return LLMEvaluator(
        OpenAIChatClient(server.base_url, "scripted", retries=Retries(max_retries=0))
    )


def test_the_pairs_are_a_fair_test():
    """Ids are unique; every question has a relevant document, a near miss and an off-topic one;
    a judge calling nothing relevant agrees on less than the threshold."""
    ids = [p.document.id for p in CHECK_PAIRS]
    assert len(ids) == len(set(ids))
    questions = {p.question for p in CHECK_PAIRS}
    for question in questions:
        group = [p for p in CHECK_PAIRS if p.question == question]
        assert any(p.relevant for p in group)
        assert any(p.near_miss and not p.relevant for p in group)
        assert any(not p.relevant and not p.near_miss for p in group)
    assert sum(not p.relevant for p in CHECK_PAIRS) / len(CHECK_PAIRS) < MIN_AGREEMENT


def test_a_faithful_judge_passes_with_its_figures():
    """Against a server that judges by the labels, LLMEvaluator.check() agrees on every pair,
    calls the labels' share relevant, no near miss, and counts calls, seconds and tokens."""
    with ScriptedLLMServer(reply=faithful_judge) as server:
        result = _evaluator(server).check()
    assert result.passed, result.problems
    assert 1.0 == result.agreement
    assert result.expected_relevant_share == result.relevant_share
    assert 0.0 == result.near_miss_relevant_share
    assert 0.0 == result.ungraded_share
    assert len({p.question for p in CHECK_PAIRS}) == result.calls
    assert result.tokens_per_call > 0
    assert result.seconds_per_call > 0


def test_a_judge_that_calls_everything_relevant_fails_and_says_why():
    """The all-relevant judge of the field fails on both counts: it keeps everything, and it
    agrees with the known answers only where a document is relevant."""
    with ScriptedLLMServer(reply=all_relevant_judge) as server:
        result = _evaluator(server).check()
    assert not result.passed
    assert 1.0 == result.relevant_share
    assert 1.0 == result.near_miss_relevant_share
    assert result.expected_relevant_share == pytest.approx(result.agreement)
    assert "keep everything" in result.problems[0]
    assert "agreed" in result.problems[1]


def test_a_noisy_judge_fails_on_agreement_and_a_little_noise_passes():
    """Wrong on 40% of the pairs it fails the 0.7 agreement; wrong on 10% it passes."""
    with ScriptedLLMServer(reply=noisy_judge(0.4)) as server:
        noisy = _evaluator(server).check()
    with ScriptedLLMServer(reply=noisy_judge(0.1)) as server:
        slightly = _evaluator(server).check()
    assert not noisy.passed
    assert noisy.agreement < MIN_AGREEMENT
    assert 1 == len(noisy.problems)
    assert noisy.problems[0].startswith("it agreed with the known answers on")
    assert slightly.passed, slightly.problems
    assert 1 - round(0.1 * len(CHECK_PAIRS)) / len(CHECK_PAIRS) == pytest.approx(slightly.agreement)


def test_a_judge_whose_replies_cannot_be_read_fails_with_the_reason():
    """Unreadable replies leave every pair ungraded (never counted as a decision): the check
    fails, naming the first error."""
    with ScriptedLLMServer(
        faults=lambda request, attempt: Fault.content("I think they are all fine.")
    ) as server:
        result = _evaluator(server).check()
    assert 1.0 == result.ungraded_share
    assert 0.0 == result.agreement
    assert result.problems[0].startswith("no pair could be graded")


def test_check_leaves_the_evaluators_cache_alone():
    """check() grades afresh: a second check calls the model again, and the evaluator's own
    cache is not filled with the check's verdicts."""
    with ScriptedLLMServer(reply=faithful_judge) as server:
        evaluator = _evaluator(server)
        first = evaluator.check()
        second = evaluator.check()
    assert first.calls == second.calls > 0
    assert 0 == len(evaluator.cache._data)


def test_check_judge_takes_any_evaluator_and_refuses_nonsense():
    """The check runs on any Evaluator (a scripted one without LLM calls reports seconds per
    question); no pairs or an agreement threshold outside (0, 1] is refused."""
    result = check_judge(ScriptedEvaluator(lambda q, d: 1.0, documents_per_call=None))
    assert 0 == result.calls
    assert result.seconds_per_call > 0
    assert not result.passed
    with pytest.raises(ConfigError):
        check_judge(ScriptedEvaluator(lambda q, d: 1.0), pairs=())
    with pytest.raises(ConfigError):
        check_judge(ScriptedEvaluator(lambda q, d: 1.0), min_agreement=1.5)
    with pytest.raises(ConfigError):
        check_judge(object())  # type: ignore[arg-type]


def test_ungraded_pairs_do_not_hide_a_judge_that_calls_everything_relevant():
    """A judge that leaves a third of the pairs ungraded and calls every other one relevant
    (as SmolLM2-135M did: 24 graded, all relevant) is caught keeping everything: the share
    called relevant is of the pairs it graded."""
    ungraded = {p.document.id for p in CHECK_PAIRS[::3]}
    judge = ScriptedEvaluator(lambda q, d: None if d.id in ungraded else 1.0)
    result = check_judge(judge)
    assert 1.0 == result.relevant_share
    assert len(ungraded) / len(CHECK_PAIRS) == pytest.approx(result.ungraded_share)
    assert "keep everything" in result.problems[0]


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), True, "5"])
def test_max_seconds_must_be_a_positive_number_or_none(bad):
    """A deadline that is not a positive finite number is refused before any call."""
    with pytest.raises(ConfigError):
        check_judge(ScriptedEvaluator({}), max_seconds=bad)


class _UntilTheDeadline(ScriptedEvaluator):
    """An evaluator whose call waits out the enclosing scope's deadline, then times out."""

    def __init__(self) -> None:
        super().__init__({})
        self.calls = 0

    def evaluate(self, question, documents):
        import threading
        import time

        from corrective_rag.calls import scope
        from corrective_rag.errors import LLMTimeoutError

        self.calls += 1
        end = scope.deadline()
        assert end is not None, "the check gave its calls no deadline"
        threading.Event().wait(max(0.0, end - time.monotonic()))
        raise LLMTimeoutError("timed out: the run's deadline passed")


def test_the_checks_deadline_ends_it_and_the_questions_left_are_not_asked():
    """One deadline bounds the whole check: the call in flight at the deadline is the last one
    asked, every pair is ungraded, the deadline is the first problem, and the time reported is
    the time measured (at least the deadline)."""
    judge = _UntilTheDeadline()
    result = check_judge(judge, max_seconds=0.2)
    assert 1 == judge.calls
    assert 1.0 == result.ungraded_share
    assert result.problems[0].startswith("the check's deadline of 0.2 s passed")
    assert "(1 of 8 questions asked)" in result.problems[0]
    assert result.seconds >= 0.2
    assert result.seconds_per_call > 0


def test_the_default_deadline_is_one_number_everywhere():
    """LLMEvaluator.check and ``judge-check --deadline`` default to CHECK_SECONDS."""
    import inspect

    from corrective_rag.cli.main import build_parser
    from corrective_rag.evaluate.check.plain import CHECK_SECONDS

    assert CHECK_SECONDS == inspect.signature(LLMEvaluator.check).parameters["max_seconds"].default
    args = build_parser().parse_args(["judge-check", "--llm-url", "http://h/v1", "--model", "m"])
    assert CHECK_SECONDS == args.deadline
