"""Grade labelled pairs with one judge: one evaluate call per question, under one deadline.

Every check (plain, ``--compare``, ``--pairs``) grades through :func:`grade_pairs`: the questions
are asked one after another, each question's documents in one evaluate call (as a run grades an
iteration's documents), and the grading stops before the next question once the enclosing call
scope is cancelled (Ctrl-C) or its deadline has passed (:mod:`corrective_rag.calls.scope`: a
call in flight then ends too). What was graded is kept: a stopped grading returns the verdicts
it has, the pairs it did not reach ungraded, and says how far it got.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from corrective_rag.calls import scope
from corrective_rag.errors import CorrectiveRAGError
from corrective_rag.evaluate.check.pairs import CheckPair
from corrective_rag.protocols import Evaluator
from corrective_rag.types import Usage, Verdict

__all__ = ["Grading", "Progress", "grade_pairs", "stopped"]

# (what is graded, questions asked so far, questions in all, seconds so far)
Progress = Callable[[str, int, int, float], None]


@dataclass(frozen=True, slots=True)
class Grading:
    """One judge's verdicts on the pairs, in their order (``None``: not graded), and its cost.

    Attributes:
        verdicts: one per pair; ``None`` where its question's call failed or was not asked.
        usage: the calls' usage, summed.
        seconds: wall time of the grading.
        errors: the failed calls, as ``ErrorType: message``.
        asked: questions asked.
        questions: questions in all.
    """

    verdicts: tuple[Verdict | None, ...]
    usage: Usage
    seconds: float
    errors: tuple[str, ...]
    asked: int
    questions: int

    @property
    def complete(self) -> bool:
        """Every question was asked."""
        return self.asked == self.questions


def stopped() -> bool:
    """Whether the enclosing call scope is cancelled or past its deadline."""
    at = scope.deadline()
    return scope.cancelled() or (at is not None and time.monotonic() >= at)


def grade_pairs(
    evaluator: Evaluator,
    pairs: Sequence[CheckPair],
    *,
    name: str = "judge",
    progress: Progress | None = None,
) -> Grading:
    """Grade ``pairs`` with ``evaluator``: one evaluate call per question, its pairs together.

    A call that raises one of the package's errors, or answers another number of verdicts than
    documents, leaves its question's pairs ungraded and its reason among the errors; the
    grading stops before the next question once the enclosing call scope is cancelled or past
    its deadline (:func:`stopped`). ``progress`` hears of each question asked, as
    ``(name, asked, questions, seconds)``.
    """
    by_question: dict[str, list[int]] = {}
    for i, pair in enumerate(pairs):
        by_question.setdefault(pair.question, []).append(i)
    verdicts: list[Verdict | None] = [None] * len(pairs)
    usage, errors = Usage(), []
    started = time.monotonic()
    asked = 0
    for question, indexes in by_question.items():
        if stopped():
            break
        asked += 1
        try:
            evaluation = evaluator.evaluate(question, [pairs[i].document for i in indexes])
        except CorrectiveRAGError as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
        else:
            usage += evaluation.usage
            if len(evaluation.verdicts) != len(indexes):  # against the evaluator contract
                errors.append(
                    f"EvaluatorError: {len(evaluation.verdicts)} verdicts for"
                    f" {len(indexes)} documents (one per document, in order)"
                )
            else:
                for i, verdict in zip(indexes, evaluation.verdicts, strict=True):
                    verdicts[i] = verdict
        if progress is not None:
            progress(name, asked, len(by_question), time.monotonic() - started)
    return Grading(
        tuple(verdicts),
        usage,
        time.monotonic() - started,
        tuple(errors),
        asked,
        len(by_question),
    )
