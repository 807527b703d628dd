"""The call mode: whether the grading call also proposes the next query.

``one-call`` (the default): the loop asks the evaluator's grading call to propose the next query
(judge and propose), and hands that proposal to the rewriter, which checks it instead of calling
a model of its own: an iteration costs one call. ``two-call``: the evaluator grades only, and the
rewriter makes a call of its own (give the rewriter a model of its own this way). An evaluator
built with an explicit ``propose=True`` or ``False`` (``LLMEvaluator``) keeps it in either mode.

The request travels with the call, not on the objects (:mod:`corrective_rag.calls.proposals`):
the loop's ``evaluate`` call runs inside :func:`grading_context`, which says the call mode in
the loop's context and registers the request (question and documents) while the loop waits on
it, and the proposal reaches the rewriter in its :class:`~corrective_rag.types.RewriteRequest`.
So a user's wrapper around the evaluator, the rewriter or the chat model (a logger, a cache, a
rate limiter, a tracer, a timeout that grades in a thread of its own) changes no call. Only
:func:`unused_rewriter_model` looks at the objects, to warn of a set-up that cannot mean what
it says.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator, Sequence
from typing import Literal

from corrective_rag.calls.proposals import asking_proposals
from corrective_rag.errors import ConfigError
from corrective_rag.observe.spans import stage
from corrective_rag.protocols import ProposalReader
from corrective_rag.types import Document

__all__ = [
    "CALL_MODES",
    "CallMode",
    "check_call_mode",
    "grading_context",
    "unused_rewriter_model",
]

CallMode = Literal["one-call", "two-call"]
CALL_MODES: tuple[CallMode, ...] = ("one-call", "two-call")


def check_call_mode(call_mode: object) -> CallMode:
    """``call_mode`` if it is one of :data:`CALL_MODES`.

    Raises:
        ConfigError: it is not.
    """
    for mode in CALL_MODES:
        if isinstance(call_mode, str) and call_mode == mode:
            return mode
    raise ConfigError(f"call_mode must be one of {', '.join(CALL_MODES)}, got {call_mode!r}")


@contextlib.contextmanager
def grading_context(
    call_mode: CallMode,
    rewriter: object,
    question: str | None = None,
    documents: Sequence[Document] | None = None,
) -> Iterator[None]:
    """The context the loop grades ``documents`` for ``question`` in: one-call mode proposes.

    Unless the rewriter says it never reads a proposal (:class:`~corrective_rag.protocols.
    ProposalReader`). The request is registered while the block runs, so an evaluator that a
    wrapper calls in a thread of its own finds the same call mode. Its calls are the ``grade``
    stage's (:func:`~corrective_rag.observe.stage`).
    """
    unread = isinstance(rewriter, ProposalReader) and rewriter.reads_proposals is False
    with (
        asking_proposals(call_mode == "one-call" and not unread, question, documents),
        stage("grade"),
    ):
        yield


def unused_rewriter_model(evaluator: object, rewriter: object, call_mode: CallMode) -> bool:
    """Warn (and return ``True``) when the rewriter's own model would almost never be asked.

    In one-call mode an ``LLMRewriter`` checks the grading call's proposal and calls its model
    only when the reply held no usable one: a rewriter given another model than the
    evaluator's (another server or model name: "a bigger model rewrites") would sit idle.
    ``two-call`` is what such a set-up means. Only the package's own client is compared (a
    proxy around the same model is no other model); wrapped components are not looked into.
    """
    from corrective_rag.evaluate.llm import LLMEvaluator
    from corrective_rag.llm.client import OpenAIChatClient
    from corrective_rag.rewrite.llm import LLMRewriter

    if call_mode != "one-call" or not isinstance(rewriter, LLMRewriter):
        return False
    if not isinstance(evaluator, LLMEvaluator) or evaluator.propose is False:
        return False
    mine, theirs = rewriter.chat, evaluator.chat
    if not isinstance(mine, OpenAIChatClient) or not isinstance(theirs, OpenAIChatClient):
        return False
    if (mine.base_url, mine.model) == (theirs.base_url, theirs.model):
        return False
    warnings.warn(
        f"call_mode='one-call': the LLMRewriter's model ({mine.model}) is not the "
        f"LLMEvaluator's ({theirs.model}) and is asked only when a grading reply holds no "
        "usable next query; pass call_mode='two-call' to have it write every rewrite",
        UserWarning,
        stacklevel=3,
    )
    return True
