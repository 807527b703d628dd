"""The call mode: whether the grading call also proposes the next query.

``one-call`` (the default): an evaluator that can propose (it has ``proposing()``,
:class:`~corrective_rag.protocols.ProposingEvaluator`, as ``LLMEvaluator`` does) is asked to
propose the next query in its grading call when the rewriter reads proposals (it declares
``reads_proposal = True``, as ``LLMRewriter`` does): the rewriter checks that proposal instead
of calling its model, so an iteration costs one call. ``two-call``: the evaluator grades as
given, and the rewriter makes a call of its own (give the rewriter a model of its own this way).
An evaluator built with an explicit ``propose=True`` or ``False`` keeps it in either mode.

Nothing here compares objects: wrapping the chat model in a proxy (a cache, a rate limiter, a
tracer) changes no call.
"""

from __future__ import annotations

from typing import Literal

from corrective_rag.errors import ConfigError
from corrective_rag.protocols import Evaluator, ProposingEvaluator

__all__ = ["CALL_MODES", "CallMode", "check_call_mode", "grading_evaluator"]

CallMode = Literal["one-call", "two-call"]
CALL_MODES: tuple[CallMode, ...] = ("one-call", "two-call")


def check_call_mode(call_mode: object) -> CallMode:
    """``call_mode`` if it is one of :data:`CALL_MODES`.

    Raises:
        ConfigError: it is not.
    """
    for mode in CALL_MODES:
        if call_mode == mode:
            return mode
    raise ConfigError(f"call_mode must be one of {', '.join(CALL_MODES)}, got {call_mode!r}")


def grading_evaluator(evaluator: Evaluator, rewriter: object, call_mode: CallMode) -> Evaluator:
    """The evaluator the loop grades with: proposing in one-call mode, where that means anything.

    The user's evaluator is not changed: a proposing evaluator is its ``proposing()`` copy.
    """
    reads = getattr(rewriter, "reads_proposal", False) is True
    if call_mode == "one-call" and reads and isinstance(evaluator, ProposingEvaluator):
        return evaluator.proposing()
    return evaluator
