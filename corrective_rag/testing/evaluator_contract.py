"""One conformance suite any :class:`~corrective_rag.protocols.Evaluator` must pass.

Run it on your own evaluator (an LLM judge behind your own client, a cross-encoder, a rules
engine) before handing it to the loop::

    from corrective_rag.testing.evaluator_contract import check_evaluator

    check_evaluator(MyEvaluator())  # raises ContractViolation listing every broken rule

What it holds an evaluator to (the verdict contract of :class:`~corrective_rag.types.Verdict`):

* ``documents_per_call`` is declared: an int >= 1, or ``None`` for no LLM calls;
* ``evaluate`` returns an :class:`~corrective_rag.types.Evaluation` with one
  :class:`~corrective_rag.types.Verdict` per document, for the ids given, in the order given
  (no verdict for an id it was not sent), and no documents, no verdicts;
* every verdict has the contract's types and ranges: ``relevant`` a bool, ``label`` a
  :class:`~corrective_rag.types.Relevance`, ``score`` and ``confidence`` finite floats in 0..1;
  ungraded verdicts have all four ``None`` and say why in ``error``;
* an ungraded verdict is never counted: the filter policy leaves it ungraded and the stop rule
  counts no confidence of it;
* ``missing`` is a tuple of short, non-empty strings naming what is still unanswered, never a
  list of the question's words a document lacks: a document that answers the question in full
  is not said to miss "name" because it does not use that word;
* usage is a :class:`~corrective_rag.types.Usage` of non-negative counts, with no LLM call for an
  evaluator that declares none.

The oracle for types and ranges is :func:`verdict_violations`, written here once, independent of
the checks :class:`~corrective_rag.types.Verdict` makes on construction (an evaluator can hand
back objects that never went through them).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from corrective_rag.errors import CorrectiveRAGError
from corrective_rag.evaluate.policy import Decision, decide, get_policy
from corrective_rag.loop.stopping import sureness
from corrective_rag.types import (
    MAX_MISSING_CHARS,
    MAX_MISSING_ITEMS,
    Document,
    Evaluation,
    Relevance,
    Usage,
    Verdict,
)

__all__ = ["PROBES", "ContractViolation", "Probe", "check_evaluator", "verdict_violations"]


class ContractViolation(AssertionError):
    """An evaluator broke the verdict contract; ``violations`` lists each broken rule."""

    def __init__(self, violations: Sequence[str]) -> None:
        self.violations: tuple[str, ...] = tuple(violations)
        super().__init__("evaluator contract broken:\n- " + "\n- ".join(self.violations))


@dataclass(frozen=True, slots=True)
class Probe:
    """A question and the documents to judge it against.

    ``answers`` is the id of a document that answers the question in full; ``filler`` are
    question words that ask for nothing a document must say.
    """

    question: str
    documents: tuple[Document, ...]
    answers: str = ""
    filler: tuple[str, ...] = ()


PROBES: tuple[Probe, ...] = (
    Probe(
        "What is the name of the largest moon of Jupiter?",
        (
            Document("ganymede", "Ganymede, a moon of Jupiter, is the largest moon there is."),
            Document("titan", "Titan is the largest moon of Saturn."),
            Document("honey", "Bees turn flower nectar into honey."),
        ),
        answers="ganymede",
        filler=("name", "what"),
    ),
    Probe(
        "Which river flows through Vienna?",
        (Document("danube", "The Danube flows through Vienna, Bratislava and Budapest."),),
        answers="danube",
        filler=("which",),
    ),
)


def _is_unit(value: object) -> bool:
    return (
        isinstance(value, float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and 0.0 <= value <= 1.0
    )


def verdict_violations(verdict: object) -> list[str]:
    """The contract rules ``verdict`` breaks on its own (types, ranges, graded or ungraded)."""
    if not isinstance(verdict, Verdict):
        return [f"a verdict must be a Verdict, got {type(verdict).__name__}"]
    name = f"verdict for {verdict.document_id!r}"
    found = []
    graded = (verdict.relevant, verdict.label, verdict.score, verdict.confidence)
    if all(v is None for v in graded):
        if not isinstance(verdict.error, str) or not verdict.error.strip():
            found.append(f"{name}: an ungraded verdict must say why in error")
    else:
        if not isinstance(verdict.relevant, bool):
            found.append(f"{name}: relevant must be a bool, got {verdict.relevant!r}")
        if not isinstance(verdict.label, Relevance):
            found.append(f"{name}: label must be a Relevance, got {verdict.label!r}")
        for field in ("score", "confidence"):
            value = getattr(verdict, field)
            if not _is_unit(value):
                found.append(f"{name}: {field} must be a finite float in 0..1, got {value!r}")
    if not isinstance(verdict.reasoning, str):
        found.append(f"{name}: reasoning must be a string")
    missing = verdict.missing
    if not isinstance(missing, tuple) or len(missing) > MAX_MISSING_ITEMS:
        found.append(f"{name}: missing must be a tuple of at most {MAX_MISSING_ITEMS} items")
    elif not all(
        isinstance(m, str) and m.strip() == m and 0 < len(m) <= MAX_MISSING_CHARS for m in missing
    ):
        found.append(f"{name}: missing items must be short, stripped, non-empty strings")
    return found


def _never_counted(verdict: Verdict) -> list[str]:
    """An ungraded verdict is neither kept nor dropped, nor counted by the stop rule."""
    if verdict.graded:
        return []
    found = []
    for preset in ("general", "ecommerce"):
        if decide(verdict, get_policy(preset)) is not Decision.UNGRADED:
            found.append(f"ungraded {verdict.document_id!r} was decided under {preset}")
    if (0, 0.0) != sureness([verdict]):
        found.append(f"ungraded {verdict.document_id!r} counts toward the stop rule")
    return found


def _evaluation_violations(
    evaluation: object, documents: Sequence[Document], per_call: int | None
) -> list[str]:
    if not isinstance(evaluation, Evaluation):
        return [f"evaluate must return an Evaluation, got {type(evaluation).__name__}"]
    found = []
    verdicts = evaluation.verdicts
    if not isinstance(verdicts, tuple):
        found.append("Evaluation.verdicts must be a tuple")
        verdicts = tuple(verdicts)
    given = [d.id for d in documents]
    returned = [getattr(v, "document_id", None) for v in verdicts]
    if given != returned:
        found.append(f"verdict ids {returned} are not the ids given, in order: {given}")
    for verdict in verdicts:
        found += verdict_violations(verdict)
        if isinstance(verdict, Verdict):
            found += _never_counted(verdict)
    usage = evaluation.usage
    if not isinstance(usage, Usage):
        found.append(f"usage must be a Usage, got {type(usage).__name__}")
    else:
        counts = (usage.llm_calls, usage.prompt_tokens, usage.completion_tokens, usage.failed_calls)
        if any(not isinstance(c, int) or c < 0 for c in counts):
            found.append(f"usage counts must be non-negative ints, got {usage}")
        if per_call is None and usage.llm_calls:
            found.append("an evaluator with documents_per_call None made LLM calls")
    return found


def _missing_violations(evaluation: Evaluation, probe: Probe) -> list[str]:
    """A document that answers the question in full is not said to miss a filler word."""
    found = []
    for verdict in evaluation.verdicts:
        if not isinstance(verdict, Verdict) or verdict.document_id != probe.answers:
            continue
        said = {m.casefold() for m in verdict.missing}
        lexical = sorted(said & set(probe.filler))
        if verdict.relevant and lexical:
            found.append(
                f"missing of {verdict.document_id!r} lists question words {lexical}, not an "
                "unanswered part: missing is what the judge says is unanswered"
            )
    return found


def check_evaluator(evaluator: object, probes: Sequence[Probe] = PROBES) -> None:
    """Run the contract on ``evaluator`` over ``probes``.

    An exception an evaluator raises on a well-formed call (any, not only the package's) is
    reported as a violation, never raised through.

    Raises:
        ContractViolation: listing every rule broken (nothing raised: the evaluator passes).
    """
    found: list[str] = []
    per_call = getattr(evaluator, "documents_per_call", "undeclared")
    if per_call is not None and (
        isinstance(per_call, bool) or not isinstance(per_call, int) or per_call < 1
    ):
        found.append(f"documents_per_call must be an int >= 1 or None, got {per_call!r}")
        per_call = 1
    evaluate = getattr(evaluator, "evaluate", None)
    if not callable(evaluate):
        raise ContractViolation([*found, "evaluator has no evaluate(question, documents)"])
    for probe in probes:
        evaluation = _called(evaluate, probe.question, probe.documents, found)
        if evaluation is None:
            continue
        found += _evaluation_violations(evaluation, probe.documents, per_call)
        if isinstance(evaluation, Evaluation):
            found += _missing_violations(evaluation, probe)
        if len(probe.documents) > 1:  # the same documents in the other order: same ids back
            backwards = tuple(reversed(probe.documents))
            again = _called(evaluate, probe.question, backwards, found)
            if again is not None:
                found += _evaluation_violations(again, backwards, per_call)
    empty = _called(evaluate, probes[0].question, (), found) if probes else Evaluation(())
    if empty is not None and (not isinstance(empty, Evaluation) or empty.verdicts):
        found.append("no documents must give an Evaluation with no verdicts")
    if found:
        raise ContractViolation(list(dict.fromkeys(found)))


def _called(
    evaluate: Callable[..., object],
    question: str,
    documents: Sequence[Document],
    found: list[str],
) -> object | None:
    """``evaluate(question, documents)``; ``None`` when it raised (the violation is added)."""
    try:
        return evaluate(question, list(documents))
    except Exception as exc:  # whatever a user's evaluator raises is reported
        kind = "" if isinstance(exc, CorrectiveRAGError) else " (not the package's error tree)"
        found.append(f"evaluate raised on a well-formed call{kind}: {type(exc).__name__}: {exc}")
        return None
