"""Can this model judge? Grade pairs with known answers and say whether to trust the verdicts.

A judge that calls every document relevant makes the loop keep everything and gain nothing
(measured: a 0.5B instruct model agreed with the qrels on 0.405 of documents and called all of
them relevant), and nothing tells the user before a long batch. :func:`check_judge` grades the
built-in pairs (:data:`~corrective_rag.evaluate.check.pairs.CHECK_PAIRS`), one evaluate call per
question, and returns the figures with the reasons, if any, not to use the judge. The whole
check has one deadline (:data:`CHECK_SECONDS` by default): a server that drips its replies
cannot hold it for the calls' timeouts added up (8 questions at 60 s each: 483 s measured).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace

from corrective_rag.calls.scope import call_scope
from corrective_rag.calls.settings import finite
from corrective_rag.errors import ConfigError
from corrective_rag.evaluate.check.grading import grade_pairs
from corrective_rag.evaluate.check.pairs import CHECK_PAIRS, CheckPair
from corrective_rag.evaluate.policy import Decision, FilterPolicy, decide, get_policy
from corrective_rag.protocols import Evaluator
from corrective_rag.types import Usage, Verdict

__all__ = [
    "CHECK_SECONDS",
    "MAX_RELEVANT_SHARE",
    "MIN_AGREEMENT",
    "MIN_RELEVANT_SHARE",
    "JudgeCheck",
    "check_judge",
]

MIN_AGREEMENT = 0.7  # above a judge that calls nothing relevant (17 of the 27 pairs: 0.63)
# Of the built-in pairs 10 of 27 (0.37) are relevant: a judge calling 90% of those it graded
# relevant calls most near misses and off-topic documents relevant; one calling under 5% finds
# almost nothing. (SmolLM2-135M under llama.cpp graded 24 of the 27 and called all 24 relevant.)
MAX_RELEVANT_SHARE = 0.9
MIN_RELEVANT_SHARE = 0.05
# Most seconds the whole check may take. A remote model answers the 8 calls in well under a
# minute; SmolLM2-135M on 2 busy cores took 12 minutes (pass more with max_seconds /
# --deadline for such a model). A judge that slow would also stall a long batch.
CHECK_SECONDS = 300.0


@dataclass(frozen=True, slots=True)
class JudgeCheck:
    """What :func:`check_judge` measured, and why the judge fails (empty: it passes).

    Attributes:
        pairs: question-document pairs graded.
        agreement: share of the pairs a run with this judge keeps exactly when relevant (an
            ungraded pair is not right).
        relevant_share: share of the graded pairs a run keeps (the policy's decisions: a judge
            that leaves some pairs ungraded and keeps the rest keeps 1.0).
        expected_relevant_share: share of the pairs that are relevant.
        near_miss_relevant_share: share of the near misses a run keeps.
        ungraded_share: share of the pairs the judge left ungraded (unreadable replies, errors).
        calls: LLM calls made (0 for a judge that makes none).
        seconds_per_call: the calls' mean time: their summed latency, or the check's time
            where that is longer (failed calls report no latency); without LLM calls, seconds
            per question.
        tokens_per_call: prompt plus completion tokens per call (0 without calls).
        problems: why the judge should not be used; empty when it passes.
        seconds: the whole check's time, measured.
        judge: what was graded: kind, call shape and threshold (empty: an evaluator given as
            it is).
        policy: the filter policy whose keep decisions were counted.
    """

    pairs: int
    agreement: float
    relevant_share: float
    expected_relevant_share: float
    near_miss_relevant_share: float
    ungraded_share: float
    calls: int
    seconds_per_call: float
    tokens_per_call: float
    problems: tuple[str, ...]
    seconds: float = 0.0
    judge: str = ""
    policy: str = "general"

    @property
    def passed(self) -> bool:
        """True when there is no reason not to trust the judge's verdicts."""
        return not self.problems


