"""Whether a grading call should also propose the next query: the loop's call mode, per call.

The loop's one-call mode asks the evaluator's grading call to propose the next query (judge and
propose, :mod:`corrective_rag.loop.callmode`). It says so the way :mod:`~corrective_rag.calls.
scope` carries a deadline: in a context variable around its ``evaluate`` call, which
``LLMEvaluator(propose=None)`` reads with :func:`proposals_wanted`. So any wrapper a user puts
around an evaluator (logging, caching, tracing) passes the request through with no code of its
own, and a wrapper around the rewriter receives the proposal in its ``RewriteRequest``: an
iteration stays one call whoever wraps what. A wrapper that grades in threads of its own
passes the context on as :func:`corrective_rag.llm.parallel.parallel_map` does
(``contextvars.copy_context().run``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

__all__ = ["asking_proposals", "proposals_wanted"]

_WANTED: ContextVar[bool] = ContextVar("corrective_rag_proposals_wanted", default=False)


def proposals_wanted() -> bool:
    """Whether the calling context asks grading calls to propose the next query."""
    return _WANTED.get()


@contextlib.contextmanager
def asking_proposals(wanted: bool) -> Iterator[None]:
    """Within the block, :func:`proposals_wanted` is ``wanted`` (restored afterwards)."""
    token = _WANTED.set(bool(wanted))
    try:
        yield
    finally:
        _WANTED.reset(token)
