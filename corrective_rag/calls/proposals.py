"""Whether a grading call should also propose the next query: the loop's call mode, per request.

The loop's one-call mode asks the evaluator's grading call to propose the next query (judge and
propose, :mod:`corrective_rag.loop.callmode`). ``LLMEvaluator(propose=None)`` asks
:func:`proposals_wanted`, which finds the answer in two places, so that it holds whatever a
user's wrapper does around the evaluator:

- the context the loop grades in (a context variable, as :mod:`~corrective_rag.calls.scope`
  carries a deadline): a wrapper that calls on in the same thread, or in threads that copy the
  context (``asyncio.to_thread``, :func:`corrective_rag.llm.parallel.parallel_map`), passes it
  with no code of its own;
- the request itself, while the loop waits on it: a wrapper that grades in a thread of its own
  (``ThreadPoolExecutor.submit``, ``threading.Thread``, ``loop.run_in_executor``: a "give up
  after 30 s" idiom) runs where that context is not; there the request the evaluator got (its
  question and documents) is looked up among the requests loops are waiting on.

So a request's call mode travels with it: the thread it is graded in does not change it. Where
the lookup cannot tell (two loops in different call modes waiting on the same question and
documents, or a wrapper that grades another question than it was given while one waits), the
evaluator grades in the two-call form and :func:`proposals_wanted` warns once per process.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import warnings
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass

__all__ = ["asking_proposals", "proposals_wanted"]

# None: no loop asked in this context (a direct call, or a thread a request hopped to)
_WANTED: ContextVar[bool | None] = ContextVar("corrective_rag_proposals_wanted", default=None)


@dataclass(frozen=True, slots=True)
class _Waiting:
    """A request a loop is waiting on, and the call mode it asked for."""

    question: str | None
    ids: frozenset[str] | None
    wanted: bool

    def holds(self, question: str | None, ids: frozenset[str] | None) -> bool:
        """Whether an evaluate call for ``question`` and ``ids`` can be (part of) this request."""
        if question is not None and self.question is not None and question != self.question:
            return False
        return ids is None or self.ids is None or ids <= self.ids


_LOCK = threading.Lock()
_WAITING: dict[int, _Waiting] = {}
_KEYS = itertools.count()
_WARNED = threading.Event()


def proposals_wanted(
    question: str | None = None, documents: Iterable[object] | None = None
) -> bool:
    """Whether the grading call for ``question`` and ``documents`` should propose the next query.

    The context's answer where a loop set one; otherwise the answer of the request a loop is
    waiting on that this call can be (the same question, documents among those sent; with
    neither given, any request a loop is waiting on); ``False`` where there is none, or no
    single answer (warned once).
    """
    wanted = _WANTED.get()
    if wanted is not None:
        return wanted
    with _LOCK:
        if not _WAITING:
            return False  # no loop is grading: a direct call
        ids = None if documents is None else frozenset(str(getattr(d, "id", d)) for d in documents)
        modes = {w.wanted for w in _WAITING.values() if w.holds(question, ids)}
    if len(modes) == 1:
        return modes.pop()
    if not _WARNED.is_set():
        _WARNED.set()
        warnings.warn(
            "an evaluator graded outside the loop's context while a loop waited, and its "
            "request matches no single waiting request: graded without a proposal "
            "(two-call form); forward the question and documents as given, or grade in the "
            "loop's thread",
            UserWarning,
            stacklevel=2,
        )
    return False


@contextlib.contextmanager
def asking_proposals(
    wanted: bool, question: str | None = None, documents: Iterable[object] | None = None
) -> Iterator[None]:
    """Within the block, grading calls propose as ``wanted`` says (restored afterwards).

    With ``question`` and ``documents`` (what the loop sends the evaluator), the request is
    also registered while the block runs, so that a wrapper grading it in a thread of its own
    finds the same answer.
    """
    token = _WANTED.set(bool(wanted))
    ids = None if documents is None else frozenset(str(getattr(d, "id", d)) for d in documents)
    key = next(_KEYS)
    with _LOCK:
        _WAITING[key] = _Waiting(question, ids, bool(wanted))
    try:
        yield
    finally:
        with _LOCK:
            del _WAITING[key]
        _WANTED.reset(token)