def check_judge(
    evaluator: Evaluator,
    pairs: Sequence[CheckPair] = CHECK_PAIRS,
    *,
    policy: FilterPolicy | None = None,
    min_agreement: float = MIN_AGREEMENT,
    max_seconds: float | None = CHECK_SECONDS,
    cancel: threading.Event | None = None,
) -> JudgeCheck:
    """Grade ``pairs`` with ``evaluator`` (one call per question) and judge the judge.

    What is counted is what a run keeps: each verdict's keep decision under ``policy``
    (:func:`~corrective_rag.evaluate.policy.decide`; ``general`` by default). A call that raises
    (a strict evaluator, a server that went away) leaves that question's pairs ungraded and its
    reason among the problems; it does not end the check. The calls run in one call scope
    ending ``max_seconds`` from now (``None``: no bound but the calls' own) and cancelled by
    ``cancel``: a call in flight then ends, the questions left are not asked, their pairs stay
    ungraded and the deadline is among the problems.

    Raises:
        ConfigError: ``evaluator`` is not an Evaluator, ``pairs`` is empty or repeats a
            document id within a question, ``min_agreement`` is not in (0, 1], or
            ``max_seconds`` is not a positive number or None.
    """
    if not isinstance(evaluator, Evaluator):
        raise ConfigError(f"evaluator must implement Evaluator, got {evaluator!r}")
    if not pairs:
        raise ConfigError("no pairs to check the judge on")
    if not 0 < min_agreement <= 1:
        raise ConfigError(f"min_agreement must be in (0, 1], got {min_agreement!r}")
    if max_seconds is not None and (
        isinstance(max_seconds, bool) or not finite(max_seconds) or max_seconds <= 0
    ):
        raise ConfigError(f"max_seconds must be a positive number or None, got {max_seconds!r}")
    policy = policy or get_policy("general")
    with call_scope(seconds=max_seconds, cancel=cancel):
        grading = grade_pairs(evaluator, pairs)
    judged = list(zip(pairs, grading.verdicts, strict=True))
    result = _result(
        judged,
        grading.usage,
        wall=grading.seconds,
        questions=grading.questions,
        errors=grading.errors,
        min_agreement=min_agreement,
        policy=policy,
    )
    problems = result.problems
    if not grading.complete:
        stopped = (
            "it was interrupted"
            if cancel is not None and cancel.is_set()
            else (f"the check's deadline of {max_seconds:g} s passed after {grading.seconds:.1f} s")
        )
        late = (
            f"{stopped} ({grading.asked} of {grading.questions} questions asked): too slow a "
            "judge, or raise --deadline"
        )
        problems = (late, *problems)
    elif max_seconds is not None and grading.seconds >= max_seconds:
        late = (
            f"the check's deadline of {max_seconds:g} s passed after {grading.seconds:.1f} s "
            f"({grading.asked} of {grading.questions} questions asked): too slow a judge, "
            "or raise it"
        )
        problems = (late, *problems)
    return replace(result, problems=problems, seconds=grading.seconds, policy=policy.name)


def _result(
    judged: Sequence[tuple[CheckPair, Verdict | None]],
    usage: Usage,
    *,
    wall: float,
    questions: int,
    errors: Sequence[str],
    min_agreement: float,
    policy: FilterPolicy,
) -> JudgeCheck:
    n = len(judged)

    def kept(v: Verdict | None) -> bool:
        return v is not None and decide(v, policy) is Decision.KEEP

    graded = [(p, v) for p, v in judged if v is not None and v.graded]
    called = sum(1 for _, v in graded if kept(v))
    near = [(p, v) for p, v in judged if p.near_miss]
    calls = usage.llm_calls
    result = JudgeCheck(
        pairs=n,
        agreement=sum(1 for p, v in graded if kept(v) == p.relevant) / n,
        relevant_share=called / len(graded) if graded else 0.0,
        expected_relevant_share=sum(1 for p, _ in judged if p.relevant) / n,
        near_miss_relevant_share=(sum(1 for _, v in near if kept(v)) / len(near) if near else 0.0),
        ungraded_share=(n - len(graded)) / n,
        calls=calls,
        # Failed calls carry no latency: the check's own time is the floor of their sum.
        seconds_per_call=max(usage.latency_seconds, wall) / calls if calls else wall / questions,
        tokens_per_call=usage.total_tokens / calls if calls else 0.0,
        problems=(),
    )
    return _with_problems(result, judged, errors, min_agreement)


def _with_problems(
    result: JudgeCheck,
    judged: Sequence[tuple[CheckPair, Verdict | None]],
    errors: Sequence[str],
    min_agreement: float,
) -> JudgeCheck:
    problems: list[str] = []
    if result.ungraded_share == 1.0:
        why = errors[0] if errors else _first_error(judged)
        problems.append(f"no pair could be graded ({why})")
    elif result.relevant_share >= MAX_RELEVANT_SHARE:
        problems.append(
            f"a run keeps {result.relevant_share:.0%} of the documents it graded "
            f"({result.expected_relevant_share:.0%} are relevant): the loop would keep everything"
        )
    elif result.relevant_share <= MIN_RELEVANT_SHARE:
        problems.append(
            f"a run keeps {result.relevant_share:.0%} of the documents it graded "
            f"({result.expected_relevant_share:.0%} are relevant): the loop would keep nothing"
        )
    if result.agreement < min_agreement:
        problems.append(
            f"it agreed with the known answers on {result.agreement:.2f} of the pairs "
            f"(at least {min_agreement:.2f} needed)"
        )
    return replace(result, problems=tuple(problems))


def _first_error(judged: Sequence[tuple[CheckPair, Verdict | None]]) -> str:
    return next((v.error for _, v in judged if v is not None and v.error), "no reason given")
